// A table handle's channel: sending requests under the credit rule, and
// routing responses.
#include <algorithm>
#include <string>

#include "capi/client.hpp"

using namespace engram;

namespace {
constexpr int64_t kSliceNs = 100'000'000;  // how often a waiting client checks that the server lives
}

Status engram_table::usable() {
  if (client->disconnected) return {Errc::disconnected, "the server went away; disconnect and connect again"};
  switch (static_cast<ChannelClosed>(channel.header->closed.load(std::memory_order_acquire))) {
    case ChannelClosed::open: return Status::Ok();
    case ChannelClosed::table_dropped: return {Errc::closed, "table " + name + " was dropped or closed"};
    case ChannelClosed::daemon_stopping:
      client->disconnected = true;
      return {Errc::disconnected, "the server is stopping; connect again once it is back"};
    case ChannelClosed::protocol_error: break;
  }
  return {Errc::closed, "the server closed this handle's channel to table " + name +
                            " after a protocol error; close the table and open it again"};
}

Status engram_table::pump(uint64_t id, ResponseRecord* mine, const std::function<bool()>& done, int64_t deadline_ns,
                          int spin) {
  bool quiet = false;  // the last wait ended with nothing to read
  for (;;) {
    ResponseRecord r;
    // The owner never waits for room in the response ring (the credit rule
    // guarantees it), so popping rings no bell.
    Status s = channel.responses.try_pop(&r, /*ring_bell=*/false);
    if (s.ok()) {
      if (owed.empty() || owed.front().id != r.id)
        return {Errc::corrupt, "table " + name + ": a response for request " + std::to_string(r.id) + " that is not owed"};
      if (owed.front().op == RequestOp::insert && r.status == 0) {
        if (Status a = take_acks(r); !a.ok()) return a;
        continue;
      }
      Owed& o = owed.front();
      bool last = !(o.op == RequestOp::sample && r.status == 0 && r.count > 0 && r.index + sample_items(r) < r.count);
      bool is_mine = r.id == id && o.op != RequestOp::insert;
      // engram_sample_begin's sample, answered while its caller does something else.
      bool begun_now = !is_mine && o.op == RequestOp::sample && begun.id == r.id;
      if (begun_now && !begun.complete) {
        Status b = take_sample_record(r, &begun.items, &begun.plain_steps, &begun.complete);
        if (!b.ok()) begun.status = b;
      }
      if (o.op == RequestOp::insert) writer_on_ack(o.writer, this, response_status(r), 0, o);
      if (o.unawaited) {  // engram_update_priorities_async: nobody waits for this answer
        --unawaited;
        if (Status e = response_status(r); !e.ok() && unawaited_error.ok())
          unawaited_error = {e.code(), "an earlier engram_update_priorities_async on table " + name +
                                           " was refused: " + e.message()};
      }
      if (last) {
        // A sample whose caller gave up waiting still pinned its chunks.
        bool orphan = o.op == RequestOp::sample && !is_mine && !begun_now && r.status == 0 && r.count > 0;
        credit_used -= o.credit;
        owed.pop_front();
        if (orphan) {
          RequestRecord rel{};
          rel.op = static_cast<uint32_t>(RequestOp::release);
          rel.id = r.id;
          (void)send_quiet(rel);
        }
      }
      if (is_mine) {
        *mine = r;
        return Status::Ok();
      }
      continue;
    }
    if (done && done()) return Status::Ok();
    if (id == 0 && !done) return Status::Ok();
    // An answer routed elsewhere would never come: fail, not wait for ever.
    if (id != 0 && std::none_of(owed.begin(), owed.end(), [id](const Owed& o) { return o.id == id; }))
      return {Errc::corrupt, "table " + name + ": waiting for request " + std::to_string(id) + ", which is not owed"};
    if (Status u = usable(); !u.ok()) return u;
    // Checked between slices of the wait below, so an interrupt ends it
    // within one slice (kSliceNs).
    if (client->take_interrupt()) return {Errc::interrupted, "interrupted while waiting for table " + name};
    // A server killed outright cannot say so through the rings: ask its
    // socket, but only once a wait brought nothing. Between the records of
    // a streaming answer, that poll(2) would cost more than the record.
    if (quiet && !client->alive()) return {Errc::disconnected, "the server went away; disconnect and connect again"};
    int64_t now = monotonic_ns();
    if (deadline_ns >= 0 && now >= deadline_ns) return {Errc::timeout, "timed out waiting for table " + name};
    int64_t slice = deadline_ns < 0 ? kSliceNs : std::min(kSliceNs, deadline_ns - now);
    // Waiting for our own answer (id set), the owner is at work on it and
    // the answer is close: spin longer before sleeping (the spin yields the
    // core every 64 rounds, so a runnable neighbour loses little).
    quiet = !channel.responses.data_bell().wait(
        [this] {
          return channel.responses.has_data() || channel.header->closed.load(std::memory_order_relaxed) != 0;
        },
        slice, spin >= 0 ? spin : id != 0 ? kAnswerSpin : kDefaultSpin);
  }
}

Status engram_table::take_acks(const ResponseRecord& r) {
  if (r.count == 0 || r.count > kRecordAcks || r.count > owed.size())
    return {Errc::corrupt, "table " + name + ": an ack record for " + std::to_string(r.count) + " inserts"};
  for (uint32_t k = 0; k < r.count; ++k) {
    const Owed& o = owed.front();
    if (o.op != RequestOp::insert)
      return {Errc::corrupt, "table " + name + ": an ack record answers request " + std::to_string(o.id) +
                                 ", which is not an insert"};
    const InsertAck& a = r.payload.acks[k];
    if (a.spare_block != kNoSpare) client->keep_spare({a.spare_block, a.spare_generation});
    writer_on_ack(o.writer, this, Status::Ok(), a.key, o);
    credit_used -= o.credit;
    owed.pop_front();
  }
  return Status::Ok();
}

Status engram_table::send(const RequestRecord& r, Owed o, int64_t deadline_ns) { return send(r, &o, 1, deadline_ns); }

Status engram_table::send(const RequestRecord& r, const Owed* os, uint32_t n, int64_t deadline_ns) {
  if (Status u = usable(); !u.ok()) return u;
  uint32_t cap = channel.responses.capacity(), credit = 0;
  for (uint32_t k = 0; k < n; ++k) credit += os[k].credit;
  if (credit > cap) return {Errc::invalid_capacity, "request needs more responses than the ring holds"};
  if (credit_used + credit > cap) {
    // A ring's worth of answers owed: the owner is that far behind, or a
    // rate limiter holds the requests. Either way the wait is long, so it
    // sleeps at once, as on a full request ring (send_quiet).
    ResponseRecord unused;
    if (Status s = pump(0, &unused, [&] { return credit_used + credit <= cap; }, deadline_ns, /*spin=*/0); !s.ok())
      return s;
  }
  if (Status s = send_quiet(r); !s.ok()) return s;
  credit_used += credit;
  owed.append(os, os + n);
  return Status::Ok();
}

Status engram_table::send_quiet(const RequestRecord& r) {
  for (;;) {
    // The owner sleeps on the table's bell, never on this ring's.
    Status s = channel.requests.try_push(&r, request_bytes(r), /*ring_bell=*/false);
    if (s.ok()) {
      bell->ring();
      return s;
    }
    if (s.code() != Errc::full) return s;
    // The owner drains requests without waiting on us; a full ring means it
    // is busy, or holds an insert for the rate limiter (or is gone): wait in
    // slices, checking that the server lives. No spin first: the wait is
    // long (a writer held by the limiter waits for a learner's update), and
    // a spin's sched_yield calls, each a switch to another runnable thread
    // on a core the machine shares, cost a held Ape-X actor more than its
    // sleeps and wake-ups (bench/NOTES.md, "Ape-X: time in engram calls").
    if (Status u = usable(); !u.ok()) return u;
    if (!client->alive()) return {Errc::disconnected, "the server went away; disconnect and connect again"};
    if (client->take_interrupt()) return {Errc::interrupted, "interrupted while table " + name + "'s request ring was full"};
    bell->ring();
    channel.requests.space_bell().wait([this] { return channel.requests.has_space(); }, kSliceNs, /*spin=*/0);
  }
}

Status engram_table::flush_drops() {
  while (!drops.empty()) {
    RequestRecord r{};
    r.op = static_cast<uint32_t>(RequestOp::drop);
    uint32_t n = static_cast<uint32_t>(std::min<size_t>(drops.size(), kRecordKeys));
    r.count = n;
    std::copy(drops.end() - n, drops.end(), r.payload.blocks);
    if (Status s = send_quiet(r); !s.ok()) return s;
    drops.resize(drops.size() - n);
  }
  return Status::Ok();
}
