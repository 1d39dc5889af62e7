#include "server/checkpoint_scheduler.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <latch>
#include <limits>
#include <memory>

#include "core/futex.hpp"
#include "server/log.hpp"

#ifndef ENGRAM_VERSION_STRING
#define ENGRAM_VERSION_STRING "0.0.0"
#endif

namespace engram {
namespace {

constexpr char kNoCheckpointDir[] =
    "checkpoints are off: set [checkpoint] dir in the server's config (see engramd.toml(5))";

void log_io_fallback(const std::string& why) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) log_warn(why);
}

}  // namespace

CheckpointScheduler::CheckpointScheduler(const CheckpointConfig& config, ChunkArena arena, uint32_t arena_id,
                                         TableRegistry* tables, Progress progress, std::function<void()> wake,
                                         Reply reply)
    : config_(config), arena_(arena), arena_id_(arena_id), tables_(tables), progress_(std::move(progress)),
      wake_(std::move(wake)), reply_(std::move(reply)) {}

CheckpointScheduler::~CheckpointScheduler() {
  if (worker_.joinable()) worker_.join();
}

Status CheckpointScheduler::restore_at_start() {
  Status s = restore_newest();
  // The period counts from the end of the restore, which may be long.
  if (config_.interval_s > 0) due_ns_ = monotonic_ns() + int64_t{config_.interval_s} * 1'000'000'000;
  return s;
}

Status CheckpointScheduler::restore_newest() {
  std::vector<std::string> candidates;
  if (!config_.dir.empty()) {
    prune_checkpoints(config_.dir, std::numeric_limits<uint32_t>::max());  // only leftovers of interrupted writes
    auto all = list_checkpoints(config_.dir);
    if (!all.empty()) seq_ = checkpoint_sequence(all.front());
    if (config_.restore) candidates = all;
  }
  if (!config_.restore_path.empty()) {
    // Asked for by name: that one or nothing.
    Status s = restore_from(config_.restore_path);
    if (!s.ok()) return {s.code(), "cannot restore " + config_.restore_path + ": " + s.message()};
    seq_ = std::max(seq_, checkpoint_sequence(config_.restore_path));
    return Status::Ok();
  }
  for (const std::string& path : candidates) {
    Status s = restore_from(path);
    if (s.ok()) return s;
    log_error("refusing " + s.message() + "; trying the one before it");
  }
  if (!candidates.empty()) log_error("no checkpoint in " + config_.dir + " could be restored; starting empty");
  return Status::Ok();
}

// All or nothing: on any failure every table and block it made is gone.
Status CheckpointScheduler::restore_from(const std::string& path) {
  auto t0 = monotonic_ns();
  auto reader = CheckpointReader::open(path);
  if (!reader.ok()) return reader.status();
  const Manifest& m = reader->manifest();
  if (m.tables.size() > kMaxTables) return {Errc::corrupt, "it holds more tables than a server can"};
  for (const TableState& t : m.tables)
    if (tables_->find(t.options.name)) return {Errc::already_exists, "it holds table " + t.options.name + " twice"};
  // Chunks into blocks reserved by the checkpointer id, each sealed with
  // one reference of the restore's own; items add theirs.
  std::vector<BlockRef> blocks;
  bool sealed = false;  // all of them, once every chunk checked out
  std::vector<std::string> made;
  auto undo = [&] {
    for (const std::string& name : made) tables_->drop(name);
    for (BlockRef b : blocks) (void)(sealed ? arena_.release(arena_id_, b) : arena_.free_reserved(arena_id_, b));
  };
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < m.chunks.size(); ++i) {
    const SavedChunk& c = m.chunks[i];
    auto k = arena_.class_for(c.raw_bytes);
    if (!k.ok()) {
      undo();
      return {Errc::invalid_argument, "chunk " + std::to_string(i) + " needs a block of " + std::to_string(c.raw_bytes) +
                                          " bytes, larger than any in this arena; configure [arena] as when it was saved"};
    }
    auto b = arena_.alloc(arena_id_, *k);
    if (!b.ok()) {
      undo();
      return {Errc::out_of_memory, "the arena has too few blocks of " + std::to_string(arena_.size_class(*k).block_size) +
                                       " bytes for its " + std::to_string(m.chunks.size()) +
                                       " chunks; configure a larger [arena]"};
    }
    blocks.push_back(*b);
    if (Status s = reader->read_chunk(i, arena_.data(*b)); !s.ok()) {
      undo();
      return s;
    }
    bytes += c.raw_bytes;
    if (progress_) progress_("restoring", i + 1, m.chunks.size());
  }
  if (Status s = reader->finish(); !s.ok()) {
    undo();
    return s;
  }
  for (BlockRef b : blocks) (void)arena_.seal(arena_id_, b, 1);
  sealed = true;
  uint64_t items = 0;
  for (const TableState& saved : m.tables) {
    TableState st = saved;
    for (ChunkRef& r : st.refs) {
      r.generation = blocks[r.block].generation;
      r.block = blocks[r.block].index;
    }
    auto checked = Table::check(st.options);
    Status s = checked.ok() ? tables_->create(*checked) : checked.status();
    if (!s.ok()) {
      undo();
      return {s.code(), "table " + st.options.name + ": " + s.message()};
    }
    made.push_back(st.options.name);
    if (Status s = tables_->find(st.options.name)->owner->restore(st); !s.ok()) {
      undo();
      return s;
    }
    for (const ChunkRef& r : st.refs) (void)arena_.acquire({r.block, r.generation});
    items += st.items.size();
  }
  for (BlockRef b : blocks) (void)arena_.release(arena_id_, b);  // the restore's own references
  double secs = double(monotonic_ns() - t0) / 1e9;
  log_info("restored checkpoint " + path + " (format " + std::to_string(m.format_version) + ", engram " +
           m.engram_version + "): " + std::to_string(m.tables.size()) + " tables, " + std::to_string(items) +
           " items, " + std::to_string(m.chunks.size()) + " chunks, " + std::to_string(bytes >> 20) + " MiB in " +
           std::to_string(secs) + " s");
  note(path);
  return Status::Ok();
}

// Every table at one moment: each owner parks on a barrier, the snapshot
// copies the indexes and pins their chunks, then all go on. Owners stand
// still for as long as the copy takes, not for the write.
Result<Snapshot> CheckpointScheduler::take_snapshot() {
  Snapshot snap;
  auto parked = std::make_shared<std::latch>(static_cast<ptrdiff_t>(tables_->size()));
  auto go = std::make_shared<std::latch>(1);
  int64_t t0 = monotonic_ns();
  for (auto& [n, e] : tables_->all()) e.owner->park(parked, go);
  parked->wait();
  Status s;
  for (auto& [n, e] : tables_->all())
    if (s.ok()) s = snap.add(e.owner->snapshot(), arena_);
  go->count_down();
  snap.pause_ns = monotonic_ns() - t0;
  if (!s.ok()) {
    snap.release_all(arena_, arena_id_);
    return s;
  }
  return snap;
}

Result<CheckpointResult> CheckpointScheduler::write_snapshot(Snapshot snap, uint64_t seq, bool report_progress) {
  double pause_ms = double(snap.pause_ns) / 1e6;
  std::function<void(uint64_t, uint64_t)> each;
  if (progress_ && report_progress) each = [this](uint64_t d, uint64_t n) { progress_("checkpointing", d, n); };
  auto r = write_checkpoint(std::move(snap), arena_, arena_id_, config_, seq, ENGRAM_VERSION_STRING, &log_io_fallback,
                            each);
  if (r.ok())
    log_info("checkpoint " + r->path + ": " + std::to_string(r->chunk_bytes >> 20) + " MiB of chunks in " +
             std::to_string(r->file_bytes >> 20) + " MiB of files, " + std::to_string(r->seconds) + " s (" +
             io_path_name(r->io) + "); tables paused " + std::to_string(pause_ms) + " ms for the snapshot");
  else
    log_error("checkpoint failed: " + r.status().message());
  return r;
}

void CheckpointScheduler::request(int waiter) {
  if (config_.dir.empty()) {
    if (waiter >= 0) reply_(waiter, {Errc::invalid_argument, kNoCheckpointDir}, "");
    return;
  }
  if (worker_.joinable()) {
    if (waiter >= 0) next_waiters_.push_back(waiter);
    next_wanted_ = true;
    return;
  }
  if (waiter >= 0) waiters_.push_back(waiter);
  start();
}

// Snapshots now and hands the write to the worker; waiters_ hear the result.
void CheckpointScheduler::start() {
  auto snap = take_snapshot();
  if (!snap.ok()) {
    result_ = snap.status();
    answer_waiters();
    return;
  }
  uint64_t seq = ++seq_;
  done_.store(false);
  worker_ = std::thread([this, seq, sn = std::move(*snap)]() mutable {
    // Traffic first: the writer takes only CPU time that owners and
    // clients leave idle (on two cores, a compressing thread at normal
    // priority puts inserts behind it in the run queue for milliseconds).
    sched_param idle{};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) != 0)
      log_warn("checkpoint: cannot lower the writer's priority (SCHED_IDLE); traffic may wait for it");
    result_ = write_snapshot(std::move(sn), seq, false);
    done_.store(true);
    wake_();
  });
}

void CheckpointScheduler::answer_waiters() {
  for (int fd : waiters_) {
    if (result_.ok()) reply_(fd, Status::Ok(), result_->path);
    else reply_(fd, result_.status(), "");
  }
  waiters_.clear();
}

void CheckpointScheduler::reap() {
  if (!worker_.joinable() || !done_.load()) return;
  worker_.join();
  if (result_.ok()) note(result_->path);
  answer_waiters();
  if (next_wanted_) {
    next_wanted_ = false;
    waiters_.swap(next_waiters_);  // empty after answer_waiters
    start();
  }
}

void CheckpointScheduler::tick() {
  if (due_ns_ < 0 || monotonic_ns() < due_ns_) return;
  due_ns_ = monotonic_ns() + int64_t{config_.interval_s} * 1'000'000'000;
  if (!worker_.joinable()) request(-1);
}

int CheckpointScheduler::poll_timeout_ms() const {
  if (due_ns_ < 0) return -1;
  return static_cast<int>(std::clamp<int64_t>((due_ns_ - monotonic_ns()) / 1'000'000 + 1, 0, 60'000));
}

void CheckpointScheduler::forget(int fd) {
  for (std::vector<int>* w : {&waiters_, &next_waiters_}) w->erase(std::remove(w->begin(), w->end(), fd), w->end());
}

void CheckpointScheduler::shutdown() {
  if (worker_.joinable()) {
    worker_.join();
    answer_waiters();
  }
  if (config_.on_shutdown && !config_.dir.empty()) {
    log_info("checkpoint on shutdown");
    auto snap = take_snapshot();
    if (snap.ok()) (void)write_snapshot(std::move(*snap), ++seq_, true);
    else log_error("checkpoint on shutdown failed: " + snap.status().message());
  }
}

void CheckpointScheduler::note(const std::string& path) {
  last_path_ = path;
  last_ns_ = monotonic_ns();
}

}  // namespace engram
