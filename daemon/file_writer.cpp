#include "daemon/file_writer.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace engram {

const char* io_path_name(IoPath p) noexcept { return p == IoPath::io_uring ? "io_uring" : "pwrite"; }

namespace {

// Bounds memory held by writes in flight: 16 writes of chunk size (a few
// MiB at most each) keep the device busy without buffering the checkpoint.
constexpr unsigned kQueueDepth = 16;

Status io_error(const std::string& path, const char* what, int err) {
  return {Errc::system, std::string(what) + " " + path + ": " + std::strerror(err)};
}

class PwriteWriter final : public FileWriter {
 public:
  PwriteWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PwriteWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }
  IoPath path() const noexcept override { return IoPath::pwrite; }
  Status write(uint64_t offset, std::string data) override {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return io_error(path_, "writing", n < 0 ? errno : EIO);
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  Status finish() override {
    int fd = fd_;
    fd_ = -1;
    if (::fsync(fd) != 0) {
      int e = errno;
      ::close(fd);
      return io_error(path_, "fsync of", e);
    }
    if (::close(fd) != 0) return io_error(path_, "closing", errno);
    return Status::Ok();
  }

 private:
  int fd_;
  std::string path_;
};

class UringWriter final : public FileWriter {
 public:
  UringWriter(int fd, std::string path, io_uring ring) : fd_(fd), path_(std::move(path)), ring_(ring) {
    slots_.resize(kQueueDepth);
  }
  ~UringWriter() override {
    if (in_flight_ > 0) (void)drain(0);
    io_uring_queue_exit(&ring_);
    if (fd_ >= 0) ::close(fd_);
  }
  IoPath path() const noexcept override { return IoPath::io_uring; }

  Status write(uint64_t offset, std::string data) override {
    if (!error_.ok()) return error_;
    if (data.empty()) return Status::Ok();
    if (in_flight_ == kQueueDepth)
      if (Status s = drain(kQueueDepth - 1); !s.ok()) return s;
    size_t i = free_slot();
    slots_[i] = {std::move(data), offset, 0, true};
    submit(i);
    // Batched submission: the kernel sees several writes per enter, except
    // when the queue runs dry anyway.
    if (++unsubmitted_ >= 4) flush_submissions();
    return error_;
  }

  Status finish() override {
    flush_submissions();
    Status s = drain(0);
    if (s.ok()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      io_uring_prep_fsync(sqe, fd_, 0);
      io_uring_submit(&ring_);
      io_uring_cqe* cqe = nullptr;
      int r = wait_cqe(&cqe);
      if (r < 0) s = io_error(path_, "waiting for fsync of", -r);
      else {
        if (cqe->res < 0) s = io_error(path_, "fsync of", -cqe->res);
        io_uring_cqe_seen(&ring_, cqe);
      }
    }
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 && s.ok()) s = io_error(path_, "closing", errno);
    return s;
  }

 private:
  struct Slot {
    std::string data;
    uint64_t offset;
    size_t done;  // bytes written so far (short writes resubmit the rest)
    bool used;
  };

  size_t free_slot() const {
    for (size_t i = 0; i < slots_.size(); ++i)
      if (!slots_[i].used) return i;
    return 0;  // unreachable: in_flight_ < kQueueDepth
  }
  void submit(size_t i) {
    Slot& s = slots_[i];
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // full submission queue: hand it to the kernel first
      flush_submissions();
      sqe = io_uring_get_sqe(&ring_);
    }
    io_uring_prep_write(sqe, fd_, s.data.data() + s.done, static_cast<unsigned>(s.data.size() - s.done),
                        s.offset + s.done);
    io_uring_sqe_set_data64(sqe, i);
    ++in_flight_;
  }
  void flush_submissions() {
    if (unsubmitted_ == 0 && io_uring_sq_ready(&ring_) == 0) return;
    int r = io_uring_submit(&ring_);
    if (r < 0 && error_.ok()) error_ = io_error(path_, "submitting writes to", -r);
    unsubmitted_ = 0;
  }
  int wait_cqe(io_uring_cqe** cqe) {
    int r;
    do r = io_uring_wait_cqe(&ring_, cqe);
    while (r == -EINTR);
    return r;
  }
  // Reaps completions until at most `target` writes are in flight.
  Status drain(unsigned target) {
    flush_submissions();
    while (in_flight_ > target) {
      io_uring_cqe* cqe = nullptr;
      int r = wait_cqe(&cqe);
      if (r < 0) {
        if (error_.ok()) error_ = io_error(path_, "waiting for writes to", -r);
        in_flight_ = 0;  // the ring is unusable; nothing more will complete
        break;
      }
      size_t i = static_cast<size_t>(io_uring_cqe_get_data64(cqe));
      int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      --in_flight_;
      Slot& s = slots_[i];
      if (res < 0 || (res == 0 && s.done < s.data.size())) {
        if (error_.ok()) error_ = io_error(path_, "writing", res < 0 ? -res : EIO);
        s = {};
        continue;
      }
      s.done += static_cast<size_t>(res);
      if (s.done < s.data.size()) {
        submit(i);  // short write: the rest
        flush_submissions();
      } else {
        s = {};
      }
    }
    return error_;
  }

  int fd_;
  std::string path_;
  io_uring ring_;
  std::vector<Slot> slots_;
  unsigned in_flight_ = 0;
  unsigned unsubmitted_ = 0;
  Status error_;
};

}  // namespace

Result<std::unique_ptr<FileWriter>> FileWriter::open(const std::string& path, IoMode mode, std::string* fallback_reason) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return io_error(path, "cannot create", errno);
  if (mode == IoMode::automatic) {
    io_uring ring;
    int r = io_uring_queue_init(kQueueDepth * 2, &ring, 0);
    if (r == 0) return std::unique_ptr<FileWriter>(new UringWriter(fd, path, ring));
    if (fallback_reason)
      *fallback_reason = std::string("io_uring is unavailable (") + std::strerror(-r) +
                         (r == -ENOSYS   ? ": the kernel has no io_uring"
                          : r == -EPERM  ? ": a seccomp profile or sysctl forbids it"
                          : r == -ENOMEM ? ": the memlock limit is too low"
                                         : "") +
                         "); writing checkpoints with pwrite";
  }
  return std::unique_ptr<FileWriter>(new PwriteWriter(fd, path));
}

}  // namespace engram
