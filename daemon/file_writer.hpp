// Writes one file from buffers at given offsets, with a bounded number of
// writes in flight: through io_uring (liburing) when the kernel lets us, else
// with pwrite. Both paths write the same bytes at the same offsets, so they
// produce identical files.
//
// io_uring setup fails with ENOSYS on old kernels, EPERM under container
// seccomp profiles and ENOMEM under tight memlock limits; open() then falls
// back to pwrite and says why in *fallback_reason, once per call. Callers log
// it; IoMode::pwrite forces the fallback (so both paths can be tested).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.hpp"

namespace engram {

enum class IoMode { automatic, pwrite };
enum class IoPath { io_uring, pwrite };
const char* io_path_name(IoPath p) noexcept;

class FileWriter {
 public:
  virtual ~FileWriter() = default;
  // Creates (or truncates) `path`, mode 0640.
  static Result<std::unique_ptr<FileWriter>> open(const std::string& path, IoMode mode, std::string* fallback_reason);

  virtual IoPath path() const noexcept = 0;
  // Writes `data` at `offset`; the writer owns the bytes until they are on
  // their way. May wait for earlier writes when the bound is reached. The
  // first failure is returned by this call or a later one, and by finish().
  virtual Status write(uint64_t offset, std::string data) = 0;
  // Waits for every write, fsyncs and closes the file.
  virtual Status finish() = 0;
};

}  // namespace engram
