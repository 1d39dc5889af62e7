// A mapped shared-memory segment: POSIX shm through Boost.Interprocess
// (shared_memory_object + mapped_region), or an anonymous shared mapping that
// survives fork() (tests, embedded use). Only the mapping lives here; no Boost
// managed segment or process-shared mutex is ever used, because a holder that
// dies would wedge them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

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
  // An anonymous MAP_SHARED mapping: shared with children forked after this call.
  static Result<ShmSegment> anonymous(size_t size);
  // Removes the name (mappings stay valid). Returns false if it did not exist.
  static bool remove(const std::string& name);

  void* data() const noexcept;
  size_t size() const noexcept;
  const std::string& name() const noexcept { return name_; }

 private:
  std::unique_ptr<boost::interprocess::mapped_region> region_;
  std::string name_;
};

// One load per page of [addr, addr + bytes). Populating a mapping fills
// this process's page tables, but a hypervisor that shadows them (as this
// project's VM does) still maps each page for the process at its first
// access: about 2 us a page here (0.5 s more for engram_connect plus a
// load of a 972 MB arena). A process about to touch every page of a range
// pays that here instead of during its first copies. Without shadow paging
// the pages are mapped already and each load is a TLB miss.
void load_pages(const void* addr, size_t bytes) noexcept;

}  // namespace engram
