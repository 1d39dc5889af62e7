// Priority updates and deletes by key: sent in records of a few keys each
// and, but for engram_update_priorities_async, answered one record at a
// time with a result per key; an async update's refusal is reported by
// the next priority call.
#include <utility>

#include "capi/client.hpp"
#include "core/priority.hpp"

using namespace engram;

namespace {

// Sends n keys (with their priorities, for an update) in records and,
// unless unawaited (engram_update_priorities_async), waits for each answer.
Status key_op(engram_table* t, RequestOp op, const uint64_t* keys, const double* prios, size_t n, int32_t* results,
              bool unawaited = false) {
  if (Status u = t->usable(); !u.ok()) return u;
  uint32_t per = op == RequestOp::update ? kRecordUpdates : kRecordKeys;
  for (size_t done = 0; done < n;) {
    uint32_t m = static_cast<uint32_t>(std::min<size_t>(per, n - done));
    RequestRecord r{};
    r.op = static_cast<uint32_t>(op);
    r.count = m;
    r.id = t->client->next_id++;
    for (uint32_t i = 0; i < m; ++i) {
      if (op == RequestOp::update) r.payload.updates[i] = {keys[done + i], prios[done + i]};
      else r.payload.keys[i] = keys[done + i];
    }
    Owed o{op, r.id, 1, nullptr, {}};
    o.unawaited = unawaited;
    if (Status s = t->send(r, o, -1); !s.ok()) return s;
    if (unawaited) {
      ++t->unawaited;
      done += m;
      continue;
    }
    ResponseRecord rsp;
    if (Status s = t->pump(r.id, &rsp, nullptr, -1); !s.ok()) return s;
    if (Status s = response_status(rsp); !s.ok()) return s;
    if (results)
      for (uint32_t i = 0; i < m; ++i)
        results[done + i] = (rsp.payload.keys.stale_mask >> i & 1)     ? ENGRAM_E_STALE_KEY
                            : (rsp.payload.keys.unknown_mask >> i & 1) ? ENGRAM_E_UNKNOWN_KEY
                                                                       : ENGRAM_OK;
    done += m;
  }
  return Status::Ok();
}

// The first refusal of an engram_update_priorities_async among the
// answers that have arrived (all of them, with wait_all), taken: reported
// once.
Status unawaited_refusal(engram_table* t, bool wait_all) {
  ResponseRecord unused;
  Status s = wait_all ? t->pump(0, &unused, [t] { return t->unawaited == 0; }, -1)
                      : t->pump(0, &unused, nullptr, -1);  // only what is ready
  if (!s.ok()) return s;
  return std::exchange(t->unawaited_error, Status::Ok());
}

}  // namespace

extern "C" {

int engram_update_priorities(engram_table* t, const uint64_t* keys, const double* priorities, size_t n,
                             int32_t* results) {
  ENGRAM_GUARD_BEGIN
  if (!t || (n && (!keys || !priorities))) return fail(Errc::invalid_argument, "table, keys or priorities is NULL");
  for (size_t i = 0; i < n; ++i)
    if (Status s = validate_priority(priorities[i]); !s.ok())
      return fail(s.code(), "priority " + std::to_string(i) + ": " + s.message() + " (nothing applied)");
  if (Status s = unawaited_refusal(t, /*wait_all=*/n == 0); !s.ok()) return set_error(s);
  return set_error(key_op(t, RequestOp::update, keys, priorities, n, results));
  ENGRAM_GUARD_END
}

int engram_update_priorities_async(engram_table* t, const uint64_t* keys, const double* priorities, size_t n) {
  ENGRAM_GUARD_BEGIN
  if (!t || (n && (!keys || !priorities))) return fail(Errc::invalid_argument, "table, keys or priorities is NULL");
  for (size_t i = 0; i < n; ++i)
    if (Status s = validate_priority(priorities[i]); !s.ok())
      return fail(s.code(), "priority " + std::to_string(i) + ": " + s.message() + " (nothing sent)");
  if (Status s = unawaited_refusal(t, /*wait_all=*/false); !s.ok()) return set_error(s);
  return set_error(key_op(t, RequestOp::update, keys, priorities, n, nullptr, /*unawaited=*/true));
  ENGRAM_GUARD_END
}

int engram_delete_items(engram_table* t, const uint64_t* keys, size_t n, int32_t* results) {
  ENGRAM_GUARD_BEGIN
  if (!t || (n && !keys)) return fail(Errc::invalid_argument, "table or keys is NULL");
  return set_error(key_op(t, RequestOp::remove, keys, nullptr, n, results));
  ENGRAM_GUARD_END
}

}  // extern "C"
