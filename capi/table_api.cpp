// engram_table_*: creating, opening, closing, dropping and resetting
// tables, their info and rate limiters, the rate-limiter presets, and
// engram_checkpoint. What a table handle does on its channel is
// table_channel.cpp's; writing and sampling, writer.cpp's and sample.cpp's.
#include <algorithm>
#include <cstring>
#include <memory>

#include "capi/client.hpp"
#include "core/name.hpp"
#include "core/rate_limiter.hpp"
#include "core/signature.hpp"

using namespace engram;

namespace engram {
Status name_request(const char* name, NameRequest* r) {
  std::string n;
  if (Status s = bounded_string(name, kMaxTableName - 1, "table name", &n); !s.ok()) return s;
  if (Status s = validate_name(n, kMaxTableName - 1, "table name"); !s.ok()) return s;
  return copy_fixed(r->name, sizeof r->name, n, "table name");
}
}  // namespace engram

extern "C" {

static int preset(engram_rate_limiter* out, Result<RateLimiterConfig> r) {
  if (!out) return fail(Errc::invalid_argument, "rate limiter output is NULL");
  if (!r.ok()) return set_error(r.status());
  out->samples_per_insert = r->samples_per_insert;
  out->min_size_to_sample = r->min_size_to_sample;
  out->min_diff = r->min_diff;
  out->max_diff = r->max_diff;
  return ENGRAM_OK;
}

int engram_rate_limiter_min_size(engram_rate_limiter* out, int64_t n) {
  ENGRAM_GUARD_BEGIN
  return preset(out, RateLimiterConfig::min_size(n));
  ENGRAM_GUARD_END
}

int engram_rate_limiter_sample_to_insert_ratio(engram_rate_limiter* out, double spi, int64_t min_size,
                                               double error_buffer) {
  ENGRAM_GUARD_BEGIN
  return preset(out, RateLimiterConfig::sample_to_insert_ratio(spi, min_size, error_buffer));
  ENGRAM_GUARD_END
}

int engram_rate_limiter_queue(engram_rate_limiter* out, int64_t size) {
  ENGRAM_GUARD_BEGIN
  return preset(out, RateLimiterConfig::queue(size));
  ENGRAM_GUARD_END
}

void engram_table_options_init(engram_table_options* o) {
  if (!o) return;
  std::memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  o->sampler = ENGRAM_UNIFORM;
  o->remover = ENGRAM_FIFO;
  o->priority_exponent = 1.0;
  o->max_chunks_per_item = kRecordRefs;
  engram_rate_limiter_min_size(&o->rate_limiter, 1);
}

int engram_table_create(engram_client* c, const engram_table_options* o) {
  ENGRAM_GUARD_BEGIN
  if (!c || !o) return fail(Errc::invalid_argument, "client or options is NULL");
  if (Status s = check_struct_size(o->struct_size, ENGRAM_END_OF(engram_table_options, num_columns), "engram_table_options");
      !s.ok())
    return set_error(s);
  NameRequest n;
  if (Status s = name_request(o->name, &n); !s.ok()) return set_error(s);
  // Converted here; the server checks the options again (Table::check).
  TableOptions t;
  t.name = o->name;
  t.capacity = o->max_size;
  t.sampler = {static_cast<SelectorKind>(o->sampler), o->priority_exponent};
  t.remover = {static_cast<SelectorKind>(o->remover), o->priority_exponent};
  t.max_times_sampled = o->max_times_sampled;
  t.max_refs_per_item = o->max_chunks_per_item ? o->max_chunks_per_item : kRecordRefs;
  t.rate_limiter = {o->rate_limiter.samples_per_insert, o->rate_limiter.min_size_to_sample, o->rate_limiter.min_diff,
                    o->rate_limiter.max_diff};
  const engram_compression* comp = ENGRAM_HAS_FIELD(o, engram_table_options, compression) ? o->compression : nullptr;
  if (Status s = columns_from_c(o->columns, o->num_columns, comp, &t.signature); !s.ok()) return set_error(s);
  auto checked = Table::check(std::move(t));
  if (!checked.ok()) return set_error(checked.status());
  TableSpec spec = to_spec(*checked);
  return set_error(c->control(ControlType::create_table, &spec, sizeof spec, nullptr));
  ENGRAM_GUARD_END
}

int engram_table_open(engram_client* c, const char* name, engram_table** out) {
  ENGRAM_GUARD_BEGIN
  if (!c || !out) return fail(Errc::invalid_argument, "client or out is NULL");
  *out = nullptr;
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  std::vector<char> reply;
  ReceivedFds fds;
  if (Status s = c->control(ControlType::open_table, &n, sizeof n, &reply, 0, &fds); !s.ok()) return set_error(s);
  if (reply.size() != sizeof(OpenReply) || fds.size() != 1)
    return fail(Errc::layout_mismatch, "open reply has another size, or came without its channel");
  OpenReply r;
  std::memcpy(&r, reply.data(), sizeof r);
  if (r.table_id >= kMaxTables || r.spec.num_columns == 0 || r.spec.num_columns > kMaxColumns)
    return fail(Errc::corrupt, "the server described table " + std::string(name) + " out of range");
  auto t = std::make_unique<engram_table>();
  t->client = c;
  t->id = r.table_id;
  t->name = name;
  t->spec = r.spec;
  for (uint32_t i = 0; i < r.spec.num_columns; ++i)
    t->column_names.push_back(fixed_string(r.spec.columns[i].name, kMaxColumnName));
  t->sig_hash = signature_hash(r.spec.columns, r.spec.num_columns);
  t->decoded.resize(r.spec.num_columns);
  auto seg = ShmSegment::map_fd(fds.take(0), r.channel_size, ShmSegment::Access::read_write, "channel of " + t->name);
  if (!seg.ok()) return set_error(seg.status());
  t->segment = std::move(*seg);
  auto ch = Channel::attach(t->segment.data(), t->segment.size());
  if (!ch.ok()) return set_error(ch.status());
  t->channel = *ch;
  t->bell = &c->bells->slots[r.table_id].bell;
  c->tables.push_back(t.get());
  *out = t.release();
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

void engram_table_close(engram_table* t) {
  if (!t) return;
  try {
    engram_client* c = t->client;
    std::vector<engram_batch*> mine;
    for (engram_batch* b : c->batches)
      if (engram_batch_table(b) == t) mine.push_back(b);
    for (engram_batch* b : mine) engram_batch_release(b);
    end_begun_sample(t);
    // Writers' items for this table that still wait for their chunk go now;
    // the writers keep no other pointer to the table, only its id, and
    // their holds on this channel go back with it.
    if (!c->disconnected && t->usable().ok()) {
      writers_send_pending(c, t);
      (void)t->flush_drops();
      ResponseRecord ignore;
      (void)t->pump(0, &ignore, [t] { return t->owed.empty(); }, monotonic_ns() + 1'000'000'000LL);
    }
    NameRequest n{};
    std::strncpy(n.name, t->name.c_str(), sizeof n.name - 1);
    (void)c->control(ControlType::close_table, &n, sizeof n, nullptr);
    c->tables.erase(std::remove(c->tables.begin(), c->tables.end(), t), c->tables.end());
  } catch (...) {
  }
  delete t;
}

static int name_call(engram_client* c, const char* name, ControlType type) {
  if (!c) return fail(Errc::invalid_argument, "client is NULL");
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  return set_error(c->control(type, &n, sizeof n, nullptr));
}

int engram_checkpoint(engram_client* c, int32_t timeout_ms, char* path, size_t cap) {
  ENGRAM_GUARD_BEGIN
  if (!c || (cap && !path)) return fail(Errc::invalid_argument, "client or path is NULL");
  if (cap) path[0] = '\0';
  std::vector<char> reply;
  Status s = c->control(ControlType::checkpoint, nullptr, 0, &reply, timeout_ms < 0 ? -1 : timeout_ms == 0 ? 1 : timeout_ms);
  if (!s.ok()) return set_error(s);
  std::string p(reply.begin(), reply.end());
  if (cap) {
    if (p.size() >= cap)
      return fail(Errc::invalid_capacity, "the checkpoint was written to " + p + ", which needs " +
                                              std::to_string(p.size() + 1) + " bytes; path has " + std::to_string(cap));
    std::memcpy(path, p.c_str(), p.size() + 1);
  }
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_table_drop(engram_client* c, const char* name) {
  ENGRAM_GUARD_BEGIN
  return name_call(c, name, ControlType::drop_table);
  ENGRAM_GUARD_END
}

int engram_table_reset(engram_client* c, const char* name) {
  ENGRAM_GUARD_BEGIN
  return name_call(c, name, ControlType::reset_table);
  ENGRAM_GUARD_END
}

int engram_table_set_rate_limiter(engram_client* c, const char* name, const engram_rate_limiter* r) {
  ENGRAM_GUARD_BEGIN
  if (!c || !r) return fail(Errc::invalid_argument, "client or rate limiter is NULL");
  RateLimiterRequest rq{};
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  std::memcpy(rq.name, n.name, sizeof rq.name);
  rq.limiter = {r->samples_per_insert, r->min_size_to_sample, r->min_diff, r->max_diff};  // the server checks it
  return set_error(c->control(ControlType::set_rate_limiter, &rq, sizeof rq, nullptr));
  ENGRAM_GUARD_END
}

void engram_table_info_init(engram_table_info* i) {
  if (!i) return;
  std::memset(i, 0, sizeof *i);
  i->struct_size = sizeof *i;
}

int engram_table_info_get(engram_client* c, const char* name, engram_table_info* out) {
  ENGRAM_GUARD_BEGIN
  if (!c || !out) return fail(Errc::invalid_argument, "client or out is NULL");
  // Version 0.1 readers need at least the counters; newer fields are optional.
  if (Status s = check_struct_size(out->struct_size, offsetof(engram_table_info, can_sample), "engram_table_info"); !s.ok())
    return set_error(s);
  NameRequest n;
  if (Status s = name_request(name, &n); !s.ok()) return set_error(s);
  std::vector<char> reply;
  if (Status s = c->control(ControlType::table_info, &n, sizeof n, &reply); !s.ok()) return set_error(s);
  if (reply.size() != sizeof(TableInfoWire)) return fail(Errc::layout_mismatch, "table info has another size");
  TableInfoWire w;
  std::memcpy(&w, reply.data(), sizeof w);
  engram_table_info i;
  engram_table_info_init(&i);
  std::memcpy(i.name, w.spec.name, std::min(sizeof i.name, sizeof w.spec.name));
  i.name[sizeof i.name - 1] = '\0';
  i.max_size = w.spec.capacity;
  i.size = w.size;
  i.inserts = static_cast<uint64_t>(w.counters.inserts);
  i.samples = static_cast<uint64_t>(w.counters.samples);
  i.deletes = static_cast<uint64_t>(w.counters.deletes);
  i.updates = w.stats.updates;
  i.evictions = w.stats.evictions;
  i.expirations = w.stats.expirations;
  i.stale_requests = w.stats.stale;
  i.rate_limited = w.stats.rate_limited;
  i.sampler = static_cast<int32_t>(w.spec.sampler);
  i.remover = static_cast<int32_t>(w.spec.remover);
  i.max_times_sampled = w.spec.max_times_sampled;
  i.num_columns = w.spec.num_columns;
  i.can_sample = static_cast<int32_t>(w.can_sample);
  i.can_insert = static_cast<int32_t>(w.can_insert);
  i.clients = w.clients;
  i.rate_limiter = {w.spec.limiter.samples_per_insert, w.spec.limiter.min_size_to_sample, w.spec.limiter.min_diff,
                    w.spec.limiter.max_diff};
  i.bytes_raw = w.stats.bytes_raw;
  i.bytes_stored = w.stats.bytes_stored;
  i.max_priority = w.max_priority;
  i.min_priority = w.min_priority;
  i.shards = w.shards;
  i.shards_present = w.shards_present;
  size_t keep = out->struct_size;
  std::memcpy(out, &i, std::min(keep, sizeof i));
  out->struct_size = keep;
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_table_columns(const engram_table* t, engram_column* out, uint32_t cap, uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!t || !count || (cap && !out)) return fail(Errc::invalid_argument, "table, out or count is NULL");
  *count = t->spec.num_columns;
  for (uint32_t i = 0; i < std::min(cap, t->spec.num_columns); ++i) {
    const Column& c = t->spec.columns[i];
    out[i].name = t->column_names[i].c_str();
    out[i].dtype = static_cast<int32_t>(c.dtype);
    out[i].rank = c.rank;
    std::memcpy(out[i].shape, c.shape, sizeof out[i].shape);
  }
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

int engram_table_compression(const engram_table* t, engram_compression* out, uint32_t cap, uint32_t* count) {
  ENGRAM_GUARD_BEGIN
  if (!t || !count || (cap && !out)) return fail(Errc::invalid_argument, "table, out or count is NULL");
  *count = t->spec.num_columns;
  for (uint32_t i = 0; i < std::min(cap, t->spec.num_columns); ++i)
    out[i] = {static_cast<int32_t>(t->spec.columns[i].codec), t->spec.columns[i].level};
  return ENGRAM_OK;
  ENGRAM_GUARD_END
}

}  // extern "C"
