// A file that appears whole or not at all: the one home of engram's
// write-then-rename (table exports, learner states; the checkpointer's
// directories use fsync_dir).
//
// Invariants: the bytes go to a temporary beside the file (PATH + suffix,
// on the same file system, so that rename(2) replaces atomically); commit()
// fsyncs it, renames it over PATH and fsyncs the directory, so that after a
// crash at any instant PATH is the old file (or absent) or the whole new
// one, never a torn one, and a committed file survives a power cut. A
// DurableFile destroyed or abandoned before commit() removes its temporary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace engram {

class DurableFile {
 public:
  DurableFile() = default;
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;
  ~DurableFile() { abandon(); }

  // Creates (or truncates) PATH + tmp_suffix, mode 0644 less the umask.
  Status create(const std::string& path, const std::string& tmp_suffix);
  // Writes all n bytes at the end of what was written (EINTR and short
  // writes retried).
  Status write(const void* p, size_t n);
  // Writes n bytes at `offset` (a header patched once the rest is known).
  Status write_at(const void* p, size_t n, uint64_t offset);
  // fsync, close, rename over PATH, fsync of PATH's directory. An error
  // from that last fsync leaves the new file at PATH, whole but perhaps
  // not yet durable.
  Status commit();
  // Closes and removes the temporary; nothing at PATH changes.
  void abandon() noexcept;

  const std::string& tmp_path() const noexcept { return tmp_; }

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// fsync(2) of a directory, so that a rename or creation in it is durable.
Status fsync_dir(const std::string& dir);

}  // namespace engram
