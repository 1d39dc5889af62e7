// The owner's thread and its mailbox: start and stop, and the calls other
// threads make (attach, detach, reset, restore, rate limiter, info, park,
// ping), each posted to the owner thread and run there. It owns the owner's
// life; it touches the table and the channels only from the owner thread.
#include "server/table_owner.hpp"

#include <pthread.h>

#include <future>
#include <optional>
#include <string>

namespace engram {

TableOwner::TableOwner(ChunkArena arena, uint32_t arena_id, Table table, Doorbell* bell, uint32_t max_batch)
    : arena_(arena), arena_id_(arena_id), table_(table), bell_(bell), max_batch_(max_batch),
      sig_hash_(signature_hash(table.columns(), table.num_columns())),
      packed_(signature_compressed(table.columns(), table.num_columns())) {
  table_.set_remove_hook([this](const ItemSlot& it, const ChunkRef* refs) {
    // A view's draw that leaves otherwise than by being taken (an
    // eviction, a delete, a reset) is handed out no more. One taken
    // leaves while its sample defers releases; the take accounts for it.
    if (view_ && !defer_releases_) view_->forget(it.key);
    for (uint32_t i = 0; i < it.num_refs; ++i)
      if (defer_releases_) deferred_.push_back({refs[i].block, refs[i].generation});
      else unpin({refs[i].block, refs[i].generation}, "releasing an item's chunk");
  });
}

TableOwner::~TableOwner() {
  if (thread_.joinable()) stop(ChannelClosed::daemon_stopping);
}

void TableOwner::start() {
  thread_ = std::thread([this] {
    // "own:<table>" in top -H, gdb and /proc: which thread serves which table.
    std::string name = ("own:" + table_.name()).substr(0, 15);
    (void)pthread_setname_np(pthread_self(), name.c_str());
    run();
  });
}

void TableOwner::stop(ChannelClosed reason) {
  call([&] {
    stopping_ = true;
    stop_reason_ = reason;
    while (poll_once()) {
    }
    for (auto& c : channels_) close_channel(*c, reason);
    channels_.clear();
  });
  stop_.store(true);
  if (bell_) bell_->wake_all();
  if (thread_.joinable()) thread_.join();
}

void TableOwner::post(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    commands_.push_back(std::move(f));
    has_commands_.store(true, std::memory_order_release);
  }
  bell_->wake_all();
}

void TableOwner::call(std::function<void()> f) {
  if (!thread_.joinable() || std::this_thread::get_id() == thread_.get_id()) {
    f();
    return;
  }
  std::promise<void> done;
  auto fut = done.get_future();
  post([&] {
    f();
    done.set_value();
  });
  fut.wait();
}

void TableOwner::park(std::shared_ptr<std::latch> parked, std::shared_ptr<std::latch> go) {
  if (!thread_.joinable()) {
    parked->count_down();
    return;
  }
  // Shared: the owner may still be returning from go->wait() when the
  // thread that parked it has moved on.
  post([parked, go] {
    parked->count_down();
    go->wait();
  });
}

void TableOwner::ping(std::function<void()> answered) {
  if (!thread_.joinable()) {
    answered();
    return;
  }
  post(std::move(answered));
}

Status TableOwner::restore(const TableState& s) {
  // A view's items are draws of its shards as they were: after a restart
  // its links fetch new ones, and a checkpoint's would never be handed
  // out (the view knows them not), only fill its FIFO.
  if (view_) return Status::Ok();
  // Every reference is checked as an insert checks it (the chunk exists,
  // has this table's signature, and holds the slice), so that a checkpoint
  // cannot restore an item that no sample could read. A restored chunk is
  // sealed and the daemon's alone, so its header, checked once here, need
  // not be read by samplers.
  for (const ItemState& it : s.items)
    for (uint32_t k = 0; k < it.num_refs && it.first_ref + k < s.refs.size(); ++k) {
      ChunkHeader h;
      if (Status c = check_ref_chunk(s.refs[it.first_ref + k], &h); !c.ok())
        return {Errc::corrupt, "table '" + table_.name() + "': item " + std::to_string(it.key) + ", chunk reference " +
                                   std::to_string(k) + ": " + c.message()};
    }
  auto plain_steps = [this](const ChunkRef& ref) -> uint32_t {
    ChunkHeader h;
    return check_ref_chunk(ref, &h).ok() ? plain_steps_of(h) : 0;
  };
  Status r;
  call([&] { r = table_.restore(s, plain_steps); });
  return r;
}

void TableOwner::attach(uint32_t client, Channel channel) {
  call([&] {
    auto c = std::make_unique<ChannelState>();
    c->client = client;
    c->channel = channel;
    channels_.push_back(std::move(c));
  });
}

void TableOwner::detach(uint32_t client, ChannelClosed reason) {
  call([&] {
    for (size_t i = 0; i < channels_.size(); ++i) {
      if (channels_[i]->client != client) continue;
      close_channel(*channels_[i], reason);
      channels_.erase(channels_.begin() + static_cast<long>(i));
      return;
    }
  });
}

void TableOwner::reset() {
  call([&] {
    FreedBatch batch(this);  // every item's blocks, listed in order
    table_.reset();
  });
}

Status TableOwner::set_rate_limiter(const RateLimiterConfig& c) {
  Status s;
  call([&] { s = table_.set_rate_limiter(c); });
  return s;
}

CheckedTableOptions TableOwner::options() {
  std::optional<CheckedTableOptions> o;
  call([&] { o = table_.options(); });
  return *o;
}

uint32_t TableOwner::list(uint32_t from, uint32_t max_items, std::vector<ListedItem>* out, uint32_t* capacity) {
  uint32_t next = 0;
  call([&] {
    next = table_.list(from, max_items, kMaxListScan, out);
    *capacity = table_.capacity();
  });
  return next;
}

TableInfoWire TableOwner::info() {
  TableInfoWire w{};
  call([&] {
    TableInfo i = table_.info();
    w.spec = to_spec(table_.options());
    w.size = i.size;
    w.can_sample = i.can_sample;
    w.can_insert = i.can_insert;
    w.clients = static_cast<uint32_t>(channels_.size());
    w.counters = i.counters;
    w.stats = i.stats;
    w.max_priority = i.max_priority;
    w.min_priority = i.min_priority;
    if (view_) {
      w.shards = view_->shards();
      for (uint32_t k = 0; k < view_->shards(); ++k) w.shards_present += view_->counters(k).present ? 1 : 0;
    }
  });
  return w;
}

}  // namespace engram
