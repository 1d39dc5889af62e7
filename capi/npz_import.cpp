// engram_table_import: the items of a .npz file (engram-export(5)) into a
// table, through a writer of this client, so that an import meets the
// table's rate limiter and every check a writer meets. The file is mapped
// and checked whole (zip structure, CRC-32s, array headers, every item's
// range and priority) before anything is inserted: a damaged or foreign
// file inserts nothing.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "capi/client.hpp"
#include "capi/transfer.hpp"
#include "core/npz.hpp"

using namespace engram;

namespace {

// Bytes of steps a chunk of the import's writer aims for: enough that a
// chunk's header and the insert's round trip are small beside its copy.
constexpr size_t kChunkBytesGoal = size_t{64} << 10;
constexpr uint32_t kMaxChunkLength = 1024;

class MappedFile {
 public:
  ~MappedFile() {
    if (p_) ::munmap(p_, n_);
  }
  Status open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {Errc::system, "cannot open " + path + ": " + std::strerror(errno)};
    struct stat st;
    Status s;
    if (::fstat(fd, &st) != 0) s = {Errc::system, "cannot stat " + path + ": " + std::strerror(errno)};
    else if (!S_ISREG(st.st_mode)) s = {Errc::invalid_argument, path + " is not a regular file"};
    else if (st.st_size == 0) s = {Errc::invalid_argument, path + " is empty, not a .npz file"};
    if (s.ok()) {
      n_ = static_cast<size_t>(st.st_size);
      void* p = ::mmap(nullptr, n_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) s = {Errc::system, "cannot map " + path + ": " + std::strerror(errno)};
      else p_ = p;
    }
    ::close(fd);
    if (p_) (void)::madvise(p_, n_, MADV_SEQUENTIAL);
    return s;
  }
  const unsigned char* data() const noexcept { return static_cast<const unsigned char*>(p_); }
  size_t size() const noexcept { return n_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

struct Array {
  NpyArray a;
  const unsigned char* data = nullptr;
};

bool is_integer(DType t) { return t != DType{} && t != DType::f16 && t != DType::f32 && t != DType::f64 && t != DType::boolean; }

// Element i of an integer array as uint64; false if negative.
bool integer_at(const Array& x, uint64_t i, uint64_t* out) {
  size_t k = dtype_size(x.a.dtype);
  const unsigned char* p = x.data + i * k;
  int64_t v = 0;
  switch (x.a.dtype) {
    case DType::u8: *out = p[0]; return true;
    case DType::u16: { uint16_t u; std::memcpy(&u, p, 2); *out = u; return true; }
    case DType::u32: { uint32_t u; std::memcpy(&u, p, 4); *out = u; return true; }
    case DType::u64: std::memcpy(out, p, 8); return true;
    case DType::i8: v = static_cast<int8_t>(p[0]); break;
    case DType::i16: { int16_t s; std::memcpy(&s, p, 2); v = s; break; }
    case DType::i32: { int32_t s; std::memcpy(&s, p, 4); v = s; break; }
    case DType::i64: std::memcpy(&v, p, 8); break;
    default: return false;
  }
  *out = static_cast<uint64_t>(v);
  return v >= 0;
}

// The file's items, checked, and the steps of each of the table's columns.
struct Dataset {
  std::vector<uint64_t> offset;
  std::vector<uint32_t> length;
  std::vector<double> priority;
  std::vector<const unsigned char*> steps;  // per table column
  uint64_t rows = 0;
  uint32_t max_length = 0;
};

Status read_dataset(const engram_table* t, const std::string& path, const MappedFile& file, Dataset* d) {
  auto zip = ZipReader::open(file.data(), file.size(), path);
  if (!zip.ok()) return zip.status();
  for (const ZipReader::Member& m : zip->members())
    if (Status s = zip->check_crc(m); !s.ok()) return s;
  auto array = [&](const std::string& name, Array* out) -> Status {
    const ZipReader::Member* m = zip->find(name + ".npy");
    if (!m)
      return {Errc::invalid_argument, path + " has no array " + name + " (engram-export(5) lists the arrays an import needs)"};
    size_t at;
    if (Status s = parse_npy(zip->bytes(*m), m->size, &out->a, &at); !s.ok())
      return {s.code(), path + ": array " + name + ": " + s.message()};
    out->data = zip->bytes(*m) + at;
    return Status::Ok();
  };
  // The format version, when the file says one (a file numpy wrote by
  // hand may not): engram-export(5) has readers refuse versions they do
  // not know.
  if (zip->find("engram/format.npy")) {
    Array format;
    if (Status s = array("engram/format", &format); !s.ok()) return s;
    if (!format.a.shape.empty() || format.a.dtype != DType::u32)
      return {Errc::invalid_argument, path + ": array engram/format is " + format.a.descr +
                                          "; engram-export(5) makes it a uint32 scalar"};
    uint32_t version;
    std::memcpy(&version, format.data, sizeof version);
    if (version != kExportFormat)
      return {Errc::invalid_argument, path + " is of export format " + std::to_string(version) + "; this engram reads format " +
                                          std::to_string(kExportFormat) + " (engram-export(5)): import it with the engram that wrote it"};
  }
  Array offset, length, priority;
  for (auto [name, x] : {std::pair{"items/offset", &offset}, {"items/length", &length}, {"items/priority", &priority}})
    if (Status s = array(name, x); !s.ok()) return s;
  uint64_t n = offset.a.shape.empty() ? 0 : offset.a.shape[0];
  for (auto [name, x] : {std::pair{"items/offset", &offset}, {"items/length", &length}, {"items/priority", &priority}}) {
    bool floating = x == &priority;
    bool kind = floating ? (x->a.dtype == DType::f32 || x->a.dtype == DType::f64) : is_integer(x->a.dtype);
    if (x->a.shape.size() != 1 || x->a.shape[0] != n || !kind)
      return {Errc::invalid_argument, path + ": array " + std::string(name) + " is " + x->a.descr + " of shape (" +
                                          (x->a.shape.empty() ? "" : std::to_string(x->a.shape[0])) +
                                          (x->a.shape.size() > 1 ? ", ..." : "") + "); it must be one " +
                                          (floating ? "float" : "integer") + " per item, " + std::to_string(n) +
                                          " items as items/offset has"};
  }
  // The table's columns, each the file's steps/NAME with its dtype and shape.
  const TableSpec& spec = t->spec;
  for (uint32_t c = 0; c < spec.num_columns; ++c) {
    const Column& col = spec.columns[c];
    std::string name = "steps/" + fixed_string(col.name, kMaxColumnName);
    if (!zip->find(name + ".npy")) {
      std::string has;
      for (const ZipReader::Member& m : zip->members())
        if (m.name.rfind("steps/", 0) == 0 && m.name.size() > 10) has += (has.empty() ? "" : ", ") + m.name.substr(6, m.name.size() - 10);
      return {Errc::signature_mismatch, path + " has no steps of column " + name.substr(6) + ", which table " + t->name +
                                            " has (the file's columns: " + (has.empty() ? "none" : has) + ")"};
    }
    Array x;
    if (Status s = array(name, &x); !s.ok()) return s;
    bool same = x.a.dtype == static_cast<DType>(col.dtype) && x.a.shape.size() == size_t{col.rank} + 1;
    for (uint32_t k = 0; same && k < col.rank; ++k) same = x.a.shape[k + 1] == col.shape[k];
    if (!same) {
      std::string want = std::string(npy_descr(static_cast<DType>(col.dtype))) + " of shape (steps";
      for (uint32_t k = 0; k < col.rank; ++k) want += ", " + std::to_string(col.shape[k]);
      std::string got = x.a.descr + " of shape (";
      for (size_t k = 0; k < x.a.shape.size(); ++k) got += (k ? ", " : "") + std::to_string(x.a.shape[k]);
      return {Errc::signature_mismatch,
              path + ": array " + name + " is " + got + "); table " + t->name + "'s column needs " + want + ")"};
    }
    if (c == 0) d->rows = x.a.shape[0];
    if (x.a.shape[0] != d->rows)
      return {Errc::invalid_argument, path + ": array " + name + " has " + std::to_string(x.a.shape[0]) +
                                          " steps, steps/" + fixed_string(spec.columns[0].name, kMaxColumnName) + " " +
                                          std::to_string(d->rows)};
    d->steps.push_back(x.data);
  }
  for (const ZipReader::Member& m : zip->members()) {
    if (m.name.rfind("steps/", 0) != 0) continue;
    std::string col = m.name.substr(6, m.name.size() >= 10 ? m.name.size() - 10 : 0);
    bool known = false;
    for (uint32_t c = 0; c < spec.num_columns; ++c) known |= col == fixed_string(spec.columns[c].name, kMaxColumnName);
    if (!known) return {Errc::signature_mismatch, path + " has steps of column " + col + ", which table " + t->name + " lacks"};
  }
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t o, l;
    if (!integer_at(offset, i, &o) || !integer_at(length, i, &l) || l == 0 || l > UINT32_MAX || o > d->rows ||
        l > d->rows - o)
      return {Errc::corrupt, path + ": item " + std::to_string(i) + "'s steps [offset, offset + length) are not within the " +
                                 std::to_string(d->rows) + " steps of the file"};
    double p;
    if (priority.a.dtype == DType::f64) std::memcpy(&p, priority.data + i * 8, 8);
    else {
      float f;
      std::memcpy(&f, priority.data + i * 4, 4);
      p = f;
    }
    if (!std::isfinite(p) || p < 0)
      return {Errc::invalid_priority, path + ": item " + std::to_string(i) + " has priority " + number_text(p) +
                                          "; priorities are finite and >= 0"};
    d->offset.push_back(o);
    d->length.push_back(static_cast<uint32_t>(l));
    d->priority.push_back(p);
    d->max_length = std::max(d->max_length, static_cast<uint32_t>(l));
  }
  return Status::Ok();
}

// The import's writer: the table's columns and compression, chunks of
// about kChunkBytesGoal, long enough that no item spans more chunks than
// the table allows; shorter where the arena's blocks are smaller.
int open_writer(engram_table* t, const Dataset& d, int32_t timeout_ms, engram_writer** w) {
  uint32_t n = t->spec.num_columns;
  std::vector<engram_column> cols(n);
  std::vector<engram_compression> comp(n);
  uint32_t count;
  (void)engram_table_columns(t, cols.data(), n, &count);
  (void)engram_table_compression(t, comp.data(), n, &count);
  size_t step = 0;
  for (uint32_t c = 0; c < n; ++c) step += column_step_bytes(t->spec.columns[c]);
  uint32_t refs = std::max<uint32_t>(t->spec.max_refs_per_item, 2);
  uint32_t need = (d.max_length + refs - 2) / (refs - 1);  // an item of L steps spans <= ceil(L / chunk) + 1 chunks
  uint32_t len = static_cast<uint32_t>(std::clamp<size_t>(kChunkBytesGoal / std::max<size_t>(step, 1), 1, kMaxChunkLength));
  len = std::max(len, need);
  engram_writer_options o;
  engram_writer_options_init(&o);
  o.columns = cols.data();
  o.num_columns = n;
  o.max_item_steps = std::max<uint32_t>(d.max_length, 1);
  o.insert_timeout_ms = timeout_ms;
  o.keep_keys = 1;  // counts the items applied
  o.compression = comp.data();
  for (;; len /= 2) {
    o.chunk_length = std::max<uint32_t>(len, 1);
    int rc = engram_writer_open(t->client, &o, w);
    if (rc != ENGRAM_E_RANGE || len <= std::max<uint32_t>(need, 1)) return rc;
  }
}

int import_file(engram_table* t, const std::string& path, const engram_transfer_options& o, uint64_t* applied) {
  MappedFile file;
  if (Status s = file.open(path); !s.ok()) return set_error(s);
  Dataset d;
  if (Status s = read_dataset(t, path, file, &d); !s.ok()) return set_error(s);
  engram_writer* w = nullptr;
  if (int rc = open_writer(t, d, o.insert_timeout_ms, &w); rc != ENGRAM_OK) return rc;
  struct Close {
    engram_writer* w;
    ~Close() { engram_writer_close(w); }
  } close{w};
  uint32_t n = t->spec.num_columns;
  std::vector<size_t> step(n);
  for (uint32_t c = 0; c < n; ++c) step[c] = column_step_bytes(t->spec.columns[c]);
  std::vector<const void*> at(n);
  auto take_keys = [&] {
    uint64_t keys[256];
    size_t got;
    do {
      got = 0;
      (void)engram_writer_take_keys(w, keys, 256, &got);
      *applied += got;
    } while (got == 256);
  };
  TransferClock clock(t->client, o, d.offset.size());
  uint64_t run = 0, end = 0;  // the writer's episode holds steps [run, end) of the file
  for (size_t i = 0; i < d.offset.size(); ++i) {
    uint64_t first = d.offset[i], last = first + d.length[i];
    if (first < run || first > end || last < end) {  // not the episode's continuation: a new one
      if (end > run)
        if (int rc = engram_writer_end_episode(w); rc != ENGRAM_OK) return rc;
      run = end = first;
    }
    if (last > end) {
      for (uint32_t c = 0; c < n; ++c) at[c] = d.steps[c] + end * step[c];
      if (int rc = engram_writer_append_batch(w, at.data(), static_cast<uint32_t>(last - end)); rc != ENGRAM_OK) return rc;
      end = last;
    }
    if (int rc = engram_writer_create_item(w, t, d.length[i], d.priority[i]); rc != ENGRAM_OK) return rc;
    if ((i & 63) == 63) {  // a look at the clock every 64 items, as an export does
      take_keys();
      if (Status s = clock.tick(i + 1); !s.ok()) return set_error(s);
    }
  }
  int rc = engram_writer_flush(w, -1);
  take_keys();
  if (rc != ENGRAM_OK) return rc;
  if (Status s = clock.tick(d.offset.size(), true); !s.ok()) return set_error(s);
  return ENGRAM_OK;
}

}  // namespace

extern "C" {

int engram_table_import(engram_table* t, const char* path, const engram_transfer_options* o, uint64_t* items) {
  ENGRAM_GUARD_BEGIN
  uint64_t applied = 0;
  if (items) *items = 0;
  if (!t || !path) return fail(Errc::invalid_argument, "table or path is NULL");
  engram_transfer_options opts;
  if (Status s = transfer_options(o, &opts); !s.ok()) return set_error(s);
  int rc = import_file(t, path, opts, &applied);
  if (items) *items = applied;
  return rc;
  ENGRAM_GUARD_END
}

}  // extern "C"
