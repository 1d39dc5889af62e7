#include "remote/peer_link.hpp"

#include <chrono>

#include "server/log.hpp"
#include "remote/peer_service.hpp"

namespace engram::remote {
namespace {

constexpr int64_t kFirstBackoffMs = 100;  // after a broken link, doubling
constexpr int64_t kLastBackoffMs = 5000;

}  // namespace

std::shared_ptr<grpc::Channel> PeerLink::channel() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxPeerMessageBytes);
  return grpc::CreateCustomChannel(peer_, creds_, args);
}

void PeerLink::set_state(const std::string& s, const std::string& error) {
  std::lock_guard lock(mu_);
  st_.state = s;
  if (!error.empty()) st_.last_error = error;
}

void PeerLink::carried() {
  backoff_ms_ = kFirstBackoffMs;
  if (!outage_) return;
  outage_ = false;
  log_info("remote: " + what_ + " is back");
}

void PeerLink::pause(int64_t ms) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return stopping_.load(); });
}

void PeerLink::start() {
  backoff_ms_ = kFirstBackoffMs;
  thread_ = std::thread([this] { run(); });
}

void PeerLink::stop(int64_t grace_ms) {
  if (!thread_.joinable()) return;
  stopping_ = true;
  wake_.notify_all();
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  while (!done_ && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  {
    std::lock_guard lock(mu_);
    if (ctx_) ctx_->TryCancel();
  }
  thread_.join();
}

void PeerLink::run() {
  bool local = false;
  while (!stopping_) {
    if (!local && !(local = open_local())) {
      pause(backoff_ms_);
      continue;
    }
    grpc::Status s;
    {
      grpc::ClientContext ctx;
      {
        std::lock_guard lock(mu_);
        if (stopping_) break;
        ctx_ = &ctx;
      }
      try {
        s = stream(ctx);
      } catch (const std::exception& e) {
        s = {grpc::StatusCode::UNAVAILABLE, e.what()};
        close_local();
        local = false;
      }
      std::lock_guard lock(mu_);
      ctx_ = nullptr;
    }
    if (stopping_) break;
    std::string why = s.ok() ? "the peer ended the stream" : s.error_message();
    set_state("waiting to reconnect", why);
    {
      std::lock_guard lock(mu_);
      ++st_.reconnects;
    }
    if (!outage_) {  // one line per outage, not per retry
      log_warn("remote: " + what_ + ": " + why + "; " + after_break());
      outage_ = true;
    }
    pause(backoff_ms_);
    backoff_ms_ = std::min(backoff_ms_ * 2, kLastBackoffMs);
  }
  if (local) close_local();
  done_ = true;
}

}  // namespace engram::remote
