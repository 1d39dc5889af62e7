#include "core/shm.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/anonymous_shared_memory.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace bip = boost::interprocess;

namespace engram {

ShmSegment::ShmSegment() = default;

ShmSegment::~ShmSegment() {
  if (addr_) ::munmap(addr_, size_);
  if (fd_ >= 0) ::close(fd_);
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : region_(std::move(o.region_)), addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)),
      fd_(std::exchange(o.fd_, -1)), name_(std::move(o.name_)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  ShmSegment old(std::move(*this));  // what this held goes when `old` does
  region_ = std::move(o.region_);
  addr_ = std::exchange(o.addr_, nullptr);
  size_ = std::exchange(o.size_, 0);
  fd_ = std::exchange(o.fd_, -1);
  name_ = std::move(o.name_);
  return *this;
}

void* ShmSegment::data() const noexcept { return region_ ? region_->get_address() : addr_; }
size_t ShmSegment::size() const noexcept { return region_ ? region_->get_size() : size_; }

void ShmSegment::close_fd() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

static std::string shm_path(const std::string& name) { return "/dev/shm/" + name; }

// Maps every page of a fresh mapping now, in one call. Otherwise each
// process faults on its first touch of each page: a writer's first pass
// over the arena pays one fault per block, which under a hypervisor that
// shadows page tables holds small inserts at a fraction of their speed
// until every block has been touched (bench/NOTES.md, "Page faults in
// fresh processes"). Writers
// and samplers reach every block in the end anyway (blocks circulate
// through the free list), so this moves that cost to attach without adding
// to it. Best effort, hence no error: kernels before 5.14 do not know the
// advice and fault lazily as before.
static void populate_pages(void* addr, size_t size, bool writable) {
  (void)madvise(addr, size, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
}

void load_pages(const void* addr, size_t bytes) noexcept {
  if (bytes == 0) return;
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  // The first byte, then the first byte of every later page the range
  // reaches: a range that starts mid-page reaches one page more than
  // bytes / page rounded up, and no byte outside it is read.
  const uintptr_t first = reinterpret_cast<uintptr_t>(addr), end = first + bytes;
  (void)*reinterpret_cast<const volatile char*>(first);
  for (uintptr_t a = (first | (page - 1)) + 1; a < end; a += page) (void)*reinterpret_cast<const volatile char*>(a);
}

Result<ShmSegment> ShmSegment::create(const std::string& name, size_t size, unsigned mode) {
  if (name.empty() || name.find('/') != std::string::npos)
    return Status{Errc::invalid_argument, "shared memory name '" + name + "' must be non-empty and contain no '/'"};
  if (size == 0) return Status{Errc::invalid_argument, "shared memory segment '" + name + "' has size 0"};
  try {
    bip::permissions perm(mode);
    bip::shared_memory_object obj(bip::create_only, name.c_str(), bip::read_write, perm);
    int fd = obj.get_mapping_handle().handle;
    // umask may have masked the requested mode; set it explicitly.
    (void)fchmod(fd, mode);
    int rc = posix_fallocate(fd, 0, static_cast<off_t>(size));
    if (rc != 0) {
      bip::shared_memory_object::remove(name.c_str());
      std::string msg = "cannot reserve " + std::to_string(size) + " bytes for shared memory '" + shm_path(name) +
                        "': " + std::strerror(rc);
      if (rc == ENOSPC)
        msg += ". /dev/shm is too small (Docker's default is 64 MB): enlarge it (docker run --shm-size=2g, or "
               "mount -o remount,size=4G /dev/shm) or configure a smaller arena";
      return Status{rc == ENOSPC ? Errc::out_of_memory : Errc::system, msg};
    }
    ShmSegment seg;
    seg.region_ = std::make_unique<bip::mapped_region>(obj, bip::read_write, 0, size);
    populate_pages(seg.region_->get_address(), size, true);
    seg.name_ = name;
    return seg;
  } catch (const bip::interprocess_exception& e) {
    std::string msg = "cannot create shared memory '" + shm_path(name) + "': " + e.what();
    if (e.get_error_code() == bip::already_exists_error)
      msg += " (it already exists: a running or crashed engram instance owns it; remove it if stale)";
    return Status{Errc::system, msg};
  }
}

Result<ShmSegment> ShmSegment::open(const std::string& name, Access access) {
  try {
    auto mode = access == Access::read_only ? bip::read_only : bip::read_write;
    bip::shared_memory_object obj(bip::open_only, name.c_str(), mode);
    ShmSegment seg;
    seg.region_ = std::make_unique<bip::mapped_region>(obj, mode);
    populate_pages(seg.region_->get_address(), seg.region_->get_size(), access == Access::read_write);
    seg.name_ = name;
    return seg;
  } catch (const bip::interprocess_exception& e) {
    return Status{Errc::system, "cannot open shared memory '" + shm_path(name) + "': " + e.what()};
  }
}

namespace {

std::string g_seal_note;

std::string read_text(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// A number from a cgroup file ("max" and unreadable: none).
bool read_number(const std::string& path, uint64_t* out) {
  std::string t = read_text(path);
  if (t.empty() || t[0] < '0' || t[0] > '9') return false;
  *out = std::strtoull(t.c_str(), nullptr, 10);
  return true;
}

std::string gib(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f GiB", double(bytes) / double(1ull << 30));
  return b;
}

}  // namespace

size_t memory_available(std::string* why) {
  size_t best = SIZE_MAX;
  std::string meminfo = read_text("/proc/meminfo");
  if (size_t p = meminfo.find("MemAvailable:"); p != std::string::npos) {
    best = std::strtoull(meminfo.c_str() + p + 13, nullptr, 10) * 1024;
    *why = gib(best) + " available on this machine (MemAvailable)";
  }
  // Every memory cgroup from this process's own up to the root: v2 (the
  // "0::" line; memory.max, memory.current) and v1 (the "memory" line).
  std::string groups = read_text("/proc/self/cgroup");
  for (size_t at = 0; at < groups.size();) {
    size_t end = groups.find('\n', at);
    if (end == std::string::npos) end = groups.size();
    std::string line = groups.substr(at, end - at);
    at = end + 1;
    size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    std::string controllers = line.substr(c1 + 1, c2 - c1 - 1), path = line.substr(c2 + 1);
    bool v2 = controllers.empty();
    if (!v2 && controllers != "memory") continue;
    std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
    if (v2 && ::access("/sys/fs/cgroup/unified", F_OK) == 0) root = "/sys/fs/cgroup/unified";
    for (;;) {
      std::string dir = root + (path == "/" ? "" : path);
      uint64_t limit = 0, used = 0;
      if (read_number(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"), &limit) &&
          read_number(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"), &used) && limit < (1ull << 62)) {
        size_t left = limit > used ? limit - used : 0;
        if (left < best) {
          best = left;
          *why = gib(left) + " left under the memory limit of cgroup " + path + " (" + gib(limit) + ", " + gib(used) +
                 " used)";
        }
      }
      if (path == "/" || path.empty()) break;
      path = path.substr(0, path.find_last_of('/'));
      if (path.empty()) path = "/";
    }
  }
  return best;
}

const std::string& ShmSegment::seal_note() { return g_seal_note; }

Result<ShmSegment> ShmSegment::create_sealed(const std::string& label, size_t size, Sealing sealing) {
  return create_sealed(label, size, sealing, {{0, size}});
}

// Refuses `bytes` more of shared memory that this process could not get
// without the OOM killer (see create_sealed).
static Status check_available(const std::string& label, uint64_t bytes) {
  std::string why;
  if (size_t avail = memory_available(&why); bytes > avail)
    return Status{Errc::out_of_memory, "shared memory '" + label + "' needs " + gib(bytes) + ", but there are " + why +
                                           "; configure a smaller [arena] (or fewer, smaller tables), or give the "
                                           "server more memory"};
  return Status::Ok();
}

static Status reserve(int fd, const std::string& label, uint64_t offset, uint64_t bytes) {
  if (int rc = posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(bytes)); rc != 0)
    return Status{rc == ENOSPC || rc == ENOMEM ? Errc::out_of_memory : Errc::system,
                  "cannot reserve " + gib(bytes) + " for shared memory '" + label + "': " + std::strerror(rc) +
                      "; configure a smaller [arena], or give the server more memory"};
  return Status::Ok();
}

Result<ShmSegment> ShmSegment::create_sealed(const std::string& label, size_t size, Sealing sealing,
                                             const std::vector<std::pair<uint64_t, uint64_t>>& reserved) {
  if (size == 0) return Status{Errc::invalid_argument, "shared memory segment '" + label + "' has size 0"};
  uint64_t total = 0;
  for (const auto& [off, n] : reserved) {
    if (off > size || n > size - off)
      return Status{Errc::invalid_argument, "shared memory '" + label + "': a reserved range runs past its end"};
    total += n;
  }
  if (Status s = check_available(label, total); !s.ok()) return s;
  ShmSegment seg;
  seg.name_ = label;
  seg.fd_ = ::memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (seg.fd_ < 0) return Status{Errc::system, "memfd_create for '" + label + "': " + std::strerror(errno)};
  if (::ftruncate(seg.fd_, static_cast<off_t>(size)) != 0)
    return Status{Errc::system, "cannot size shared memory '" + label + "': " + std::strerror(errno)};
  // Every reserved page now: a shortage is reported here, never a SIGBUS later.
  for (const auto& [off, n] : reserved)
    if (n > 0)
      if (Status s = reserve(seg.fd_, label, off, n); !s.ok()) return s;
  void* a = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, seg.fd_, 0);
  if (a == MAP_FAILED) return Status{Errc::system, "cannot map shared memory '" + label + "': " + std::strerror(errno)};
  seg.addr_ = a;
  seg.size_ = size;
  for (const auto& [off, n] : reserved) seg.populate(off, n);
  int seals = F_SEAL_SHRINK | F_SEAL_GROW;
  if (::fcntl(seg.fd_, F_ADD_SEALS, seals) != 0)
    return Status{Errc::system, "cannot seal shared memory '" + label + "': " + std::strerror(errno)};
  if (sealing == Sealing::writable_here_only && ::fcntl(seg.fd_, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0) {
    if (errno != EINVAL) return Status{Errc::system, "cannot seal shared memory '" + label + "': " + std::strerror(errno)};
    if (g_seal_note.empty())
      g_seal_note = "this kernel has no F_SEAL_FUTURE_WRITE (Linux 5.1+): table indexes are not sealed against "
                    "writable mappings, only kept from clients";
  }
  if (::fcntl(seg.fd_, F_ADD_SEALS, F_SEAL_SEAL) != 0)
    return Status{Errc::system, "cannot seal shared memory '" + label + "': " + std::strerror(errno)};
  return seg;
}

Status ShmSegment::commit(uint64_t offset, uint64_t bytes) {
  if (fd_ < 0 || offset > size_ || bytes > size_ - offset)
    return {Errc::invalid_argument, "shared memory '" + name_ + "': nothing to commit there"};
  if (Status s = check_available(name_, bytes); !s.ok()) return s;
  if (Status s = reserve(fd_, name_, offset, bytes); !s.ok()) return s;
  populate(offset, bytes);
  return Status::Ok();
}

Status ShmSegment::release(uint64_t offset, uint64_t bytes) {
  if (fd_ < 0 || offset > size_ || bytes > size_ - offset)
    return {Errc::invalid_argument, "shared memory '" + name_ + "': nothing to release there"};
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset), static_cast<off_t>(bytes)) != 0)
    return {Errc::system, "cannot give back " + gib(bytes) + " of shared memory '" + name_ + "': " + std::strerror(errno)};
  return Status::Ok();
}

void ShmSegment::populate(uint64_t offset, uint64_t bytes) const noexcept {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  void* base = data();
  if (!base || bytes == 0 || offset >= size()) return;
  const uint64_t first = offset / page * page, end = std::min<uint64_t>(offset + bytes, size());
  populate_pages(static_cast<char*>(base) + first, end - first, true);
}

Result<ShmSegment> ShmSegment::map_fd(int fd, size_t size, Access access, const std::string& label, Populate populate) {
  ShmSegment seg;
  seg.fd_ = fd;  // closed with seg on every path
  seg.name_ = label;
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return Status{Errc::corrupt, "shared memory '" + label + "' from the server is not sealed against resizing"};
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != size)
    return Status{Errc::corrupt, "shared memory '" + label + "' from the server has another size than it said"};
  bool writable = access == Access::read_write;
  void* a = ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (a == MAP_FAILED) return Status{Errc::system, "cannot map shared memory '" + label + "': " + std::strerror(errno)};
  seg.addr_ = a;
  seg.size_ = size;
  if (populate == Populate::whole) populate_pages(a, size, writable);
  seg.close_fd();
  return seg;
}

Result<ShmSegment> ShmSegment::anonymous(size_t size) {
  try {
    ShmSegment seg;
    seg.region_ = std::make_unique<bip::mapped_region>(bip::anonymous_shared_memory(size));
    return seg;
  } catch (const bip::interprocess_exception& e) {
    return Status{Errc::system, "cannot map " + std::to_string(size) + " bytes of anonymous shared memory: " + e.what()};
  }
}

bool ShmSegment::remove(const std::string& name) { return bip::shared_memory_object::remove(name.c_str()); }

}  // namespace engram
