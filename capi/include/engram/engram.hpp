/* engram.hpp: a header-only C++17 wrapper over engram.h.
 *
 * It calls only the public C functions, so it is as stable as the C ABI:
 * a program built with it runs against any later libengram.so.0.
 *
 *  - Errors: every failing call throws engram::api::Error, which carries
 *    the ENGRAM_E_* code (code()) and engram_last_error()'s message.
 *  - Handles: Client, Table, Writer and Batch own their C handle (and
 *    engram::api::Server, in engram/server.hpp, the embedded server's)
 *    and release it when destroyed. A Table or Writer keeps its Client's
 *    connection alive, and a Batch its Table, so they may be destroyed in
 *    any order. Copying a Table shares one handle.
 *  - Threads: the C rules hold. A Client and everything made from it may be
 *    used by one thread at a time; use one Client per thread.
 *
 * The namespace is engram::api: libengram's internals use engram::, and a
 * program that links both (engram's own tests) must not see two classes
 * of one name.
 */
#ifndef ENGRAM_ENGRAM_HPP
#define ENGRAM_ENGRAM_HPP

#include <engram/engram.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace engram {
namespace api {

/* A failed call: the ENGRAM_E_* code and the library's message. */
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message)
      : std::runtime_error(std::string(engram_strerror(code)) + ": " + message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/* Throws Error for a nonzero status, with this thread's last error message. */
inline void check(int rc) {
  if (rc != ENGRAM_OK) throw Error(rc, engram_last_error());
}

/* A view of n elements at data, which the caller keeps alive. */
template <typename T>
class Span {
 public:
  Span() = default;
  Span(T* data, size_t n) : data_(data), size_(n) {}
  template <typename C>
  Span(C& c) : data_(c.data()), size_(c.size()) {}  // NOLINT: from std::vector, std::array
  T* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  T& operator[](size_t i) const noexcept { return data_[i]; }
  T* begin() const noexcept { return data_; }
  T* end() const noexcept { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

/* A step's columns, owning their names (engram_column points at them). */
class Columns {
 public:
  Columns() = default;
  Columns(Columns&&) = default;
  Columns& operator=(Columns&&) = default;
  Columns(const Columns& o) { *this = o; }
  Columns& operator=(const Columns& o) {
    if (this == &o) return *this;
    cols_.clear();
    names_.clear();
    codecs_ = o.codecs_;
    for (size_t i = 0; i < o.cols_.size(); ++i) push(*o.names_[i], o.cols_[i]);
    return *this;
  }
  /* Adds a column: its name, dtype and shape ({} for a scalar). */
  Columns& add(const std::string& name, engram_dtype dtype, std::initializer_list<uint32_t> shape = {},
               engram_compression compression = {ENGRAM_CODEC_NONE, 0}) {
    if (shape.size() > ENGRAM_MAX_RANK) throw Error(ENGRAM_E_RANGE, "column " + name + " has rank above ENGRAM_MAX_RANK");
    engram_column c{};
    c.dtype = dtype;
    c.rank = static_cast<uint32_t>(shape.size());
    uint32_t i = 0;
    for (uint32_t d : shape) c.shape[i++] = d;
    push(name, c);
    codecs_.push_back(compression);
    return *this;
  }
  uint32_t size() const noexcept { return static_cast<uint32_t>(cols_.size()); }
  const engram_column* data() const noexcept { return cols_.data(); }
  const std::string& name(uint32_t i) const { return *names_.at(i); }
  /* One engram_compression per column, or NULL when none is compressed. */
  const engram_compression* compression() const noexcept {
    for (const engram_compression& c : codecs_)
      if (c.codec != ENGRAM_CODEC_NONE) return codecs_.data();
    return nullptr;
  }

 private:
  void push(const std::string& name, engram_column c) {
    // Names live in unique_ptrs so that growing names_ never moves them.
    names_.push_back(std::make_unique<std::string>(name));
    c.name = names_.back()->c_str();
    cols_.push_back(c);
  }
  std::vector<std::unique_ptr<std::string>> names_;
  std::vector<engram_column> cols_;
  std::vector<engram_compression> codecs_;
};

/* Rate limiter presets (engram_rate_limiter_*). */
struct RateLimiter {
  static engram_rate_limiter min_size(int64_t n) {
    engram_rate_limiter r;
    check(engram_rate_limiter_min_size(&r, n));
    return r;
  }
  static engram_rate_limiter sample_to_insert_ratio(double spi, int64_t min_size, double error_buffer) {
    engram_rate_limiter r;
    check(engram_rate_limiter_sample_to_insert_ratio(&r, spi, min_size, error_buffer));
    return r;
  }
  static engram_rate_limiter queue(int64_t size) {
    engram_rate_limiter r;
    check(engram_rate_limiter_queue(&r, size));
    return r;
  }
};

/* A table's configuration, for Client::create_table. */
struct TableOptions {
  std::string name;
  uint64_t max_size = 0;
  engram_selector sampler = ENGRAM_UNIFORM;
  engram_selector remover = ENGRAM_FIFO;
  double priority_exponent = 1.0;
  uint32_t max_times_sampled = 0;
  engram_rate_limiter rate_limiter = RateLimiter::min_size(1);
  Columns columns;
};

/* A writer's configuration, for Client::writer. */
struct WriterOptions {
  Columns columns;
  uint32_t chunk_length = 1;
  uint32_t max_item_steps = 0;  // 0: chunk_length
  int32_t insert_timeout_ms = -1;
  bool keep_keys = false;
};

namespace detail {
// A Table holds its client, and a Batch its table (engram_table_close
// releases the table's batches, engram_disconnect closes everything): the
// C handles are then always released children first.
using ClientPtr = std::shared_ptr<engram_client>;
using TablePtr = std::shared_ptr<engram_table>;
}  // namespace detail

/* A batch sampled zero-copy: its chunks stay pinned until it is destroyed. */
class Batch {
 public:
  Batch() = default;
  uint32_t size() const noexcept { return b_ ? engram_batch_size(b_.get()) : 0; }
  engram_sample_info info(uint32_t item) const {
    engram_sample_info i;
    check(engram_batch_info(b_.get(), item, &i));
    return i;
  }
  /* The slices of one item's column, in step order (most items: one). */
  std::vector<engram_view> views(uint32_t item, uint32_t column) const {
    std::vector<engram_view> v(8);
    uint32_t n = 0;
    check(engram_batch_views(b_.get(), item, column, v.data(), static_cast<uint32_t>(v.size()), &n));
    v.resize(n);
    return v;
  }
  engram_batch* get() const noexcept { return b_.get(); }

 private:
  friend class Table;
  Batch(engram_batch* b, detail::TablePtr t) : table_(std::move(t)), b_(b, &engram_batch_release) {}
  detail::TablePtr table_;  // declared first: destroyed after the batch
  std::unique_ptr<engram_batch, void (*)(engram_batch*)> b_{nullptr, &engram_batch_release};
};

/* An open table. */
class Table {
 public:
  Table() = default;
  engram_table* get() const noexcept { return t_.get(); }
  const std::string& name() const noexcept { return name_; }

  /* Samples up to o.batch_size items into buffers[c] (one per column, each
   * [batch, steps, ...shape]); infos may be empty. Returns the count. */
  uint32_t sample(const engram_sample_options& o, Span<void* const> buffers, Span<engram_sample_info> infos = {}) {
    if (buffers.size() == 0) throw Error(ENGRAM_E_INVALID, "sample: no column buffers");
    if (!infos.empty() && infos.size() < o.batch_size) throw Error(ENGRAM_E_RANGE, "sample: fewer infos than batch_size");
    uint32_t n = 0;
    check(engram_sample(t_.get(), &o, buffers.data(), infos.empty() ? nullptr : infos.data(), &n));
    return n;
  }
  /* Sends a sample request without waiting (engram_sample_begin); collect
   * it with sample_end. One at a time per table handle. */
  void sample_begin(const engram_sample_options& o) {
    check(engram_sample_begin(t_.get(), &o));
    begun_batch_ = o.batch_size;
  }
  /* Waits for the sample begun and copies it out, as sample() does
   * (engram_sample_end). Returns the count. */
  uint32_t sample_end(Span<void* const> buffers, Span<engram_sample_info> infos = {}) {
    if (buffers.size() == 0) throw Error(ENGRAM_E_INVALID, "sample_end: no column buffers");
    if (!infos.empty() && infos.size() < begun_batch_) throw Error(ENGRAM_E_RANGE, "sample_end: fewer infos than batch_size");
    uint32_t n = 0;
    check(engram_sample_end(t_.get(), buffers.data(), infos.empty() ? nullptr : infos.data(), &n));
    return n;
  }
  Batch sample_view(const engram_sample_options& o) {
    engram_batch* b = nullptr;
    check(engram_sample_view(t_.get(), &o, &b));
    return Batch(b, t_);
  }
  /* New priorities by key; results[i] (if given) is 0 or an ENGRAM_E_*
   * code for entry i. Throws on a refusal of the whole call. */
  void update_priorities(Span<const uint64_t> keys, Span<const double> priorities, Span<int32_t> results = {}) {
    if (keys.size() != priorities.size()) throw Error(ENGRAM_E_INVALID, "update_priorities: keys and priorities differ in length");
    if (!results.empty() && results.size() < keys.size()) throw Error(ENGRAM_E_RANGE, "update_priorities: results too short");
    check(engram_update_priorities(t_.get(), keys.data(), priorities.data(), keys.size(),
                                   results.empty() ? nullptr : results.data()));
  }
  /* New priorities by key, sent without waiting for the answer (keys of
   * items that are gone are skipped); a refusal throws from a later
   * update_priorities call. update_priorities({}, {}) waits for them all. */
  void update_priorities_async(Span<const uint64_t> keys, Span<const double> priorities) {
    if (keys.size() != priorities.size())
      throw Error(ENGRAM_E_INVALID, "update_priorities_async: keys and priorities differ in length");
    check(engram_update_priorities_async(t_.get(), keys.data(), priorities.data(), keys.size()));
  }
  void delete_items(Span<const uint64_t> keys, Span<int32_t> results = {}) {
    if (!results.empty() && results.size() < keys.size()) throw Error(ENGRAM_E_RANGE, "delete_items: results too short");
    check(engram_delete_items(t_.get(), keys.data(), keys.size(), results.empty() ? nullptr : results.data()));
  }
  /* Writes the table's items to a NumPy .npz file; returns the items
   * written. See engram_table_export. */
  uint64_t export_to(const std::string& path, const engram_transfer_options* o = nullptr) {
    uint64_t n = 0;
    check(engram_table_export(t_.get(), path.c_str(), o, &n));
    return n;
  }
  /* Inserts the items of a .npz file; returns the items inserted. See
   * engram_table_import. */
  uint64_t import_from(const std::string& path, const engram_transfer_options* o = nullptr) {
    uint64_t n = 0;
    check(engram_table_import(t_.get(), path.c_str(), o, &n));
    return n;
  }

 private:
  friend class Client;
  Table(engram_table* t, std::string name, detail::ClientPtr c)
      : t_(t, [c = std::move(c)](engram_table* p) { engram_table_close(p); }), name_(std::move(name)) {}
  detail::TablePtr t_;
  std::string name_;
  uint32_t begun_batch_ = 0;  // batch_size of the sample begun, for sample_end's check
};

/* A writer of steps. */
class Writer {
 public:
  Writer() = default;
  engram_writer* get() const noexcept { return w_.get(); }
  /* One step: columns[i] points at one value of column i. */
  void append(Span<const void* const> columns) {
    if (columns.size() != num_columns_)
      throw Error(ENGRAM_E_INVALID, "append: " + std::to_string(columns.size()) + " columns given, the writer has " +
                                        std::to_string(num_columns_));
    check(engram_writer_append(w_.get(), columns.data()));
  }
  void append(std::initializer_list<const void*> columns) {
    append(Span<const void* const>(columns.begin(), columns.size()));
  }
  /* n steps: columns[i] points at n values of column i. */
  void append_batch(Span<const void* const> columns, uint32_t n) {
    if (columns.size() != num_columns_) throw Error(ENGRAM_E_INVALID, "append_batch: wrong number of columns");
    check(engram_writer_append_batch(w_.get(), columns.data(), n));
  }
  void create_item(const Table& t, uint32_t num_steps, double priority) {
    check(engram_writer_create_item(w_.get(), t.get(), num_steps, priority));
  }
  void end_episode() { check(engram_writer_end_episode(w_.get())); }
  void flush(int32_t timeout_ms = -1) { check(engram_writer_flush(w_.get(), timeout_ms)); }
  /* The keys of the items created and acknowledged since the last call
   * (with keep_keys). */
  std::vector<uint64_t> take_keys() {
    std::vector<uint64_t> keys(256), all;
    for (;;) {
      size_t n = 0;
      check(engram_writer_take_keys(w_.get(), keys.data(), keys.size(), &n));
      all.insert(all.end(), keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(n));
      if (n < keys.size()) return all;
    }
  }

 private:
  friend class Client;
  Writer(engram_writer* w, uint32_t num_columns, detail::ClientPtr c)
      : client_(std::move(c)), w_(w, &engram_writer_close), num_columns_(num_columns) {}
  detail::ClientPtr client_;
  std::unique_ptr<engram_writer, void (*)(engram_writer*)> w_{nullptr, &engram_writer_close};
  uint32_t num_columns_ = 0;
};

/* A connection to a server. */
class Client {
 public:
  /* socket_path "": $ENGRAM_SOCKET, else /run/engram/engram.sock. */
  static Client connect(const std::string& socket_path = "", int32_t timeout_ms = 10000) {
    engram_connect_options o;
    engram_connect_options_init(&o);
    o.socket_path = socket_path.empty() ? nullptr : socket_path.c_str();
    o.timeout_ms = timeout_ms;
    engram_client* c = nullptr;
    check(engram_connect(&o, &c));
    return Client(c);
  }
  engram_client* get() const noexcept { return c_.get(); }

  void create_table(const TableOptions& t) {
    engram_table_options o;
    engram_table_options_init(&o);
    o.name = t.name.c_str();
    o.max_size = t.max_size;
    o.sampler = t.sampler;
    o.remover = t.remover;
    o.priority_exponent = t.priority_exponent;
    o.max_times_sampled = t.max_times_sampled;
    o.rate_limiter = t.rate_limiter;
    o.columns = t.columns.data();
    o.num_columns = t.columns.size();
    o.compression = t.columns.compression();
    check(engram_table_create(c_.get(), &o));
  }
  Table open_table(const std::string& name) {
    engram_table* t = nullptr;
    check(engram_table_open(c_.get(), name.c_str(), &t));
    return Table(t, name, c_);
  }
  void drop_table(const std::string& name) { check(engram_table_drop(c_.get(), name.c_str())); }
  void reset_table(const std::string& name) { check(engram_table_reset(c_.get(), name.c_str())); }
  void set_rate_limiter(const std::string& name, const engram_rate_limiter& r) {
    check(engram_table_set_rate_limiter(c_.get(), name.c_str(), &r));
  }
  engram_table_info info(const std::string& name) {
    engram_table_info i;
    engram_table_info_init(&i);
    check(engram_table_info_get(c_.get(), name.c_str(), &i));
    return i;
  }
  /* Every item of the table, in `order` (ENGRAM_BY_INSERTION or
   * ENGRAM_BY_PRIORITY); see engram_items_open. */
  std::vector<engram_item> items(const std::string& name, int32_t order = ENGRAM_BY_INSERTION) {
    engram_items* it = nullptr;
    check(engram_items_open(c_.get(), name.c_str(), order, &it));
    std::vector<engram_item> out(static_cast<size_t>(engram_items_count(it)));
    uint32_t n = 0;
    int rc = engram_items_next(it, out.data(), static_cast<uint32_t>(out.size()), &n);
    engram_items_close(it);
    check(rc);
    out.resize(n);
    return out;
  }
  /* Writes a checkpoint and returns its directory. */
  std::string checkpoint(int32_t timeout_ms = -1) {
    std::vector<char> path(4096);
    check(engram_checkpoint(c_.get(), timeout_ms, path.data(), path.size()));
    return path.data();
  }
  Writer writer(const WriterOptions& w) {
    engram_writer_options o;
    engram_writer_options_init(&o);
    o.columns = w.columns.data();
    o.num_columns = w.columns.size();
    o.chunk_length = w.chunk_length;
    if (w.max_item_steps) o.max_item_steps = w.max_item_steps;
    o.insert_timeout_ms = w.insert_timeout_ms;
    o.keep_keys = w.keep_keys ? 1 : 0;
    o.compression = w.columns.compression();
    engram_writer* out = nullptr;
    check(engram_writer_open(c_.get(), &o, &out));
    return Writer(out, w.columns.size(), c_);
  }

 private:
  explicit Client(engram_client* c) : c_(c, &engram_disconnect) {}
  detail::ClientPtr c_;
};

/* Options for a sample of `batch` items of `steps` steps each, waiting up
 * to timeout_ms (-1: for ever) for the rate limiter. */
inline engram_sample_options sample_options(uint32_t batch, uint32_t steps = 1, int32_t timeout_ms = -1) {
  engram_sample_options o;
  engram_sample_options_init(&o);
  o.batch_size = batch;
  o.num_steps = steps;
  o.timeout_ms = timeout_ms;
  return o;
}

}  // namespace api
}  // namespace engram

#endif  // ENGRAM_ENGRAM_HPP
