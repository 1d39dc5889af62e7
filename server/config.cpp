#include "server/config.hpp"

#include <sched.h>
#include <unistd.h>

#include <grp.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "core/chunk_format.hpp"
#include "core/codec.hpp"
#include "core/priority.hpp"
#include "core/rate_limiter.hpp"
#include "core/signature.hpp"
#include "server/peer_address.hpp"

namespace engram {

uint32_t default_connections_per_uid() {
  cpu_set_t set;
  long cpus = ::sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : ::sysconf(_SC_NPROCESSORS_ONLN);
  return static_cast<uint32_t>(std::clamp<long>(4 * cpus, 256, kMaxConnections / 2));
}
namespace {

Status bad(const std::string& where, const std::string& what) { return {Errc::invalid_argument, where + ": " + what}; }

std::string at(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

// Refuses keys outside `allowed`, naming them all.
Status only_keys(const toml::table& t, const std::string& path, std::initializer_list<const char*> allowed) {
  for (auto&& [k, v] : t) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k.str() == a;
    if (ok) continue;
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return bad(at(path, std::string(k.str())), "unknown key; allowed here: " + list);
  }
  return Status::Ok();
}

Result<std::string> get_string(const toml::table& t, const std::string& path, const char* key, std::string def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (auto v = n->value<std::string>(); v && n->is_string()) return *v;
  return bad(at(path, key), "must be a string");
}

Result<int64_t> get_int(const toml::table& t, const std::string& path, const char* key, int64_t def, int64_t lo,
                        int64_t hi) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  std::string range = hi == INT64_MAX ? std::to_string(lo) + " or more" : std::to_string(lo) + ".." + std::to_string(hi);
  if (!n->is_integer()) return bad(at(path, key), "must be an integer, " + range);
  int64_t v = *n->value<int64_t>();
  if (v < lo || v > hi) return bad(at(path, key), std::to_string(v) + " is out of range; allowed " + range);
  return v;
}

Result<double> get_double(const toml::table& t, const std::string& path, const char* key, double def) {
  const toml::node* n = t.get(key);
  if (!n) return def;
  if (!n->is_number()) return bad(at(path, key), "must be a number");
  double v = *n->value<double>();
  if (!std::isfinite(v)) return bad(at(path, key), "must be finite");
  return v;
}

Result<uint64_t> get_size(const toml::table& t, const std::string& path, const char* key) {
  const toml::node* n = t.get(key);
  if (!n) return bad(at(path, key), "is required (bytes, or a string like \"64KiB\")");
  if (n->is_integer()) {
    int64_t v = *n->value<int64_t>();
    if (v <= 0) return bad(at(path, key), "must be positive");
    return static_cast<uint64_t>(v);
  }
  if (n->is_string()) {
    auto r = parse_size(*n->value<std::string>());
    if (!r.ok()) return bad(at(path, key), r.status().message());
    return r;
  }
  return bad(at(path, key), "must be a byte count or a string like \"64KiB\"");
}

Result<SelectorKind> parse_selector(const std::string& s, const std::string& where) {
  static const std::pair<const char*, SelectorKind> kinds[] = {
      {"uniform", SelectorKind::uniform}, {"prioritized", SelectorKind::prioritized},
      {"fifo", SelectorKind::fifo},       {"lifo", SelectorKind::lifo},
      {"max_heap", SelectorKind::max_heap}, {"min_heap", SelectorKind::min_heap}};
  for (auto& [n, k] : kinds)
    if (s == n) return k;
  return bad(where, "\"" + s + "\" is not a selector; allowed: uniform, prioritized, fifo, lifo, max_heap, min_heap");
}

Result<DType> parse_dtype(const std::string& s, const std::string& where) {
  for (uint32_t d = static_cast<uint32_t>(DType::u8); d <= static_cast<uint32_t>(DType::boolean); ++d)
    if (s == dtype_name(static_cast<DType>(d))) return static_cast<DType>(d);
  return bad(where, "\"" + s + "\" is not a dtype; allowed: uint8, int8, uint16, int16, uint32, int32, uint64, int64, "
                    "float16, float32, float64, bool");
}

Result<RateLimiterConfig> parse_limiter(const toml::node* n, const std::string& path) {
  if (!n) return RateLimiterConfig::min_size(1);
  const toml::table* t = n->as_table();
  if (!t) return bad(path, "must be a table, e.g. { kind = \"min_size\", min_size = 1 }");
  auto kind = get_string(*t, path, "kind", "min_size");
  if (!kind.ok()) return kind.status();
  Result<RateLimiterConfig> r = Status{};
  if (*kind == "min_size") {
    if (Status s = only_keys(*t, path, {"kind", "min_size"}); !s.ok()) return s;
    auto m = get_int(*t, path, "min_size", 1, 1, INT64_MAX);
    if (!m.ok()) return m.status();
    r = RateLimiterConfig::min_size(*m);
  } else if (*kind == "sample_to_insert_ratio") {
    if (Status s = only_keys(*t, path, {"kind", "samples_per_insert", "min_size", "error_buffer"}); !s.ok()) return s;
    auto spi = get_double(*t, path, "samples_per_insert", 1.0);
    auto m = get_int(*t, path, "min_size", 1, 1, INT64_MAX);
    auto e = get_double(*t, path, "error_buffer", 100.0);
    if (!spi.ok()) return spi.status();
    if (!m.ok()) return m.status();
    if (!e.ok()) return e.status();
    r = RateLimiterConfig::sample_to_insert_ratio(*spi, *m, *e);
  } else if (*kind == "queue") {
    if (Status s = only_keys(*t, path, {"kind", "size"}); !s.ok()) return s;
    auto sz = get_int(*t, path, "size", 0, 1, INT64_MAX);
    if (!sz.ok()) return sz.status();
    if (!t->get("size")) return bad(at(path, "size"), "is required for a queue");
    r = RateLimiterConfig::queue(*sz);
  } else {
    return bad(at(path, "kind"), "\"" + *kind + "\" is not a rate limiter; allowed: min_size, sample_to_insert_ratio, queue");
  }
  if (!r.ok()) return bad(path, r.status().message());
  return r;
}

Result<Column> parse_column(const toml::node& n, const std::string& path) {
  const toml::table* t = n.as_table();
  if (!t) return bad(path, "must be a table { name, dtype, shape, compression, level }");
  if (Status s = only_keys(*t, path, {"name", "dtype", "shape", "compression", "level"}); !s.ok()) return s;
  auto name = get_string(*t, path, "name", "");
  if (!name.ok()) return name.status();
  if (name->empty()) return bad(at(path, "name"), "is required");
  auto dt = get_string(*t, path, "dtype", "");
  if (!dt.ok()) return dt.status();
  auto dtype = parse_dtype(*dt, at(path, "dtype"));
  if (!dtype.ok()) return dtype.status();
  std::vector<uint32_t> shape;
  if (const toml::node* s = t->get("shape")) {
    const toml::array* a = s->as_array();
    if (!a) return bad(at(path, "shape"), "must be an array of positive integers, e.g. [84, 84]");
    if (a->size() > kMaxRank) return bad(at(path, "shape"), "has more than " + std::to_string(kMaxRank) + " dimensions");
    for (auto&& d : *a) {
      // Bounded by the field's width only: Table::check bounds the step.
      if (!d.is_integer() || *d.value<int64_t>() < 0 || *d.value<int64_t>() > UINT32_MAX)
        return bad(at(path, "shape"), "dimensions must be whole numbers, e.g. [84, 84]");
      shape.push_back(static_cast<uint32_t>(*d.value<int64_t>()));
    }
  }
  auto comp = get_string(*t, path, "compression", "none");
  if (!comp.ok()) return comp.status();
  auto codec = codec_from_name(*comp);
  if (!codec.ok()) return bad(at(path, "compression"), codec.status().message());
  int32_t level = 0;
  if (const toml::node* l = t->get("level")) {
    if (!l->is_integer()) return bad(at(path, "level"), "must be an integer zstd level");
    if (*codec == Codec::none) return bad(at(path, "level"), "needs compression = \"zstd\" or \"delta_zstd\"");
    level = static_cast<int32_t>(std::clamp<int64_t>(*l->value<int64_t>(), INT32_MIN, INT32_MAX));
  }
  return make_column(*name, *dtype, shape, *codec, level);
}

Result<TableOptions> parse_table(const toml::table& t, const std::string& path) {
  if (Status s = only_keys(t, path, {"name", "max_size", "sampler", "priority_exponent", "remover",
                                     "max_times_sampled", "rate_limiter", "column", "max_chunks_per_item"});
      !s.ok())
    return s;
  TableOptions o;
  auto name = get_string(t, path, "name", "");
  if (!name.ok()) return name.status();
  if (name->empty()) return bad(at(path, "name"), "is required");
  o.name = *name;
  if (!t.get("max_size")) return bad(at(path, "max_size"), "is required (the table's capacity in items)");
  // Any integer: Table::check refuses what is out of range, in the words
  // every way of making a table gets (below 1 is as 0 there).
  auto cap = get_int(t, path, "max_size", 0, INT64_MIN, INT64_MAX);
  if (!cap.ok()) return cap.status();
  o.capacity = static_cast<uint64_t>(std::max<int64_t>(0, *cap));
  auto sampler = get_string(t, path, "sampler", "uniform");
  auto remover = get_string(t, path, "remover", "fifo");
  if (!sampler.ok()) return sampler.status();
  if (!remover.ok()) return remover.status();
  auto sk = parse_selector(*sampler, at(path, "sampler"));
  auto rk = parse_selector(*remover, at(path, "remover"));
  if (!sk.ok()) return sk.status();
  if (!rk.ok()) return rk.status();
  auto exponent = get_double(t, path, "priority_exponent", 1.0);
  if (!exponent.ok()) return exponent.status();
  o.sampler = {*sk, *exponent};
  o.remover = {*rk, *exponent};
  auto mts = get_int(t, path, "max_times_sampled", 0, 0, UINT32_MAX);
  if (!mts.ok()) return mts.status();
  o.max_times_sampled = static_cast<uint32_t>(*mts);
  auto mcpi = get_int(t, path, "max_chunks_per_item", kMaxItemChunks, 0, UINT32_MAX);
  if (!mcpi.ok()) return mcpi.status();
  o.max_refs_per_item = static_cast<uint32_t>(*mcpi);
  auto lim = parse_limiter(t.get("rate_limiter"), at(path, "rate_limiter"));
  if (!lim.ok()) return lim.status();
  o.rate_limiter = *lim;
  const toml::node* cols = t.get("column");
  const toml::array* ca = cols ? cols->as_array() : nullptr;
  if (!ca || ca->empty()) return bad(at(path, "column"), "at least one [[table.column]] { name, dtype, shape } is required");
  for (size_t i = 0; i < ca->size(); ++i) {
    auto c = parse_column((*ca)[i], at(path, "column[" + std::to_string(i) + "]"));
    if (!c.ok()) return c.status();
    o.signature.push_back(*c);
  }
  return o;
}

template <typename F>
auto guarded(std::string_view text, const std::string& source, F f) -> decltype(f(std::declval<toml::table&>())) {
  try {
    toml::table root = toml::parse(text, source);
    return f(root);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << source << ":" << e.source().begin.line << ":" << e.source().begin.column << ": " << e.description();
    return Status{Errc::invalid_argument, os.str()};
  } catch (const std::exception& e) {
    return Status{Errc::invalid_argument, source + ": " + e.what()};
  }
}

}  // namespace

ArenaConfig default_arena() {
  return ArenaConfig{{{256, 131072},
                      {512, 65536},
                      {1 << 10, 32768},
                      {2 << 10, 16384},
                      {4 << 10, 8192},
                      {16 << 10, 1024},
                      {64 << 10, 256},
                      {1 << 20, 24},
                      {8 << 20, 2}}};
}

uint64_t quarter_of_memory() {
  const uint64_t pages = static_cast<uint64_t>(std::max<long>(::sysconf(_SC_PHYS_PAGES), 0));
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) / 4;
}

ArenaPlan plan_arena(const ServerConfig& c) {
  ArenaPlan p;
  p.start = c.arena.classes.empty() ? arena_for_tables(default_arena(), c.tables) : c.arena;
  p.start_bytes = ArenaBlocks::bytes_needed(p.start);
  p.grow_to = c.arena_grow_to ? c.arena_grow_to : c.arena.classes.empty() ? quarter_of_memory() : p.start_bytes;
  p.layout = p.start;
  if (p.grow_to <= p.start_bytes || p.start_bytes == 0) return p;
  // Each class may take all the room there is to grow: which one a
  // server's tables need is known only when they write. Blocks stay
  // below kArenaMaxBlocks, shared evenly.
  uint64_t blocks = 0;
  for (const SizeClassConfig& k : p.start.classes) blocks += k.count;
  const uint64_t spare = blocks < kArenaMaxBlocks - 1 ? (kArenaMaxBlocks - 1 - blocks) / p.start.classes.size() : 0;
  for (SizeClassConfig& k : p.layout.classes)
    k.count += static_cast<uint32_t>(std::min<uint64_t>((p.grow_to - p.start_bytes) / k.block_size, spare));
  return p;
}

ArenaConfig arena_for_tables(ArenaConfig base, const std::vector<CheckedTableOptions>& tables) {
  const uint64_t bound = quarter_of_memory();
  uint64_t total = 0, blocks = 0;
  for (const SizeClassConfig& k : base.classes) {
    total += k.block_size * k.count;
    blocks += k.count;
  }
  std::vector<uint64_t> need(base.classes.size(), 0);
  for (const CheckedTableOptions& t : tables) {
    const size_t one_step = chunk_bytes(t->signature.data(), static_cast<uint32_t>(t->signature.size()), 1);
    for (size_t i = 0; i < base.classes.size(); ++i) {
      SizeClassConfig& k = base.classes[i];
      if (k.block_size < one_step) continue;
      need[i] += t->capacity;
      uint64_t more = need[i] > k.count ? need[i] - k.count : 0;
      more = std::min<uint64_t>({more, bound > total ? (bound - total) / k.block_size : 0,
                                 blocks < kArenaMaxBlocks - 1 ? kArenaMaxBlocks - 1 - blocks : 0});
      k.count += static_cast<uint32_t>(more);
      total += more * k.block_size;
      blocks += more;
      break;
    }
  }
  return base;
}

uint32_t client_block_limit(uint32_t count, double share) {
  auto by_share = static_cast<uint32_t>(std::floor(count * share));
  return std::max(by_share, std::min<uint32_t>(count, 4));
}

std::string size_text(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + units[u];
}

Result<uint64_t> parse_size(std::string_view s) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (UINT64_MAX - 9) / 10) return Status{Errc::invalid_argument, "size \"" + std::string(s) + "\" is too large"};
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  std::string_view unit = s.substr(i);
  uint64_t mul = 0;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "KiB") mul = 1ull << 10;
  else if (unit == "MiB") mul = 1ull << 20;
  else if (unit == "GiB") mul = 1ull << 30;
  if (i == 0 || mul == 0)
    return Status{Errc::invalid_argument, "size \"" + std::string(s) + "\" is not a number with an optional unit B, KiB, MiB or GiB"};
  if (v > UINT64_MAX / mul) return Status{Errc::invalid_argument, "size \"" + std::string(s) + "\" is too large"};
  return v * mul;
}

static Result<CheckpointConfig> parse_checkpoint(const toml::table& t) {
  const std::string p = "checkpoint";
  if (Status s = only_keys(t, p, {"dir", "interval_s", "on_shutdown", "keep", "io", "level", "restore", "direct",
                                  "max_mb_per_s", "restore_from"}); !s.ok())
    return s;
  CheckpointConfig c;
  auto dir = get_string(t, p, "dir", "");
  auto interval = get_int(t, p, "interval_s", 0, 0, 7 * 86400);
  auto keep = get_int(t, p, "keep", 3, 1, 1000);
  auto io = get_string(t, p, "io", "auto");
  auto level = get_int(t, p, "level", 1, kMinZstdLevel, kMaxZstdLevel);
  auto rate = get_int(t, p, "max_mb_per_s", 512, 0, 1 << 20);
  auto from = get_string(t, p, "restore_from", "");
  if (!rate.ok()) return rate.status();
  if (!from.ok()) return from.status();
  if (!dir.ok()) return dir.status();
  if (!interval.ok()) return interval.status();
  if (!keep.ok()) return keep.status();
  if (!io.ok()) return io.status();
  if (!level.ok()) return level.status();
  for (const char* key : {"on_shutdown", "restore", "direct"})
    if (const toml::node* n = t.get(key); n && !n->is_boolean()) return bad(at(p, key), "must be true or false");
  c.dir = *dir;
  c.interval_s = static_cast<uint32_t>(*interval);
  c.keep = static_cast<uint32_t>(*keep);
  c.level = static_cast<int32_t>(*level);
  c.on_shutdown = t["on_shutdown"].value_or(false);
  c.restore = t["restore"].value_or(true);
  c.direct = t["direct"].value_or(true);
  c.max_mb_per_s = static_cast<uint32_t>(*rate);
  c.restore_path = *from;
  if (*io == "auto") c.io = IoMode::automatic;
  else if (*io == "pwrite") c.io = IoMode::pwrite;
  else return bad(at(p, "io"), "\"" + *io + "\" is not an I/O path; allowed: auto (io_uring, else pwrite), pwrite");
  if (c.dir.empty() && (c.interval_s || c.on_shutdown))
    return bad(at(p, "dir"), "is required when interval_s or on_shutdown is set");
  return c;
}

// A [[table]]'s shards keys, taken out of `own` (a table's options know
// nothing of peers) into *views; the table's selectors are the view's
// (FIFO, max_times_sampled 1: a draw waits, then is handed out once), so
// keys that would choose them are refused.
static Status take_view(toml::table& own, const std::string& p, std::vector<RemoteConfig::View>* views) {
  if (!own.contains("shards") && !own.contains("shard_table") && !own.contains("shard_batch") &&
      !own.contains("shard_prefetch"))
    return Status::Ok();
  if (!own.contains("shards")) return bad(at(p, "shards"), "is needed with shard_table, shard_batch and shard_prefetch");
  for (const char* k : {"upstream", "upstream_table", "mirror", "mirror_table"})
    if (own.contains(k)) return bad(at(p, k), "a view over shards takes its items from them; it is not also linked so");
  for (const char* k : {"sampler", "remover", "max_times_sampled", "rate_limiter", "priority_exponent"})
    if (own.contains(k))
      return bad(at(p, k), "a view over shards samples as its shards' samplers and rate limiters do; leave " +
                               std::string(k) + " out here and set it on the shards' tables");
  RemoteConfig::View v;
  auto name = get_string(own, p, "name", "");
  auto peer_table = get_string(own, p, "shard_table", "");
  auto batch = get_int(own, p, "shard_batch", kDefaultShardBatch, 1, kMaxShardBatch);
  auto prefetch = get_int(own, p, "shard_prefetch", kDefaultShardPrefetch, 1, kMaxShardPrefetch);
  for (const Status& s : {name.status(), peer_table.status(), batch.status(), prefetch.status()})
    if (!s.ok()) return s;
  const toml::array* list = own.get("shards")->as_array();
  if (!list || list->empty() || list->size() > kMaxShards)
    return bad(at(p, "shards"), "must be a list of 1.." + std::to_string(kMaxShards) + " \"HOST:PORT\" strings");
  for (const toml::node& n : *list) {
    if (!n.is_string()) return bad(at(p, "shards"), "must be a list of \"HOST:PORT\" strings");
    std::string peer = *n.value<std::string>();
    for (const std::string& seen : v.shards)
      if (seen == peer) return bad(at(p, "shards"), peer + " is listed twice");
    v.shards.push_back(peer);
  }
  v.table = *name;
  v.peer_table = peer_table->empty() ? *name : *peer_table;
  v.batch = static_cast<uint32_t>(*batch);
  v.prefetch = static_cast<uint32_t>(*prefetch);
  for (const char* k : {"shards", "shard_table", "shard_batch", "shard_prefetch"}) own.erase(k);
  own.insert_or_assign("sampler", "fifo");
  own.insert_or_assign("remover", "fifo");
  own.insert_or_assign("max_times_sampled", 1);
  views->push_back(std::move(v));
  return Status::Ok();
}

static Result<RemoteConfig> parse_remote(const toml::table& t) {
  const std::string p = "remote";
  if (Status s = only_keys(t, p, {"listen", "tls_cert", "tls_key", "tls_ca", "insecure", "name", "max_streams"});
      !s.ok())
    return s;
  RemoteConfig c;
  for (auto [key, field] : {std::pair{"listen", &c.listen}, {"tls_cert", &c.tls_cert}, {"tls_key", &c.tls_key},
                            {"tls_ca", &c.tls_ca}, {"name", &c.name}}) {
    auto v = get_string(t, p, key, "");
    if (!v.ok()) return v.status();
    *field = *v;
  }
  if (const toml::node* n = t.get("insecure"); n && !n->is_boolean()) return bad(at(p, "insecure"), "must be true or false");
  c.insecure = t["insecure"].value_or(false);
  auto ms = get_int(t, p, "max_streams", c.max_streams, 1, kMaxPeerStreams);
  if (!ms.ok()) return ms.status();
  c.max_streams = static_cast<uint32_t>(*ms);
  return c;
}

Result<ServerConfig> parse_config(std::string_view text, const std::string& source) {
  return guarded(text, source, [&](toml::table& root) -> Result<ServerConfig> {
    ServerConfig c;
    if (Status s = only_keys(root, "", {"socket", "group", "shm_prefix", "arena", "server", "client", "table",
                                        "checkpoint", "remote"});
        !s.ok())
      return Status{s.code(), source + ": " + s.message()};
    auto wrap = [&](const Status& s) { return Status{s.code(), source + ": " + s.message()}; };
    // [[table]] upstream and mirror, kept past [remote]'s parse
    std::vector<RemoteConfig::Upstream> remote_upstreams, remote_mirrors;
    std::vector<RemoteConfig::View> remote_views;
    auto sock = get_string(root, "", "socket", kDefaultSocket);
    auto group = get_string(root, "", "group", "");
    auto prefix = get_string(root, "", "shm_prefix", "");
    if (!sock.ok()) return wrap(sock.status());
    if (!group.ok()) return wrap(group.status());
    if (!prefix.ok()) return wrap(prefix.status());
    c.socket_path = *sock;
    c.socket_given = root.contains("socket");
    c.group = *group;
    c.shm_prefix = *prefix;
    if (const toml::node* a = root.get("arena")) {
      const toml::table* at_ = a->as_table();
      if (!at_) return wrap(bad("arena", "must be a table: classes = [ { block_size, count }, ... ], grow_to"));
      if (Status s = only_keys(*at_, "arena", {"classes", "grow_to"}); !s.ok()) return wrap(s);
      if (at_->get("grow_to")) {
        auto g = get_size(*at_, "arena", "grow_to");
        if (!g.ok()) return wrap(g.status());
        c.arena_grow_to = *g;
      }
      const toml::node* cl = at_->get("classes");
      const toml::array* arr = cl ? cl->as_array() : nullptr;
      if (!cl && c.arena_grow_to) arr = nullptr;  // grow_to alone: the default classes, growing to it
      else if (!arr || arr->empty()) return wrap(bad("arena.classes", "must be a non-empty array of { block_size, count }"));
      for (size_t i = 0; arr && i < arr->size(); ++i) {
        std::string p = "arena.classes[" + std::to_string(i) + "]";
        const toml::table* e = (*arr)[i].as_table();
        if (!e) return wrap(bad(p, "must be a table { block_size, count }"));
        if (Status s = only_keys(*e, p, {"block_size", "count"}); !s.ok()) return wrap(s);
        auto bs = get_size(*e, p, "block_size");
        auto n = get_int(*e, p, "count", 0, 1, kArenaMaxBlocks);
        if (!bs.ok()) return wrap(bs.status());
        if (!n.ok()) return wrap(n.status());
        if (!e->get("count")) return wrap(bad(at(p, "count"), "is required"));
        c.arena.classes.push_back({*bs, static_cast<uint32_t>(*n)});
      }
      if (arr)
        if (Status s = ChunkArena::validate(c.arena); !s.ok()) return wrap(bad("arena.classes", s.message()));
    }
    if (const toml::node* sv = root.get("server")) {
      const toml::table* t = sv->as_table();
      if (!t) return wrap(bad("server", "must be a table"));
      if (Status s = only_keys(*t, "server", {"max_connections", "max_connections_per_uid", "max_startups",
                                              "hello_timeout_ms"});
          !s.ok())
        return wrap(s);
      auto ms = get_int(*t, "server", "max_startups", c.max_startups, 1, kMaxConnections);
      if (!ms.ok()) return wrap(ms.status());
      c.max_startups = static_cast<uint32_t>(*ms);
      auto mc = get_int(*t, "server", "max_connections", c.max_connections, 1, kMaxConnections);
      auto mu = get_int(*t, "server", "max_connections_per_uid", c.max_connections_per_uid, 1, kMaxConnections);
      auto ht = get_int(*t, "server", "hello_timeout_ms", c.hello_timeout_ms, 10, 600000);
      if (!mc.ok()) return wrap(mc.status());
      if (!mu.ok()) return wrap(mu.status());
      if (!ht.ok()) return wrap(ht.status());
      c.max_connections = static_cast<uint32_t>(*mc);
      // Left out, it follows a smaller max_connections down.
      c.max_connections_per_uid = static_cast<uint32_t>(t->get("max_connections_per_uid") ? *mu : std::min(*mu, *mc));
      c.hello_timeout_ms = static_cast<uint32_t>(*ht);
    }
    if (const toml::node* cl = root.get("client")) {
      const toml::table* t = cl->as_table();
      if (!t) return wrap(bad("client", "must be a table"));
      if (Status s = only_keys(*t, "client", {"ring_records", "max_reserved_share"}); !s.ok()) return wrap(s);
      auto rr = get_int(*t, "client", "ring_records", 1024, 16, 1 << 16);
      if (!rr.ok()) return wrap(rr.status());
      if ((*rr & (*rr - 1)) != 0) return wrap(bad("client.ring_records", "must be a power of two"));
      c.ring_records = static_cast<uint32_t>(*rr);
      auto share = get_double(*t, "client", "max_reserved_share", c.max_reserved_share);
      if (!share.ok()) return wrap(share.status());
      c.max_reserved_share = *share;
    }
    if (const toml::node* cp = root.get("checkpoint")) {
      const toml::table* t = cp->as_table();
      if (!t) return wrap(bad("checkpoint", "must be a table"));
      auto ck = parse_checkpoint(*t);
      if (!ck.ok()) return wrap(ck.status());
      c.checkpoint = *ck;
    }
    if (const toml::node* rm = root.get("remote")) {
      const toml::table* t = rm->as_table();
      if (!t) return wrap(bad("remote", "must be a table"));
      auto r = parse_remote(*t);
      if (!r.ok()) return wrap(r.status());
      c.remote = *r;
    }
    c.remote.state_dir = c.checkpoint.dir;
    if (const toml::node* tn = root.get("table")) {
      const toml::array* arr = tn->as_array();
      if (!arr) return wrap(bad("table", "must be an array of tables: use [[table]]"));
      for (size_t i = 0; i < arr->size(); ++i) {
        std::string p = "table[" + std::to_string(i) + "]";
        const toml::table* given = (*arr)[i].as_table();
        if (!given) return wrap(bad(p, "must be a table"));
        // A table's link to a peer is the server's business, not the
        // table's options: taken out here (create-table snippets refuse it).
        toml::table own = *given;
        const toml::table* t = &own;
        if (Status s = take_view(own, p, &remote_views); !s.ok()) return wrap(s);
        if ((own.contains("upstream") || own.contains("upstream_table")) &&
            (own.contains("mirror") || own.contains("mirror_table")))
          return wrap(bad(p, "a table is upstream (its items go to a peer) or a mirror (it keeps a peer's newest "
                             "items), not both"));
        for (auto [key, links] : {std::pair{"upstream", &remote_upstreams}, {"mirror", &remote_mirrors}}) {
          const std::string key_table = std::string(key) + "_table";
          if (!own.contains(key) && !own.contains(key_table)) continue;
          auto peer = get_string(own, p, key, "");
          auto peer_table = get_string(own, p, key_table.c_str(), "");
          auto name = get_string(own, p, "name", "");
          if (!peer.ok()) return wrap(peer.status());
          if (!peer_table.ok()) return wrap(peer_table.status());
          if (peer->empty()) return wrap(bad(at(p, key_table), "needs " + std::string(key) + " = \"HOST:PORT\""));
          if (name.ok()) links->push_back({*name, *peer, peer_table->empty() ? *name : *peer_table});
          own.erase(key);
          own.erase(key_table);
        }
        auto o = parse_table(*t, p);
        if (!o.ok()) return wrap(o.status());
        auto checked = Table::check(std::move(*o));
        if (!checked.ok()) return wrap(bad(p, checked.status().message()));
        c.tables.push_back(std::move(*checked));
      }
    }
    c.remote.upstreams = std::move(remote_upstreams);
    c.remote.mirrors = std::move(remote_mirrors);
    c.remote.views = std::move(remote_views);
    if (Status s = validate_config(c); !s.ok()) return wrap(s);
    return c;
  });
}

Result<TableOptions> parse_table_snippet(std::string_view text, const std::string& source) {
  return guarded(text, source, [&](toml::table& root) -> Result<TableOptions> {
    auto o = parse_table(root, "");
    if (!o.ok()) return Status{o.status().code(), source + ": " + o.status().message()};
    return o;
  });
}

Status validate_remote(const RemoteConfig& r, const std::vector<CheckedTableOptions>& tables) {
  bool some = !r.tls_cert.empty() || !r.tls_key.empty() || !r.tls_ca.empty();
  if (some && (r.tls_cert.empty() || r.tls_key.empty() || r.tls_ca.empty()))
    return bad("remote", "tls_cert, tls_key and tls_ca go together (this server's certificate and key, and the CA "
                         "that signed its peers'): set all three, or none");
  if (some && r.insecure)
    return bad("remote.insecure", "is true, but tls_cert, tls_key and tls_ca are set: choose TLS (leave insecure out) "
                                  "or plaintext (leave the tls_ keys out)");
  auto check_link = [&](const RemoteConfig::Upstream& u, const char* key) -> Status {
    std::string where = "table " + u.table + ": " + key;
    auto peer = parse_peer_address(u.peer, false);
    if (!peer.ok()) return bad(where, peer.status().message());
    if (!peer->loopback && !some && !r.insecure)
      return bad(where, u.peer + " is on another machine, so the link needs TLS: set [remote] tls_cert, tls_key and "
                                 "tls_ca, or insecure = true to send plaintext");
    if (u.peer_table.empty() || u.peer_table.size() >= kMaxTableName) return bad(where + "_table", "must name a table");
    return Status::Ok();
  };
  for (const RemoteConfig::Upstream& u : r.upstreams) {
    if (Status s = check_link(u, "upstream"); !s.ok()) return s;
    for (const CheckedTableOptions& t : tables)
      if (t->name == u.table && (t->sampler.kind != SelectorKind::fifo || t->max_times_sampled != 1))
        return bad("table " + u.table + ": upstream",
                   "items leave an upstream table as they are sent, oldest first: give it sampler = \"fifo\" "
                   "and max_times_sampled = 1 (a rate_limiter of kind queue bounds what it holds)");
  }
  for (const RemoteConfig::Upstream& u : r.mirrors) {
    if (Status s = check_link(u, "mirror"); !s.ok()) return s;
    for (const CheckedTableOptions& t : tables)
      if (t->name == u.table && (t->remover.kind != SelectorKind::fifo || t->capacity > kMaxMirrorItems))
        return bad("table " + u.table + ": mirror",
                   "a mirror keeps its peer's newest items, the oldest going first: give it remover = \"fifo\" "
                   "and max_size = 1.." + std::to_string(kMaxMirrorItems) + " (the versions to keep)");
  }
  for (const RemoteConfig::View& v : r.views) {
    for (const std::string& peer : v.shards)
      if (Status s = check_link({v.table, peer, v.peer_table}, "shards"); !s.ok()) return s;
    // Every shard's draws in flight and waiting fit, or the view's FIFO
    // evicts draws before they are handed out.
    const uint64_t in_flight = uint64_t{v.shards.size()} * v.batch * v.prefetch;
    for (const CheckedTableOptions& t : tables)
      if (t->name == v.table && t->capacity < 2 * in_flight)
        return bad("table " + v.table + ": max_size",
                   std::to_string(t->capacity) + " cannot hold the draws of " + std::to_string(v.shards.size()) +
                       " shards, shard_prefetch " + std::to_string(v.prefetch) + " requests of shard_batch " +
                       std::to_string(v.batch) + " each, twice over (" + std::to_string(2 * in_flight) +
                       "); raise max_size or lower those");
  }
  if (r.listen.empty()) return Status::Ok();
  auto a = parse_peer_address(r.listen, true);
  if (!a.ok()) return bad("remote.listen", a.status().message());
  if (!a->loopback && !some && !r.insecure)
    return bad("remote.listen", r.listen + " is reachable from other machines, so peers must use TLS: set tls_cert, "
                                "tls_key and tls_ca (engramd.toml(5)), or insecure = true to serve them plaintext");
  return Status::Ok();
}

Result<std::string> arena_fit(const ArenaPlan& plan, const TableOptions& o) {
  const ArenaConfig& a = plan.start;
  const size_t one_step = chunk_bytes(o.signature.data(), static_cast<uint32_t>(o.signature.size()), 1);
  for (size_t i = 0; i < a.classes.size(); ++i) {
    const SizeClassConfig& k = a.classes[i];
    if (k.block_size < one_step) continue;
    // The most the class can have: its blocks, and all the room to grow.
    const uint64_t most = plan.layout.classes[i].count;
    if (most >= o.capacity) return std::string();
    return "table '" + o.name + "': max_size " + std::to_string(o.capacity) + " items of one-step chunks (" +
           std::to_string(one_step) + " bytes) would take as many blocks of " + std::to_string(k.block_size) +
           " bytes, and the arena has " + std::to_string(k.count) +
           (most > k.count ? " and may grow to " + std::to_string(most) : std::string()) +
           " (shared with every table): writers wait for blocks long before the table is full. Write several steps "
           "a chunk (engram_writer_options.chunk_length), or give [arena] classes more blocks of that size, or a "
           "larger grow_to";
  }
  uint64_t largest = a.classes.empty() ? 0 : a.classes.back().block_size;
  return Status{Errc::invalid_argument,
                "table '" + o.name + "': one step of it takes " + std::to_string(one_step) +
                    " bytes with its chunk's header, more than the arena's largest block (" + std::to_string(largest) +
                    " bytes): no writer could write it; give [arena] classes a block of at least that size"};
}

Status validate_config(const ServerConfig& c) {
  if (c.socket_path.empty()) return bad("socket", "must not be empty");
  if (c.socket_path.size() > kMaxSocketPath)
    return bad("socket", "path is longer than " + std::to_string(kMaxSocketPath) + " bytes (a Unix socket limit)");
  if (!c.group.empty() && ::getgrnam(c.group.c_str()) == nullptr)
    return bad("group", "\"" + c.group + "\" does not exist; create it (groupadd " + c.group + ") or leave `group` out");
  for (char ch : c.shm_prefix)
    if (ch == '/' || ch == '\0') return bad("shm_prefix", "must not contain '/'");
  if (c.tables.size() > kMaxTables) return bad("table", "more than " + std::to_string(kMaxTables) + " tables");
  if (c.max_connections_per_uid > c.max_connections)
    return bad("server.max_connections_per_uid", std::to_string(c.max_connections_per_uid) + " is more than max_connections (" +
                                                     std::to_string(c.max_connections) + "); lower it or raise that");
  if (!(c.max_reserved_share > 0 && c.max_reserved_share <= 1))
    return bad("client.max_reserved_share", number_text(c.max_reserved_share) +
                                                " is not a share of a size class; allowed: above 0, up to 1 (no limit)");
  if (Status s = validate_remote(c.remote, c.tables); !s.ok()) return s;
  // Each stream a peer opens, and each upstream link, is a connection of
  // this server's own uid: peers must not take the last of them.
  size_t links = c.remote.upstreams.size() + c.remote.mirrors.size();
  for (const RemoteConfig::View& v : c.remote.views) links += v.shards.size();
  if (!c.remote.listen.empty() && c.remote.max_streams + links >= c.max_connections_per_uid)
    return bad("remote.max_streams", std::to_string(c.remote.max_streams) + " streams and " + std::to_string(links) +
                                         " links to peers are connections of this server's own uid, which [server] "
                                         "max_connections_per_uid = " +
                                         std::to_string(c.max_connections_per_uid) +
                                         " must exceed; lower max_streams or raise that");
  const ArenaPlan plan = plan_arena(c);
  // Each class is laid out to take all of grow_to, so it is bounded by the
  // machine (the layout is address space in every client, not memory).
  if (c.arena_grow_to > 4 * quarter_of_memory())
    return bad("arena.grow_to", std::to_string(c.arena_grow_to) + " bytes is more than this machine's memory (" +
                                    std::to_string(4 * quarter_of_memory()) + " bytes)");
  if (c.arena_grow_to && c.arena_grow_to < plan.start_bytes)
    return bad("arena.grow_to", std::to_string(c.arena_grow_to) + " bytes is less than the " +
                                    std::to_string(plan.start_bytes) +
                                    " the arena starts with; give at least that, or leave grow_to out");
  for (size_t i = 0; i < c.tables.size(); ++i)
    if (auto fit = arena_fit(plan, *c.tables[i]); !fit.ok())
      return bad("table[" + std::to_string(i) + "]", fit.status().message());
  std::set<std::string> names;
  for (size_t i = 0; i < c.tables.size(); ++i)
    if (!names.insert(c.tables[i]->name).second)
      return bad("table[" + std::to_string(i) + "].name", "\"" + c.tables[i]->name + "\" is defined twice");
  return Status::Ok();
}

Result<ServerConfig> load_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status{Errc::invalid_argument, "cannot read config file " + path + ": " + std::strerror(errno)};
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path);
}

Result<ServerConfig> configure(const ConfigSources& from) {
  Result<ServerConfig> c = !from.path.empty() ? load_config(from.path)
                           : from.text      ? parse_config(*from.text, "config_toml")
                                            : Result<ServerConfig>(ServerConfig{});
  if (!c.ok()) return c;
  if (!from.socket.empty()) c->socket_path = from.socket;
  else if (const char* env = std::getenv("ENGRAM_SOCKET"); !c->socket_given && env && *env) c->socket_path = env;
  if (Status s = validate_config(*c); !s.ok()) return s;
  return c;
}

}  // namespace engram
