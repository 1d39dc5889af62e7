// A mapped shared-memory segment: a sealed memfd, the server's segments,
// which clients reach only as file descriptors passed over the control
// socket; POSIX shm through Boost.Interprocess (shared_memory_object +
// mapped_region), for tests; or an anonymous shared mapping that survives
// fork() (tests). Only the mapping lives here; no Boost managed segment or
// process-shared mutex is ever used, because a holder that dies would
// wedge them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.hpp"

namespace boost::interprocess {
class mapped_region;
}

namespace engram {

class ShmSegment {
 public:
  enum class Access { read_only, read_write };

  ShmSegment();
  ~ShmSegment();
  ShmSegment(ShmSegment&&) noexcept;
  ShmSegment& operator=(ShmSegment&&) noexcept;

  // Named segments serve tests that share memory between processes they
  // start; the server's are create_sealed.
  // Creates /dev/shm/<name> of `size` bytes with `mode`, reserving every page up
  // front (posix_fallocate) so that a full /dev/shm is reported here, never as a
  // SIGBUS later. Fails if the name exists; remove stale segments first.
  // Named segments come back mapped in full (every page table entry present,
  // where the kernel can: 5.14 and later), so that no page faults later
  // (a shadowing hypervisor may still map each page at first access: see
  // load_pages).
  static Result<ShmSegment> create(const std::string& name, size_t size, unsigned mode = 0660);
  // Maps an existing segment, whole, and in full like create().
  static Result<ShmSegment> open(const std::string& name, Access access);
  // How a sealed segment may be used by the processes it is handed to.
  enum class Sealing {
    // Mapped writable by anyone who holds the descriptor; its size can
    // never change (F_SEAL_SHRINK | F_SEAL_GROW), so no holder can make
    // another's mapping SIGBUS.
    fixed_size,
    // Also no new writable mapping, by anyone (F_SEAL_FUTURE_WRITE, Linux
    // 5.1+): only this process's mapping, made before the seal, writes.
    // Where the kernel lacks the seal, the segment is fixed_size, and
    // seal_note() says so.
    writable_here_only,
  };
  // A memfd of `size` bytes, all reserved up front (fallocate), sealed,
  // mapped read-write and populated here. `label` names it in
  // /proc/<pid>/maps and in messages. Before reserving, the size is checked
  // against the memory this process may still use (MemAvailable, and the
  // memory cgroup's limit less its usage): a memfd's pages come from no
  // mount with a size, so an arena too large would otherwise end in the
  // OOM killer, not in an error. Errc::out_of_memory says which limit.
  // With `reserved` (bytes from offset 0), only that much is reserved and
  // populated at first: the rest of `size` is a hole that commit() fills
  // later (the arena's classes grow so), which reads as zeros and costs no
  // memory until then.
  static Result<ShmSegment> create_sealed(const std::string& label, size_t size, Sealing sealing);
  static Result<ShmSegment> create_sealed(const std::string& label, size_t size, Sealing sealing,
                                          const std::vector<std::pair<uint64_t, uint64_t>>& reserved);
  // Reserves and populates `bytes` from `offset` of a create_sealed
  // segment's hole, after the same check against the memory this process
  // may use; Errc::out_of_memory says which limit.
  Status commit(uint64_t offset, uint64_t bytes);
  // Frees the pages of `bytes` from `offset` of a create_sealed segment
  // (a hole again: reads as zeros, costs nothing), in every mapping.
  Status release(uint64_t offset, uint64_t bytes);
  // How much of a received segment map_fd populates here.
  enum class Populate { whole, none };
  // Maps a segment received as a descriptor, whole (taking the
  // descriptor: closed here, also on failure). Refused unless it is sealed
  // against shrinking and growing and has exactly `size` bytes, so that no
  // other holder can make this mapping SIGBUS. Populate::none leaves the
  // pages to populate() (a segment with holes: touching a hole would
  // allocate it).
  static Result<ShmSegment> map_fd(int fd, size_t size, Access access, const std::string& label,
                                   Populate populate = Populate::whole);
  // Maps in `bytes` from `offset` of this mapping now (best effort, as
  // create() does), so that they do not fault one page at a time later.
  void populate(uint64_t offset, uint64_t bytes) const noexcept;
  // An anonymous MAP_SHARED mapping: shared with children forked after this call.
  static Result<ShmSegment> anonymous(size_t size);
  // Removes the name (mappings stay valid). Returns false if it did not exist.
  static bool remove(const std::string& name);

  void* data() const noexcept;
  size_t size() const noexcept;
  const std::string& name() const noexcept { return name_; }
  // A sealed segment's descriptor (to pass on), or -1.
  int fd() const noexcept { return fd_; }
  // Closes the descriptor (the mapping stays): once it was passed on.
  void close_fd() noexcept;
  // Empty, or why a writable_here_only segment was only fixed_size.
  static const std::string& seal_note();

 private:
  std::unique_ptr<boost::interprocess::mapped_region> region_;
  void* addr_ = nullptr;  // a memfd's mapping (no region_)
  size_t size_ = 0;
  int fd_ = -1;
  std::string name_;
};

// Bytes this process may still allocate: MemAvailable, and for each memory
// cgroup from its own up, the limit less the usage; `why` names the
// smallest. SIZE_MAX where nothing could be read.
size_t memory_available(std::string* why);

// One load per page of [addr, addr + bytes). Populating a mapping fills
// this process's page tables, but a hypervisor that shadows them (as this
// project's VM does) still maps each page for the process at its first
// access: about 2 us a page here (0.5 s more for engram_connect plus a
// load of a 972 MB arena). A process about to touch every page of a range
// pays that here instead of during its first copies. Without shadow paging
// the pages are mapped already and each load is a TLB miss.
void load_pages(const void* addr, size_t bytes) noexcept;

}  // namespace engram
