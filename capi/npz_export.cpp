// engram_table_export: a table's items to a .npz file (core/npz.hpp says
// why that format; engram-export(5) what is in it). The server pins the
// table's chunks and hands out the items with their references
// (export_begin, export_items); this client copies the steps out of the
// arena, column by column, decoding compressed ones, and writes the file
// itself, with the caller's permissions, at its own pace. The server never
// reads the chunks for it, and the table goes on meanwhile.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "capi/client.hpp"
#include "capi/transfer.hpp"
#include "core/durable_file.hpp"
#include "core/futex.hpp"
#include "core/npz.hpp"

using namespace engram;

namespace engram {

Status transfer_options(const engram_transfer_options* o, engram_transfer_options* out) {
  engram_transfer_options_init(out);
  if (!o) return Status::Ok();
  if (Status s = check_struct_size(o->struct_size, ENGRAM_END_OF(engram_transfer_options, insert_timeout_ms),
                                   "engram_transfer_options");
      !s.ok())
    return s;
  *out = *o;
  return Status::Ok();
}

}  // namespace engram

namespace {

constexpr size_t kBuffer = size_t{4} << 20;       // bytes per write(2)
constexpr int64_t kKeepAliveNs = 2'000'000'000;   // well inside the server's kExportIdleMs
// Items between looks at the clock (progress, interrupts, keep-alive): a
// look costs tens of ns, and 64 items of 1 MiB take some 60 ms to copy.
constexpr uint64_t kTickItems = 64;

// The file: written in one pass under path.partial, each member's CRC-32
// taken on the way, the local headers' CRCs patched at the end, then
// committed whole to path (core/durable_file.hpp).
class ExportFile {
 public:
  Status open(const std::string& path) {
    buf_.resize(kBuffer);
    return file_.create(path, ".partial");
  }
  // Starts an .npy member of `data_bytes` bytes of data after its header.
  Status begin_npy(const std::string& name, const char* descr, const std::vector<uint64_t>& shape, uint64_t data_bytes) {
    std::string member = name + ".npy";
    bool zip64 = data_bytes + 4096 >= 0xFFFFFFFFull;
    std::string npy = npy_header(descr, shape, offset_ + ZipWriter::local_header_bytes(member, zip64));
    std::string local = zip_.begin_member(member, npy.size() + data_bytes, offset_, zip64);
    if (Status s = raw(local.data(), local.size()); !s.ok()) return s;
    crc_ = 0;
    return put(npy.data(), npy.size());
  }
  // n contiguous bytes of the open member to fill, then commit(n).
  Result<char*> room(size_t n) {
    if (used_ + n > buf_.size()) {
      if (Status s = flush(); !s.ok()) return s;
      if (n > buf_.size()) buf_.resize(n);
    }
    return buf_.data() + used_;
  }
  void commit(size_t n) {
    crc_ = crc32(crc_, buf_.data() + used_, n);
    used_ += n;
    offset_ += n;
  }
  Status put(const void* p, size_t n) {
    if (n == 0) return Status::Ok();  // an empty table's arrays: p may be null
    auto r = room(n);
    if (!r.ok()) return r.status();
    std::memcpy(*r, p, n);
    commit(n);
    return Status::Ok();
  }
  void end_member() { zip_.end_member(crc_); }
  uint64_t written() const noexcept { return offset_; }

  // The central directory, the CRCs, then the file whole (DurableFile).
  Status finish() {
    std::string tail = zip_.finish(offset_);
    if (Status s = raw(tail.data(), tail.size()); !s.ok()) return s;
    if (Status s = flush(); !s.ok()) return s;
    for (auto [at, crc] : zip_.local_crc_patches()) {
      unsigned char le[4] = {uint8_t(crc), uint8_t(crc >> 8), uint8_t(crc >> 16), uint8_t(crc >> 24)};
      if (Status s = file_.write_at(le, 4, at); !s.ok()) return s;
    }
    return file_.commit();
  }
  // Removes what was written (a failed export leaves no file).
  void abandon() { file_.abandon(); }

 private:
  Status raw(const void* p, size_t n) {  // bytes outside any member's CRC
    uint32_t keep = crc_;
    Status s = put(p, n);
    crc_ = keep;
    return s;
  }
  Status flush() {
    Status s = file_.write(buf_.data(), used_);
    used_ = 0;
    return s;
  }

  DurableFile file_;
  std::vector<char> buf_;
  size_t used_ = 0;
  uint64_t offset_ = 0;
  uint32_t crc_ = 0;
  ZipWriter zip_;
};

// The export's items in insertion order, each with its references.
struct Exported {
  std::vector<ExportedItem> items;
  std::vector<ChunkRef> refs;
  std::vector<uint64_t> first_ref;  // per item, into refs
};

// The server's pages of the export, checked as untrusted input.
Status fetch_items(engram_client* c, const ExportBeginReply& begin, Exported* out) {
  while (out->items.size() < begin.items) {
    ExportItemsRequest rq{out->items.size(), UINT32_MAX, 0};
    std::vector<char> reply;
    if (Status s = c->control(ControlType::export_items, &rq, sizeof rq, &reply); !s.ok()) return s;
    ExportItemsReply h;
    if (reply.size() < sizeof h) return {Errc::corrupt, "a short export_items reply"};
    std::memcpy(&h, reply.data(), sizeof h);
    if (h.items == 0 || h.items > begin.items - out->items.size() ||
        reply.size() != sizeof h + size_t{h.items} * sizeof(ExportedItem) + size_t{h.refs} * sizeof(ChunkRef))
      return {Errc::corrupt, "an export_items reply that does not add up"};
    const char* p = reply.data() + sizeof h;
    const char* refs = p + size_t{h.items} * sizeof(ExportedItem);
    uint64_t used = 0;
    for (uint32_t i = 0; i < h.items; ++i) {
      ExportedItem it;
      std::memcpy(&it, p + i * sizeof it, sizeof it);
      if (it.num_refs == 0 || it.num_refs > kRecordRefs || it.num_refs > h.refs - used)
        return {Errc::corrupt, "an exported item with a bad reference count"};
      out->first_ref.push_back(out->refs.size());
      for (uint32_t k = 0; k < it.num_refs; ++k, ++used) {
        ChunkRef r;
        std::memcpy(&r, refs + used * sizeof r, sizeof r);
        out->refs.push_back(r);
      }
      out->items.push_back(it);
    }
    if (used != h.refs) return {Errc::corrupt, "an export_items reply with references of no item"};
  }
  return Status::Ok();
}

Status export_table(engram_table* t, const std::string& path, const engram_transfer_options& o, uint64_t* items) {
  engram_client* c = t->client;
  if (Status s = t->usable(); !s.ok()) return s;
  NameRequest name{};
  std::memcpy(name.name, t->spec.name, sizeof name.name);
  std::vector<char> reply;
  if (Status s = c->control(ControlType::export_begin, &name, sizeof name, &reply); !s.ok()) return s;
  ExportBeginReply begin;
  if (reply.size() != sizeof begin) return {Errc::corrupt, "an export_begin reply of the wrong size"};
  std::memcpy(&begin, reply.data(), sizeof begin);
  // From here the server holds pins for this connection: export_end lets
  // them go however the export ends.
  struct End {
    engram_client* c;
    bool sent = false;
    Status send() {
      sent = true;
      std::vector<char> r;
      return c->control(ControlType::export_end, nullptr, 0, &r);
    }
    ~End() {
      if (!sent) (void)send();
    }
  } end{c};

  const TableSpec& spec = t->spec;
  if (!same_signature(begin.spec.columns, begin.spec.num_columns, spec.columns, spec.num_columns))
    return {Errc::signature_mismatch, "table " + t->name + " was made again with other columns since this handle "
                                      "opened it; open it again"};
  Exported ex;
  if (Status s = fetch_items(c, begin, &ex); !s.ok()) return s;
  std::vector<uint32_t> order(ex.items.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return ex.items[a].inserted_seq < ex.items[b].inserted_seq; });
  uint64_t n = ex.items.size(), steps = 0;
  std::vector<uint64_t> offsets(n), keys(n), inserted(n);
  std::vector<double> priorities(n);
  std::vector<uint32_t> lengths(n), sampled(n);
  for (uint64_t i = 0; i < n; ++i) {
    const ExportedItem& it = ex.items[order[i]];
    uint64_t len = 0;
    for (uint32_t k = 0; k < it.num_refs; ++k) len += ex.refs[ex.first_ref[order[i]] + k].length;
    if (len == 0 || len > UINT32_MAX) return {Errc::corrupt, "an exported item of " + std::to_string(len) + " steps"};
    offsets[i] = steps;
    lengths[i] = static_cast<uint32_t>(len);
    steps += len;
    keys[i] = it.key;
    inserted[i] = it.inserted_seq;
    priorities[i] = it.priority;
    sampled[i] = it.times_sampled;
  }
  if (steps != begin.steps) return {Errc::corrupt, "the exported items' steps do not add up to the export's"};

  uint64_t total = 0;  // data bytes, for progress
  for (uint32_t col = 0; col < spec.num_columns; ++col) total += steps * column_step_bytes(spec.columns[col]);
  total += n * 40;
  TransferClock clock(c, o, total);
  int64_t alive_ns = monotonic_ns();
  ExportFile f;
  if (Status s = f.open(path); !s.ok()) return s;
  std::string table = fixed_string(spec.name, sizeof spec.name);
  uint32_t format = kExportFormat;
  Status s = f.begin_npy("engram/format", "<u4", {}, 4);
  if (s.ok()) s = f.put(&format, 4);
  f.end_member();
  if (s.ok()) s = f.begin_npy("engram/table", ("|S" + std::to_string(table.size())).c_str(), {}, table.size());
  if (s.ok()) s = f.put(table.data(), table.size());
  f.end_member();
  auto array = [&](const char* member, const char* descr, const void* p, size_t elem) {
    if (!s.ok()) return;
    s = f.begin_npy(member, descr, {n}, n * elem);
    if (s.ok()) s = f.put(p, n * elem);
    f.end_member();
  };
  array("items/key", "<u8", keys.data(), 8);
  array("items/priority", "<f8", priorities.data(), 8);
  array("items/times_sampled", "<u4", sampled.data(), 4);
  array("items/inserted", "<u8", inserted.data(), 8);
  array("items/offset", "<u8", offsets.data(), 8);
  array("items/length", "<u4", lengths.data(), 4);
  if (!s.ok()) return s;

  const ArenaBlocks& arena = c->arena;
  for (uint32_t col = 0; col < spec.num_columns; ++col) {
    const Column& column = spec.columns[col];
    size_t step = column_step_bytes(column);
    std::vector<uint64_t> shape{steps};
    for (uint32_t d = 0; d < column.rank; ++d) shape.push_back(column.shape[d]);
    std::string member = "steps/" + fixed_string(column.name, kMaxColumnName);
    if (Status e = f.begin_npy(member, npy_descr(static_cast<DType>(column.dtype)), shape, steps * step); !e.ok())
      return e;
    for (uint64_t i = 0; i < n; ++i) {
      const ExportedItem& it = ex.items[order[i]];
      for (uint32_t k = 0; k < it.num_refs; ++k) {
        const ChunkRef& ref = ex.refs[ex.first_ref[order[i]] + k];
        if (ref.block >= arena.total_blocks()) return {Errc::corrupt, "an exported chunk index out of range"};
        ChunkHeader h;
        if (Status e = check_chunk(arena.data({ref.block, ref.generation}), arena.block_size(ref.block), spec.columns,
                                   spec.num_columns, t->sig_hash, ref.offset, ref.length, &h);
            !e.ok())
          return {e.code(), "item " + std::to_string(it.key) + ": " + e.message()};
        auto dst = f.room(size_t{ref.length} * step);
        if (!dst.ok()) return dst.status();
        if (Status e = copy_steps(t, ref, h, col, *dst); !e.ok()) return e;
        f.commit(size_t{ref.length} * step);
      }
      if ((i & (kTickItems - 1)) == 0) {
        if (Status e = clock.tick(std::min(f.written(), total)); !e.ok()) return e;
        if (monotonic_ns() - alive_ns > kKeepAliveNs) {
          ExportItemsRequest keep{0, 0, 0};
          std::vector<char> r;
          if (Status e = c->control(ControlType::export_items, &keep, sizeof keep, &r); !e.ok()) return e;
          alive_ns = monotonic_ns();
        }
      }
    }
    f.end_member();
  }
  // Whether the pins held to the end decides whether the copy is good.
  if (Status e = end.send(); !e.ok()) return e;
  if (Status e = clock.tick(total, true); !e.ok()) return e;  // the last chance to stop: no file yet
  if (Status e = f.finish(); !e.ok()) return e;
  *items = n;
  return Status::Ok();
}

}  // namespace

extern "C" {

void engram_transfer_options_init(engram_transfer_options* o) {
  if (!o) return;
  *o = engram_transfer_options{};
  o->struct_size = sizeof *o;
  o->insert_timeout_ms = -1;
}

int engram_table_export(engram_table* t, const char* path, const engram_transfer_options* o, uint64_t* items) {
  ENGRAM_GUARD_BEGIN
  if (items) *items = 0;
  if (!t || !path) return fail(Errc::invalid_argument, "table or path is NULL");
  engram_transfer_options opts;
  if (Status s = transfer_options(o, &opts); !s.ok()) return set_error(s);
  uint64_t n = 0;
  Status s = export_table(t, path, opts, &n);
  if (items) *items = n;
  return set_error(s);
  ENGRAM_GUARD_END
}

}  // extern "C"
