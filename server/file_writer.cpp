#include "server/file_writer.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "core/segment_header.hpp"

namespace engram {

const char* io_path_name(IoPath p) noexcept { return p == IoPath::io_uring ? "io_uring" : "pwrite"; }

namespace {

// Bounds memory held by writes in flight: 16 buffers of 1 MiB keep a disk
// busy without buffering the checkpoint.
constexpr unsigned kQueueDepth = 16;
constexpr size_t kBufferBytes = size_t{1} << 20;

Status io_error(const std::string& path, const char* what, int err) {
  return {Errc::system, std::string(what) + " " + path + ": " + std::strerror(err)};
}

class PwriteWriter final : public FileWriter {
 public:
  PwriteWriter(int fd, std::string path, bool direct) : FileWriter(fd, std::move(path), direct) {}
  ~PwriteWriter() override {
    if (fd_ >= 0) ::close(fd_);
  }
  IoPath path() const noexcept override { return IoPath::pwrite; }

 protected:
  Status submit(uint64_t offset, IoBuffer b) override {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::pwrite(fd_, b.data() + done, b.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return io_error(path_, "writing", n < 0 ? errno : EIO);
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  Status drain() override { return Status::Ok(); }
  Status sync() override { return ::fsync(fd_) == 0 ? Status::Ok() : io_error(path_, "fsync of", errno); }
};

class UringWriter final : public FileWriter {
 public:
  UringWriter(int fd, std::string path, bool direct, io_uring ring)
      : FileWriter(fd, std::move(path), direct), ring_(ring), slots_(kQueueDepth) {}
  ~UringWriter() override {
    (void)reap(0);
    io_uring_queue_exit(&ring_);
    if (fd_ >= 0) ::close(fd_);
  }
  IoPath path() const noexcept override { return IoPath::io_uring; }

 protected:
  Status submit(uint64_t offset, IoBuffer b) override {
    if (!error_.ok()) return error_;
    if (b.size() == 0) return Status::Ok();
    if (in_flight_ == kQueueDepth)
      if (Status s = reap(kQueueDepth - 1); !s.ok()) return s;
    size_t i = 0;
    while (slots_[i].used) ++i;  // one is free: in_flight_ < kQueueDepth
    slots_[i] = {std::move(b), offset, 0, true};
    queue(i);
    // Batched submission: the kernel sees several writes per enter.
    if (++unsubmitted_ >= 4) flush_submissions();
    return error_;
  }
  Status drain() override { return reap(0); }
  Status sync() override {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_fsync(sqe, fd_, 0);
    io_uring_submit(&ring_);
    io_uring_cqe* cqe = nullptr;
    int r = wait_cqe(&cqe);
    if (r < 0) return io_error(path_, "waiting for fsync of", -r);
    int res = cqe->res;
    io_uring_cqe_seen(&ring_, cqe);
    return res < 0 ? io_error(path_, "fsync of", -res) : Status::Ok();
  }

 private:
  struct Slot {
    IoBuffer buf;
    uint64_t offset = 0;
    size_t done = 0;  // bytes written so far (short writes resubmit the rest)
    bool used = false;
  };

  void queue(size_t i) {
    Slot& s = slots_[i];
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {  // full submission queue: hand it to the kernel first
      flush_submissions();
      sqe = io_uring_get_sqe(&ring_);
    }
    io_uring_prep_write(sqe, fd_, s.buf.data() + s.done, static_cast<unsigned>(s.buf.size() - s.done),
                        s.offset + s.done);
    io_uring_sqe_set_data64(sqe, i);
    ++in_flight_;
  }
  void flush_submissions() {
    if (io_uring_sq_ready(&ring_) == 0) return;
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
  Status reap(unsigned target) {
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
      if (res < 0 || (res == 0 && s.done < s.buf.size())) {
        if (error_.ok()) error_ = io_error(path_, "writing", res < 0 ? -res : EIO);
        s = {};
        continue;
      }
      s.done += static_cast<size_t>(res);
      if (s.done < s.buf.size()) {
        queue(i);  // short write: the rest
        flush_submissions();
      } else {
        s = {};
      }
    }
    return error_;
  }

  io_uring ring_;
  std::vector<Slot> slots_;
  unsigned in_flight_ = 0;
  unsigned unsubmitted_ = 0;
  Status error_;
};

}  // namespace

IoBuffer::IoBuffer(size_t cap) : cap_(align_up(std::max<size_t>(cap, 1), kAlign)) {
  p_ = static_cast<char*>(std::aligned_alloc(kAlign, cap_));
  if (!p_) throw std::bad_alloc();
}
IoBuffer::IoBuffer(IoBuffer&& o) noexcept : p_(o.p_), n_(o.n_), cap_(o.cap_) { o.p_ = nullptr; o.n_ = o.cap_ = 0; }
IoBuffer& IoBuffer::operator=(IoBuffer&& o) noexcept {
  if (this != &o) {
    std::free(p_);
    p_ = o.p_;
    n_ = o.n_;
    cap_ = o.cap_;
    o.p_ = nullptr;
    o.n_ = o.cap_ = 0;
  }
  return *this;
}
IoBuffer::~IoBuffer() { std::free(p_); }

Status FileWriter::append(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (cur_.capacity() == 0) {
      cur_ = IoBuffer(kBufferBytes);
      cur_offset_ = end_;
    }
    size_t k = std::min(n, cur_.capacity() - cur_.size());
    std::memcpy(cur_.data() + cur_.size(), p, k);
    cur_.resize(cur_.size() + k);
    p += k;
    n -= k;
    end_ += k;
    if (cur_.size() == cur_.capacity()) {
      if (Status s = submit(cur_offset_, std::move(cur_)); !s.ok()) return s;
      pace();
    }
  }
  return Status::Ok();
}

void FileWriter::set_max_rate(uint64_t bytes_per_s) noexcept {
  max_rate_ = bytes_per_s;
  paced_from_ = std::chrono::steady_clock::now();
  paced_bytes_ = end_;
}

void FileWriter::pace() {
  if (max_rate_ == 0) return;
  auto due = paced_from_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(double(end_ - paced_bytes_) / double(max_rate_)));
  std::this_thread::sleep_until(due);
}

Status FileWriter::write(uint64_t offset, const std::string& data) {
  IoBuffer b(data.size());
  std::memcpy(b.data(), data.data(), data.size());
  b.resize(data.size());
  return submit(offset, std::move(b));
}

Status FileWriter::finish() {
  Status s;
  uint64_t exact = end_;
  if (cur_.size() > 0) {
    // O_DIRECT writes whole blocks: pad, and cut the file back below.
    size_t n = cur_.size();
    if (direct_) {
      size_t padded = align_up(n, IoBuffer::kAlign);
      std::memset(cur_.data() + n, 0, padded - n);
      cur_.resize(padded);
    }
    s = submit(cur_offset_, std::move(cur_));
  }
  if (Status d = drain(); s.ok()) s = d;
  if (s.ok() && direct_ && exact > 0 && ::ftruncate(fd_, static_cast<off_t>(exact)) != 0)
    s = io_error(path_, "trimming", errno);
  if (s.ok()) s = sync();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0 && s.ok()) s = io_error(path_, "closing", errno);
  return s;
}

Result<std::unique_ptr<FileWriter>> FileWriter::open(const std::string& path, IoMode mode, bool direct,
                                                     std::string* fallback_reason) {
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int fd = direct ? ::open(path.c_str(), flags | O_DIRECT, 0640) : -1;
  if (direct && fd < 0) {
    if (errno != EINVAL) return io_error(path, "cannot create", errno);
    if (fallback_reason) *fallback_reason = "the file system of " + path + " refuses O_DIRECT; writing through the page cache";
    direct = false;
  }
  if (!direct) fd = ::open(path.c_str(), flags, 0640);
  if (fd < 0) return io_error(path, "cannot create", errno);
  if (mode == IoMode::automatic) {
    io_uring ring;
    int r = io_uring_queue_init(kQueueDepth * 2, &ring, 0);
    if (r == 0) return std::unique_ptr<FileWriter>(new UringWriter(fd, path, direct, ring));
    // Appended: the O_DIRECT fallback above may have said something too.
    if (fallback_reason)
      *fallback_reason += std::string(fallback_reason->empty() ? "" : "; ") + "io_uring is unavailable (" + std::strerror(-r) +
                         (r == -ENOSYS   ? ": the kernel has no io_uring"
                          : r == -EPERM  ? ": a seccomp profile or sysctl forbids it"
                          : r == -ENOMEM ? ": the memlock limit is too low"
                                         : "") +
                         "); writing checkpoints with pwrite";
  }
  return std::unique_ptr<FileWriter>(new PwriteWriter(fd, path, direct));
}

}  // namespace engram
