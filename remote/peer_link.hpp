// What every link of this server to a peer shares (an upstream table's,
// a mirrored table's): one thread that keeps one stream open, reconnecting
// after a break with a backoff (kFirstBackoffMs doubling to kLastBackoffMs,
// back to the first once a stream carried something again), one log line
// per outage and one when it ends, not one per retry, and the state that
// engramctl status shows. A link's own work is in its three hooks.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace engram::remote {

// The two tables a link joins: every link's options start with these.
struct LinkEnds {
  std::string table;       // the local table
  std::string peer;        // HOST:PORT of the peer's [remote] listen
  std::string peer_table;  // the peer's table
  std::string socket;      // this server's control socket
};

// What engramctl status shows of every link; each link's Stats adds its
// own counters to it.
struct LinkState {
  std::string state;  // "connecting to ...", "delivering to ...", "waiting to reconnect ..."
  uint64_t reconnects = 0;
  std::string last_error;
};

class PeerLink {
 public:
  // A link's counters (a LinkState and its own, guarded by mu_) with this
  // link's state filled in. A last_error of the link's own (a refusal the
  // peer answered) shows until a break gives another.
  template <typename Stats>
  Stats report(const Stats& counters) const {
    std::lock_guard lock(mu_);
    Stats out = counters;
    out.state = st_.state;
    out.reconnects = st_.reconnects;
    if (!st_.last_error.empty()) out.last_error = st_.last_error;
    return out;
  }

 protected:
  // `what` names the link in the log ("upstream outbox to HOST:PORT table
  // replay"); `peer` and `creds` are what its streams' channels are made of.
  PeerLink(std::string what, std::string peer, std::shared_ptr<grpc::ChannelCredentials> creds)
      : what_(std::move(what)), peer_(std::move(peer)), creds_(std::move(creds)) {}
  virtual ~PeerLink() = default;  // a subclass calls stop() in its destructor

  // A new channel to the peer, for one stream, taking replies as large as
  // a peer may send (kMaxPeerMessageBytes: a shard's reply of 256 draws of
  // 28 KB is 7 MB, past gRPC's default of 4 MB).
  std::shared_ptr<grpc::Channel> channel() const;

  // Starts the thread: last in the subclass's constructor.
  void start();
  // Asks the stream to end (stopping() turns true), gives it up to
  // grace_ms to do so, then cancels it; joins the thread.
  void stop(int64_t grace_ms);

  // The local side (a client of this server and its table): false, with
  // the state set, to try again after a backoff.
  virtual bool open_local() = 0;
  virtual void close_local() = 0;
  // One stream on ctx until it breaks or stopping(); OK if it ended
  // cleanly. Calls carried() when a reply came; may throw to drop the
  // local side (it is opened again).
  virtual grpc::Status stream(grpc::ClientContext& ctx) = 0;
  // The hook's line for the log when an outage starts.
  virtual std::string after_break() const { return "retrying"; }

  void set_state(const std::string& s, const std::string& error = "");
  void carried();  // the stream carries: an outage (if any) is over
  bool stopping() const noexcept { return stopping_; }
  // Waits up to ms unless stop() is called.
  void pause(int64_t ms);

  mutable std::mutex mu_;  // the state, and what subclasses guard with it

 private:
  void run();

  std::string what_;
  std::string peer_;
  std::shared_ptr<grpc::ChannelCredentials> creds_;
  LinkState st_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> done_{false};
  std::condition_variable wake_;
  grpc::ClientContext* ctx_ = nullptr;  // the stream's, to cancel it at a stop
  bool outage_ = false;
  int64_t backoff_ms_ = 0;
  std::thread thread_;
};

}  // namespace engram::remote
