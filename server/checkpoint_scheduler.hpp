// When checkpoints are taken, and the restore at start-up. How one is
// written and read is checkpointer.hpp's.
//
// Checkpoints are taken on request (a client's, answered with the path when
// written), every interval_s, and at shutdown. A request snapshots every
// table at one moment on the control thread (owners parked for the copy of
// their indexes only), and one worker thread at a time writes it, at
// SCHED_IDLE, then wakes the control thread, which answers the clients that
// asked and starts the next one if anyone asked meanwhile. Nothing here
// blocks the control thread for longer than a snapshot, except the
// shutdown checkpoint, which the stopping server waits for.
//
// Used by the control thread only; restore_at_start() runs before it starts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/chunk_arena.hpp"
#include "server/checkpointer.hpp"
#include "server/table_registry.hpp"

namespace engram {

class CheckpointScheduler {
 public:
  // The path written, or why not, for the client on control socket `fd`
  // (one that asked and has not hung up: see forget).
  using Reply = std::function<void(int fd, const Status& s, const std::string& path)>;
  using Progress = std::function<void(const char* what, uint64_t done, uint64_t total)>;

  // `arena_id` pins and releases the checkpointed chunks; `wake` wakes the
  // control thread (from the worker), which then calls reap().
  CheckpointScheduler(const CheckpointConfig& config, ChunkArena arena, uint32_t arena_id, TableRegistry* tables,
                      Progress progress, std::function<void()> wake, Reply reply);
  ~CheckpointScheduler();  // joins a running write
  CheckpointScheduler(const CheckpointScheduler&) = delete;
  CheckpointScheduler& operator=(const CheckpointScheduler&) = delete;

  // The checkpoint named by restore_path, else (with restore on) the newest
  // one that checks out, falling back to older ones; all or nothing each.
  Status restore_at_start();
  // Starts one in the background, or notes that another is wanted after
  // the running one. `waiter` (a client's fd, or -1) hears the result.
  void request(int waiter);
  // After a wake: joins a finished write, answers its waiters, starts the
  // next if one was asked for.
  void reap();
  // Starts the periodic checkpoint if it is due.
  void tick();
  // How long the control loop may sleep before tick() has work (-1: no limit).
  int poll_timeout_ms() const;
  // The client on `fd` hung up: it hears of no checkpoint, and a later
  // client whose connection gets the same descriptor number hears only of
  // its own.
  void forget(int fd);
  // Waits for a running write and answers its waiters, then writes the
  // shutdown checkpoint if configured (progress reported on this thread).
  void shutdown();

  // The newest checkpoint written or restored; empty if none.
  const std::string& last_path() const noexcept { return last_path_; }
  int64_t last_ns() const noexcept { return last_ns_; }

 private:
  Status restore_newest();
  Status restore_from(const std::string& path);
  Result<Snapshot> take_snapshot();
  Result<CheckpointResult> write_snapshot(Snapshot snap, uint64_t seq, bool report_progress);
  void start();
  void answer_waiters();
  void note(const std::string& path);

  CheckpointConfig config_;
  ChunkArena arena_;
  uint32_t arena_id_;
  TableRegistry* tables_;
  Progress progress_;
  std::function<void()> wake_;
  Reply reply_;

  uint64_t seq_ = 0;  // the last sequence number used
  std::thread worker_;
  std::atomic<bool> done_{false};
  Result<CheckpointResult> result_{Status{Errc::invalid_argument, "no checkpoint yet"}};
  std::vector<int> waiters_, next_waiters_;
  bool next_wanted_ = false;
  int64_t due_ns_ = -1;  // next periodic checkpoint, or -1
  std::string last_path_;
  int64_t last_ns_ = 0;
};

}  // namespace engram
