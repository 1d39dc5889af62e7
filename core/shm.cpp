#include "core/shm.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/anonymous_shared_memory.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace bip = boost::interprocess;

namespace engram {

ShmSegment::ShmSegment() = default;
ShmSegment::~ShmSegment() = default;
ShmSegment::ShmSegment(ShmSegment&&) noexcept = default;
ShmSegment& ShmSegment::operator=(ShmSegment&&) noexcept = default;

void* ShmSegment::data() const noexcept { return region_ ? region_->get_address() : nullptr; }
size_t ShmSegment::size() const noexcept { return region_ ? region_->get_size() : 0; }

static std::string shm_path(const std::string& name) { return "/dev/shm/" + name; }

// Maps every page of a fresh mapping now, in one call. Otherwise each
// process faults on its first touch of each page: a writer's first pass
// over the arena pays one fault per block, which in this project's VM
// (shadow paging) held the harness's 4 KB inserts at a small fraction of
// their speed until every block had been touched (git 27402b9). Writers
// and samplers reach every block in the end anyway (blocks circulate
// through the free list), so this moves that cost to attach without adding
// to it. Best effort, hence no error: kernels before 5.14 do not know the
// advice and fault lazily as before.
static void populate(void* addr, size_t size, bool writable) {
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
    populate(seg.region_->get_address(), size, true);
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
    populate(seg.region_->get_address(), seg.region_->get_size(), access == Access::read_write);
    seg.name_ = name;
    return seg;
  } catch (const bip::interprocess_exception& e) {
    return Status{Errc::system, "cannot open shared memory '" + shm_path(name) + "': " + e.what()};
  }
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
