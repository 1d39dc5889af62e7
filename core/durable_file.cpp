#include "core/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace engram {

namespace {

Status system_error(const std::string& what, const std::string& path) {
  return {Errc::system, "cannot " + what + " " + path + ": " + std::strerror(errno)};
}

std::string dir_of(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return system_error("open", dir);
  int r = ::fsync(fd);
  int e = errno;
  ::close(fd);
  errno = e;
  return r == 0 ? Status::Ok() : system_error("fsync", dir);
}

Status DurableFile::create(const std::string& path, const std::string& tmp_suffix) {
  abandon();
  path_ = path;
  tmp_ = path + tmp_suffix;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    Status s = system_error("create", tmp_);
    tmp_.clear();  // not ours to remove
    return s;
  }
  return Status::Ok();
}

// All n bytes, at `offset` (pwrite) or, when it is negative, at the end
// (write): EINTR and short writes retried.
static Status write_all(int fd, const void* p, size_t n, int64_t offset, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  for (size_t at = 0; at < n;) {
    ssize_t w = offset < 0 ? ::write(fd, c + at, n - at) : ::pwrite(fd, c + at, n - at, offset + int64_t(at));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      return system_error("write", path);
    }
    at += static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status DurableFile::write(const void* p, size_t n) { return write_all(fd_, p, n, -1, tmp_); }

Status DurableFile::write_at(const void* p, size_t n, uint64_t offset) {
  return write_all(fd_, p, n, static_cast<int64_t>(offset), tmp_);
}

Status DurableFile::commit() {
  if (::fsync(fd_) != 0) return system_error("fsync", tmp_);
  int r = ::close(fd_);
  fd_ = -1;
  if (r != 0) return system_error("close", tmp_);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return system_error("rename " + tmp_ + " to", path_);
  tmp_.clear();
  return fsync_dir(dir_of(path_));
}

void DurableFile::abandon() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

}  // namespace engram
