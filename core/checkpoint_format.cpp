#include "core/checkpoint_format.hpp"

#include <xxhash.h>

#include <bit>
#include <cstring>
#include <type_traits>

#include "core/codec.hpp"
#include "core/priority.hpp"

namespace engram {

uint64_t checksum(const void* data, size_t n) noexcept { return XXH3_64bits(data, n); }

namespace {

constexpr char kMagic[8] = {'E', 'N', 'G', 'R', 'A', 'M', 'C', 'K'};
constexpr size_t kMaxString = 4096;
// The fewest bytes each listed element takes in a manifest, so that a count
// read from it is checked against the bytes left before anything is sized
// by it (strings count their 4-byte length only).
constexpr size_t kFileBytes = 4 + 8 + 8;            // name, size, checksum
constexpr size_t kChunkBytes = 8 + 8 + 8 + 4 + 8;   // offset, stored, raw, encoding, checksum
constexpr size_t kColumnBytes = 4 + 4 + 4 + 4 + 4;  // name, dtype, rank, codec, level
constexpr size_t kTableBytes = 64;                  // well under its options and counters
constexpr size_t kItemBytes = 8 + 8 + 8 + 4 + 8 + 8 + 4;  // without its references
constexpr size_t kRefBytes = 4 + 4 + 4;
static_assert(std::endian::native == std::endian::little, "the checkpoint format is little-endian");

class Out {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_arithmetic_v<T>);
    s_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& v) {
    put(static_cast<uint32_t>(v.size()));
    s_.append(v);
  }
  std::string& bytes() { return s_; }

 private:
  std::string s_;
};

// Reads with bounds checks; the first failure sticks and names the field.
class In {
 public:
  In(const char* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  T get(const char* what) {
    static_assert(std::is_arithmetic_v<T>);
    T v{};
    if (!need(sizeof v, what)) return v;
    std::memcpy(&v, p_ + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str(const char* what) {
    uint32_t len = get<uint32_t>(what);
    if (len > kMaxString) fail(std::string(what) + " is " + std::to_string(len) + " bytes long");
    if (!need(len, what)) return {};
    std::string v(p_ + at_, len);
    at_ += len;
    return v;
  }
  // A count of elements of at least `min_bytes` each that must fit in what is left.
  uint32_t count(const char* what, size_t min_bytes) {
    uint32_t c = get<uint32_t>(what);
    if (ok() && uint64_t{c} * min_bytes > n_ - at_) fail(std::string(what) + " (" + std::to_string(c) + ") exceeds the manifest");
    return ok() ? c : 0;
  }
  void fail(const std::string& why) {
    if (error_.empty()) error_ = why;
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t left() const { return n_ - at_; }

 private:
  bool need(size_t k, const char* what) {
    if (!ok()) return false;
    if (k > n_ - at_) {
      fail(std::string("the manifest ends inside ") + what);
      return false;
    }
    return true;
  }
  const char* p_;
  size_t n_, at_ = 0;
  std::string error_;
};

void put_options(Out& o, const TableOptions& t) {
  o.str(t.name);
  o.put(static_cast<uint32_t>(t.capacity));  // a saved table's, so <= kMaxTableCapacity
  o.put(static_cast<uint32_t>(t.sampler.kind));
  o.put(t.sampler.exponent);
  o.put(static_cast<uint32_t>(t.remover.kind));
  o.put(t.remover.exponent);
  o.put(t.max_times_sampled);
  o.put(t.max_refs_per_item);
  o.put(t.rate_limiter.samples_per_insert);
  o.put(t.rate_limiter.min_size_to_sample);
  o.put(t.rate_limiter.min_diff);
  o.put(t.rate_limiter.max_diff);
  o.put(static_cast<uint32_t>(t.signature.size()));
  for (const Column& c : t.signature) {
    o.str(std::string(c.name, strnlen(c.name, kMaxColumnName)));
    o.put(c.dtype);
    o.put(c.rank);
    for (uint32_t d = 0; d < c.rank && d < kMaxRank; ++d) o.put(c.shape[d]);
    o.put(c.codec);
    o.put(c.level);
  }
}

TableOptions get_options(In& in) {
  TableOptions t;
  t.name = in.str("table name");
  t.capacity = in.get<uint32_t>("capacity");  // bounded when restored (Table::check)
  t.sampler.kind = static_cast<SelectorKind>(in.get<uint32_t>("sampler"));
  t.sampler.exponent = in.get<double>("sampler exponent");
  t.remover.kind = static_cast<SelectorKind>(in.get<uint32_t>("remover"));
  t.remover.exponent = in.get<double>("remover exponent");
  // Before 2026-11-27 a selector other than prioritized took any exponent,
  // NaN included, and never read it; such a checkpoint still restores.
  for (SelectorOptions* o : {&t.sampler, &t.remover})
    if (o->kind != SelectorKind::prioritized && !validate_exponent(o->exponent).ok()) o->exponent = 1.0;
  t.max_times_sampled = in.get<uint32_t>("max_times_sampled");
  t.max_refs_per_item = in.get<uint32_t>("max chunks per item");
  t.rate_limiter.samples_per_insert = in.get<double>("samples_per_insert");
  t.rate_limiter.min_size_to_sample = in.get<int64_t>("min_size_to_sample");
  t.rate_limiter.min_diff = in.get<double>("min_diff");
  t.rate_limiter.max_diff = in.get<double>("max_diff");
  uint32_t ncols = in.count("column count", kColumnBytes);
  if (ncols > kMaxColumns) in.fail("a table has " + std::to_string(ncols) + " columns");
  for (uint32_t i = 0; i < ncols && in.ok(); ++i) {
    Column c{};
    std::string name = in.str("column name");
    if (name.size() >= kMaxColumnName) in.fail("a column name is too long");
    std::memcpy(c.name, name.data(), std::min(name.size(), kMaxColumnName - 1));
    c.dtype = in.get<uint32_t>("dtype");
    c.rank = in.get<uint32_t>("rank");
    if (c.rank > kMaxRank) in.fail("a column has rank " + std::to_string(c.rank));
    for (uint32_t d = 0; d < c.rank && in.ok(); ++d) c.shape[d] = in.get<uint32_t>("shape");
    c.codec = in.get<uint32_t>("codec");
    c.level = in.get<int32_t>("level");
    t.signature.push_back(c);
  }
  return t;
}

}  // namespace

std::string encode_manifest(const Manifest& m) {
  Out o;
  o.bytes().append(kMagic, sizeof kMagic);
  o.put(m.format_version);
  o.str(m.engram_version);
  o.put(m.created_unix_ns);
  o.put(m.sequence);
  o.put(static_cast<uint32_t>(m.files.size()));
  for (const SavedFile& f : m.files) {
    o.str(f.name);
    o.put(f.size);
    o.put(f.checksum);
  }
  o.put(static_cast<uint32_t>(m.chunks.size()));
  for (const SavedChunk& c : m.chunks) {
    o.put(c.offset);
    o.put(c.stored_bytes);
    o.put(c.raw_bytes);
    o.put(c.encoding);
    o.put(c.checksum);
  }
  o.put(static_cast<uint32_t>(m.tables.size()));
  for (const TableState& t : m.tables) {
    put_options(o, t.options);
    o.put(t.counters.inserts);
    o.put(t.counters.samples);
    o.put(t.counters.deletes);
    for (uint64_t v : {t.stats.inserts, t.stats.samples, t.stats.updates, t.stats.deletes, t.stats.evictions,
                       t.stats.expirations, t.stats.stale, t.stats.rate_limited, t.stats.bytes_raw, t.stats.bytes_stored})
      o.put(v);
    o.put(t.next_seq);
    o.put(t.sampler_seq);
    o.put(t.remover_seq);
    o.put(static_cast<uint32_t>(t.generations.size()));
    for (uint32_t g : t.generations) o.put(g);
    o.put(static_cast<uint32_t>(t.free_stack.size()));
    for (uint32_t f : t.free_stack) o.put(f);
    o.put(static_cast<uint32_t>(t.items.size()));
    for (const ItemState& it : t.items) {
      o.put(it.key);
      o.put(it.priority);
      o.put(it.inserted_seq);
      o.put(it.times_sampled);
      o.put(it.sampler_seq);
      o.put(it.remover_seq);
      o.put(it.num_refs);
      for (uint32_t k = 0; k < it.num_refs; ++k) {
        const ChunkRef& r = t.refs[it.first_ref + k];
        o.put(r.block);
        o.put(r.offset);
        o.put(r.length);
      }
    }
    if (m.format_version >= 2) {  // a format 1 manifest (tests write one) has no marks
      o.put(static_cast<uint32_t>(t.marks.size()));
      for (const DeliveryMark& mk : t.marks) {
        o.put(mk.producer);
        o.put(mk.sequence);
      }
    }
  }
  o.put(checksum(o.bytes().data(), o.bytes().size()));
  return std::move(o.bytes());
}

Result<Manifest> decode_manifest(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  auto corrupt = [](const std::string& why) { return Status{Errc::corrupt, "MANIFEST: " + why}; };
  if (n < sizeof kMagic + 4 + 8) return corrupt("is " + std::to_string(n) + " bytes, too short to be a manifest");
  if (std::memcmp(p, kMagic, sizeof kMagic) != 0) return corrupt("does not start with the magic ENGRAMCK");
  uint64_t want;
  std::memcpy(&want, p + n - 8, 8);
  if (checksum(p, n - 8) != want) return corrupt("checksum (XXH3-64) does not match its contents");
  Manifest m;
  std::memcpy(&m.format_version, p + sizeof kMagic, 4);
  if (m.format_version > kCheckpointFormat)
    return Status{Errc::layout_mismatch, "MANIFEST: checkpoint format version " + std::to_string(m.format_version) +
                                             " is newer than this engram reads (" + std::to_string(kCheckpointFormat) +
                                             "); restore it with a newer engramd"};
  if (m.format_version == 0) return corrupt("has format version 0");
  In in(p + sizeof kMagic + 4, n - sizeof kMagic - 4 - 8);
  m.engram_version = in.str("engram version");
  m.created_unix_ns = in.get<uint64_t>("creation time");
  m.sequence = in.get<uint64_t>("sequence");
  uint32_t nfiles = in.count("file count", kFileBytes);
  for (uint32_t i = 0; i < nfiles && in.ok(); ++i) {
    SavedFile f;
    f.name = in.str("file name");
    f.size = in.get<uint64_t>("file size");
    f.checksum = in.get<uint64_t>("file checksum");
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name[0] == '.')
      in.fail("file name \"" + f.name + "\" is not a plain file name");
    m.files.push_back(std::move(f));
  }
  uint32_t nchunks = in.count("chunk count", kChunkBytes);
  m.chunks.reserve(nchunks);
  for (uint32_t i = 0; i < nchunks && in.ok(); ++i) {
    SavedChunk c;
    c.offset = in.get<uint64_t>("chunk offset");
    c.stored_bytes = in.get<uint64_t>("chunk size");
    c.raw_bytes = in.get<uint64_t>("chunk raw size");
    c.encoding = in.get<uint32_t>("chunk encoding");
    c.checksum = in.get<uint64_t>("chunk checksum");
    if (c.encoding != static_cast<uint32_t>(Encoding::raw) && c.encoding != static_cast<uint32_t>(Encoding::zstd))
      in.fail("chunk " + std::to_string(i) + " has encoding " + std::to_string(c.encoding));
    if (c.encoding == static_cast<uint32_t>(Encoding::raw) && c.stored_bytes != c.raw_bytes) in.fail("raw chunk " + std::to_string(i) + " has two sizes");
    if (c.offset + c.stored_bytes < c.offset) in.fail("chunk " + std::to_string(i) + " overflows");
    m.chunks.push_back(c);
  }
  uint32_t ntables = in.count("table count", kTableBytes);
  for (uint32_t ti = 0; ti < ntables && in.ok(); ++ti) {
    TableState t;
    t.options = get_options(in);
    t.counters.inserts = in.get<int64_t>("inserts");
    t.counters.samples = in.get<int64_t>("samples");
    t.counters.deletes = in.get<int64_t>("deletes");
    for (uint64_t* v : {&t.stats.inserts, &t.stats.samples, &t.stats.updates, &t.stats.deletes, &t.stats.evictions,
                        &t.stats.expirations, &t.stats.stale, &t.stats.rate_limited, &t.stats.bytes_raw,
                        &t.stats.bytes_stored})
      *v = in.get<uint64_t>("statistics");
    t.next_seq = in.get<uint64_t>("next_seq");
    t.sampler_seq = in.get<uint64_t>("sampler counter");
    t.remover_seq = in.get<uint64_t>("remover counter");
    uint32_t ngen = in.count("slot count", 4);
    t.generations.resize(ngen);
    for (uint32_t& g : t.generations) g = in.get<uint32_t>("generation");
    uint32_t nfree = in.count("free slot count", 4);
    t.free_stack.resize(nfree);
    for (uint32_t& f : t.free_stack) f = in.get<uint32_t>("free slot");
    uint32_t nitems = in.count("item count", kItemBytes);
    t.items.reserve(nitems);
    for (uint32_t i = 0; i < nitems && in.ok(); ++i) {
      ItemState it{};
      it.key = in.get<uint64_t>("item key");
      it.priority = in.get<double>("item priority");
      it.inserted_seq = in.get<uint64_t>("item inserted_seq");
      it.times_sampled = in.get<uint32_t>("item times_sampled");
      it.sampler_seq = in.get<uint64_t>("item sampler age");
      it.remover_seq = in.get<uint64_t>("item remover age");
      it.num_refs = in.get<uint32_t>("item reference count");
      it.first_ref = static_cast<uint32_t>(t.refs.size());
      if (it.num_refs == 0 || uint64_t{it.num_refs} * kRefBytes > in.left())
        in.fail("item " + std::to_string(i) + " of table " + t.options.name + " has " + std::to_string(it.num_refs) +
                " chunk references");
      for (uint32_t k = 0; k < it.num_refs && in.ok(); ++k) {
        ChunkRef r{};
        r.block = in.get<uint32_t>("reference chunk");
        r.offset = in.get<uint32_t>("reference offset");
        r.length = in.get<uint32_t>("reference length");
        if (r.block >= m.chunks.size())
          in.fail("item " + std::to_string(i) + " of table " + t.options.name + " references chunk " +
                  std::to_string(r.block) + " of " + std::to_string(m.chunks.size()));
        t.refs.push_back(r);
      }
      t.items.push_back(it);
    }
    // Format 1 has no delivery marks: a table restored from it has none.
    uint32_t nmarks = m.format_version >= 2 ? in.count("delivery mark count", 16) : 0;
    t.marks.resize(nmarks);
    for (DeliveryMark& mk : t.marks) {
      mk.producer = in.get<uint64_t>("delivery mark producer");
      mk.sequence = in.get<uint64_t>("delivery mark sequence");
    }
    m.tables.push_back(std::move(t));
  }
  if (in.ok() && in.left() != 0) in.fail(std::to_string(in.left()) + " bytes follow the last table");
  if (!in.ok()) return corrupt(in.error());
  return m;
}

}  // namespace engram
