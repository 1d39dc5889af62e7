// Writes one file through a bounded number of writes in flight: with io_uring
// (liburing) when the kernel lets us, else with pwrite. Both paths write the
// same bytes at the same offsets, so they produce identical files.
//
// A file is written either by append() (sequential; the chunk file) or by
// write() at offsets. Appended bytes are gathered into 1 MiB buffers aligned
// for O_DIRECT: with `direct`, they go to the disk without a copy into the
// page cache, which on a busy machine is the CPU the traffic needs; the last
// buffer is padded to the block size and the file truncated back.
//
// io_uring setup fails with ENOSYS on old kernels, EPERM under container
// seccomp profiles and ENOMEM under tight memlock limits; open() then falls
// back to pwrite and says why in *fallback_reason. A file system that
// refuses O_DIRECT (EINVAL) gets buffered writes, also said there. Callers
// log it once; IoMode::pwrite forces the fallback, so both paths are tested.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.hpp"

namespace engram {

enum class IoMode { automatic, pwrite };
enum class IoPath { io_uring, pwrite };
const char* io_path_name(IoPath p) noexcept;

// Bytes in memory aligned for O_DIRECT, owned until their write completes.
class IoBuffer {
 public:
  static constexpr size_t kAlign = 4096;
  IoBuffer() = default;
  explicit IoBuffer(size_t cap);
  IoBuffer(IoBuffer&& o) noexcept;
  IoBuffer& operator=(IoBuffer&& o) noexcept;
  ~IoBuffer();
  char* data() const noexcept { return p_; }
  size_t size() const noexcept { return n_; }
  size_t capacity() const noexcept { return cap_; }
  void resize(size_t n) noexcept { n_ = n; }

 private:
  char* p_ = nullptr;
  size_t n_ = 0, cap_ = 0;
};

class FileWriter {
 public:
  virtual ~FileWriter() = default;
  // Creates (or truncates) `path`, mode 0640.
  static Result<std::unique_ptr<FileWriter>> open(const std::string& path, IoMode mode, bool direct,
                                                  std::string* fallback_reason);

  virtual IoPath path() const noexcept = 0;
  bool direct() const noexcept { return direct_; }
  // Appends n bytes (copied) at the end of what was appended so far.
  Status append(const void* data, size_t n);
  // Appends no faster than bytes_per_s from now on (0: as fast as the
  // device takes them). On a small machine a writer at full speed takes
  // CPU (and, in a VM, host time) that the traffic needs.
  void set_max_rate(uint64_t bytes_per_s) noexcept;
  // Writes `data` at `offset` (not with O_DIRECT; not mixed with append()).
  Status write(uint64_t offset, const std::string& data);
  // Waits for every write, trims the padding, fsyncs and closes the file.
  // The first failure of any write is returned here if not before.
  Status finish();

 protected:
  FileWriter(int fd, std::string path, bool direct) : fd_(fd), path_(std::move(path)), direct_(direct) {}
  // Hands one buffer to the device at `offset`; may wait for earlier ones.
  virtual Status submit(uint64_t offset, IoBuffer b) = 0;
  // Waits for every submitted write.
  virtual Status drain() = 0;
  virtual Status sync() = 0;

  int fd_;
  std::string path_;
  bool direct_;

 private:
  void pace();

  IoBuffer cur_;
  uint64_t cur_offset_ = 0;  // file offset of cur_
  uint64_t end_ = 0;         // bytes appended
  uint64_t max_rate_ = 0;    // bytes per second; 0 = unlimited
  std::chrono::steady_clock::time_point paced_from_;
  uint64_t paced_bytes_ = 0;
};

}  // namespace engram
