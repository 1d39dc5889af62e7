#include "server/checkpointer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/chunk_format.hpp"
#include "core/codec.hpp"
#include "core/durable_file.hpp"

namespace engram {
namespace fs = std::filesystem;

namespace {

constexpr char kPrefix[] = "ckpt-";
constexpr uint64_t kProbeBytes = 64 << 10;
constexpr char kTmpPrefix[] = ".tmp-ckpt-";

std::string ckpt_name(uint64_t seq) {
  char b[48];
  std::snprintf(b, sizeof b, "%s%016llu", kPrefix, static_cast<unsigned long long>(seq));
  return b;
}

Status sys(const std::string& what) { return {Errc::system, what + ": " + std::strerror(errno)}; }

Status write_file(const std::string& path, IoMode mode, const std::string& bytes) {
  auto w = FileWriter::open(path, mode, false, nullptr);
  if (!w.ok()) return w.status();
  if (Status s = (*w)->write(0, bytes); !s.ok()) return s;
  return (*w)->finish();
}

}  // namespace

uint64_t chunk_used_bytes(const ChunkArena& arena, BlockRef b, const std::vector<Column>& columns, uint64_t sig_hash) {
  uint64_t size = arena.block_size(b.index);
  const void* block = arena.data(b);
  const Column* cols = columns.data();
  auto n = static_cast<uint32_t>(columns.size());
  ChunkHeader h;
  if (!check_chunk(block, size, cols, n, sig_hash, 0, 1, &h).ok()) return size;
  if (!(h.flags & kChunkPacked)) return chunk_bytes(cols, n, h.capacity_steps);
  uint64_t end = packed_data_offset(n);
  for (uint32_t c = 0; c < n; ++c) {
    ColumnSpan span;
    if (!chunk_column_span(block, size, h, cols, c, &span).ok()) return size;
    end = std::max(end, span.offset + span.bytes);
  }
  return end;
}

Status Snapshot::add(TableState st, ChunkArena& arena) {
  for (ChunkRef& r : st.refs) {
    BlockRef b{r.block, r.generation};
    auto [it, fresh] = index.emplace(pack_block(b), static_cast<uint32_t>(chunks.size()));
    if (fresh) {
      if (Status s = arena.acquire(b); !s.ok()) {
        index.erase(it);
        return {s.code(), "table " + st.options.name + ": pinning a chunk for the checkpoint: " + s.message()};
      }
      chunks.push_back(b);
      chunk_table.push_back(static_cast<uint32_t>(tables.size()));
    }
    r.block = it->second;
    r.generation = 0;
  }
  tables.push_back(std::move(st));
  return Status::Ok();
}

void Snapshot::release_all(ChunkArena& arena, uint32_t arena_id) {
  for (BlockRef b : chunks)
    if (b.generation != 0) (void)arena.release(arena_id, b);
  chunks.clear();
}

Result<CheckpointResult> write_checkpoint(Snapshot s, ChunkArena& arena, uint32_t arena_id, const CheckpointConfig& c,
                                          uint64_t sequence, const std::string& engram_version,
                                          void (*log_fallback)(const std::string&),
                                          const std::function<void(uint64_t, uint64_t)>& progress) {
  auto t0 = std::chrono::steady_clock::now();
  struct Pins {  // whatever happens, every pin goes back
    Snapshot& s;
    ChunkArena& arena;
    uint32_t id;
    ~Pins() { s.release_all(arena, id); }
  } pins{s, arena, arena_id};
  std::error_code ec;
  fs::create_directories(c.dir, ec);
  if (ec) return Status{Errc::system, "cannot create checkpoint directory " + c.dir + ": " + ec.message()};
  std::string final_dir = c.dir + "/" + ckpt_name(sequence);
  std::string tmp = c.dir + "/" + kTmpPrefix + std::to_string(sequence);
  fs::remove_all(tmp, ec);
  if (::mkdir(tmp.c_str(), 0750) != 0) return sys("cannot create " + tmp);
  struct Cleanup {  // removes the temporary directory unless renamed
    std::string dir;
    bool keep = false;
    ~Cleanup() {
      std::error_code e;
      if (!keep) fs::remove_all(dir, e);
    }
  } cleanup{tmp};

  Manifest m;
  m.engram_version = engram_version;
  m.created_unix_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  m.sequence = sequence;
  m.tables = std::move(s.tables);
  std::vector<uint64_t> sig_hashes;  // per table
  for (const TableState& t : m.tables)
    sig_hashes.push_back(signature_hash(t.options.signature.data(), t.options.signature.size()));

  std::string why;
  auto w = FileWriter::open(tmp + "/" + kChunksFile, c.io, c.direct, &why);
  if (!w.ok()) return w.status();
  if (!why.empty() && log_fallback) log_fallback(why);
  (*w)->set_max_rate(uint64_t{c.max_mb_per_s} * 1000 * 1000);
  CheckpointResult res;
  res.io = (*w)->path();
  XXH3_state_t* hash = XXH3_createState();
  std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> hash_owner(hash, XXH3_freeState);
  XXH3_64bits_reset(hash);
  Encoder enc;
  std::string out;  // one chunk as stored; reused
  uint64_t offset = 0;
  m.chunks.reserve(s.chunks.size());
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const char* src = static_cast<const char*>(arena.data(s.chunks[i]));
    uint32_t ti = s.chunk_table[i];
    uint64_t n = chunk_used_bytes(arena, s.chunks[i], m.tables[ti].options.signature, sig_hashes[ti]);
    out.resize(n);
    // Chunks of random floats (or already compressed columns) barely
    // shrink, and compressing them costs more time than writing the few
    // bytes saved: a 64 KiB probe must come down to 3/4 for the chunk to be
    // compressed. The encoder stores it raw when zstd does not shrink it.
    size_t probe = std::min<uint64_t>(n, kProbeBytes);
    bool worth = probe < n ? enc.compress(c.level, src, probe, out.data(), probe * 3 / 4) > 0 : true;
    Encoding used;
    out.resize(enc.encode_column(worth ? Codec::zstd : Codec::none, c.level, src, n, 1, out.data(), n, &used));
    // Copied out: the chunk may go now.
    (void)arena.release(arena_id, s.chunks[i]);
    s.chunks[i].generation = 0;
    SavedChunk sc;
    sc.offset = offset;
    sc.raw_bytes = n;
    sc.encoding = static_cast<uint32_t>(used);
    sc.stored_bytes = out.size();
    sc.checksum = checksum(out.data(), out.size());
    XXH3_64bits_update(hash, out.data(), out.size());
    offset += out.size();
    res.chunk_bytes += n;
    m.chunks.push_back(sc);
    if (Status st = (*w)->append(out.data(), out.size()); !st.ok()) return st;
    if (progress) progress(i + 1, s.chunks.size());
  }
  if (Status st = (*w)->finish(); !st.ok()) return st;
  m.files.push_back({kChunksFile, offset, XXH3_64bits_digest(hash)});
  std::string manifest = encode_manifest(m);
  if (Status st = write_file(tmp + "/" + kManifestFile, c.io, manifest); !st.ok()) return st;
  if (Status st = fsync_dir(tmp); !st.ok()) return st;
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) return sys("renaming " + tmp + " to " + final_dir);
  cleanup.keep = true;
  if (Status st = fsync_dir(c.dir); !st.ok()) return st;
  prune_checkpoints(c.dir, c.keep);
  res.path = final_dir;
  res.sequence = sequence;
  res.file_bytes = offset + manifest.size();
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

uint64_t checkpoint_sequence(const std::string& path) {
  std::string name = fs::path(path).filename().string();
  if (name.rfind(kPrefix, 0) != 0) return 0;
  std::string digits = name.substr(sizeof kPrefix - 1);
  if (digits.empty() || digits.size() > 19 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return 0;
  return std::stoull(digits);
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    uint64_t seq = checkpoint_sequence(e.path().string());
    if (seq > 0 && e.is_directory(ec)) found.emplace_back(seq, e.path().string());
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void prune_checkpoints(const std::string& dir, uint32_t keep) {
  std::error_code ec;
  auto all = list_checkpoints(dir);
  for (size_t i = std::max<size_t>(keep, 1); i < all.size(); ++i) fs::remove_all(all[i], ec);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(kTmpPrefix, 0) == 0) fs::remove_all(e.path(), ec);
}

Result<CheckpointReader> CheckpointReader::open(const std::string& path) {
  auto fail = [&](const std::string& why) { return Status{Errc::corrupt, "checkpoint " + path + ": " + why}; };
  std::string mpath = path + "/" + kManifestFile;
  int fd = ::open(mpath.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string(kManifestFile) + ": cannot open: " + std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return fail(std::string(kManifestFile) + ": cannot read: " + std::strerror(e));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto m = decode_manifest(bytes.data(), bytes.size());
  if (!m.ok()) return Status{m.status().code(), "checkpoint " + path + ": " + m.status().message()};
  CheckpointReader r;
  r.path_ = path;
  r.m_ = std::move(*m);
  if (r.m_.files.size() != 1 || r.m_.files[0].name != kChunksFile)
    return fail(std::string(kManifestFile) + ": lists other files than " + kChunksFile);
  // Chunks lie back to back in order, filling the file exactly.
  uint64_t at = 0;
  for (size_t i = 0; i < r.m_.chunks.size(); ++i) {
    if (r.m_.chunks[i].offset != at) return fail(std::string(kManifestFile) + ": chunk " + std::to_string(i) + " is out of place");
    at += r.m_.chunks[i].stored_bytes;
  }
  const SavedFile& f = r.m_.files[0];
  if (at != f.size) return fail(std::string(kManifestFile) + ": chunks add up to " + std::to_string(at) + " bytes, not " +
                                std::to_string(f.size));
  std::string cpath = path + "/" + f.name;
  int cfd = ::open(cpath.c_str(), O_RDONLY | O_CLOEXEC);
  if (cfd < 0) return fail(f.name + ": cannot open: " + std::strerror(errno));
  r.fd_ = std::shared_ptr<int>(new int(cfd), [](int* p) {
    ::close(*p);
    delete p;
  });
  struct stat st;
  if (::fstat(cfd, &st) != 0) return fail(f.name + ": cannot stat: " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) != f.size)
    return fail(f.name + " is " + std::to_string(st.st_size) + " bytes; " + kManifestFile + " says " +
                std::to_string(f.size) + " (truncated or overwritten)");
  XXH3_state_t* h = XXH3_createState();
  XXH3_64bits_reset(h);
  r.hash_ = std::shared_ptr<void>(h, [](void* p) { XXH3_freeState(static_cast<XXH3_state_t*>(p)); });
  return r;
}

Status CheckpointReader::read_chunk(uint32_t i, void* dst) {
  const std::string& file = m_.files[0].name;
  auto fail = [&](const std::string& why) {
    return Status{Errc::corrupt, "checkpoint " + path_ + ": " + file + ": chunk " + std::to_string(i) + ": " + why};
  };
  if (i != next_ || i >= m_.chunks.size()) return fail("read out of order");
  const SavedChunk& c = m_.chunks[i];
  buf_.resize(c.stored_bytes);
  size_t done = 0;
  while (done < buf_.size()) {
    ssize_t n = ::pread(*fd_, buf_.data() + done, buf_.size() - done, static_cast<off_t>(c.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(n == 0 ? "the file ends early" : std::string("cannot read: ") + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
  XXH3_64bits_update(static_cast<XXH3_state_t*>(hash_.get()), buf_.data(), buf_.size());
  ++next_;
  if (checksum(buf_.data(), buf_.size()) != c.checksum) return fail("checksum (XXH3-64) does not match");
  if (c.encoding == static_cast<uint32_t>(Encoding::raw)) {
    std::memcpy(dst, buf_.data(), buf_.size());
    return Status::Ok();
  }
  if (!dec_) dec_ = std::make_shared<Decoder>();
  if (Status s = dec_->decompress(buf_.data(), buf_.size(), dst, c.raw_bytes); !s.ok()) return fail(s.message());
  return Status::Ok();
}

Status CheckpointReader::finish() {
  const SavedFile& f = m_.files[0];
  if (next_ != m_.chunks.size())
    return {Errc::corrupt, "checkpoint " + path_ + ": " + f.name + ": only " + std::to_string(next_) + " of " +
                               std::to_string(m_.chunks.size()) + " chunks were read"};
  if (XXH3_64bits_digest(static_cast<XXH3_state_t*>(hash_.get())) != f.checksum)
    return {Errc::corrupt, "checkpoint " + path_ + ": " + f.name + ": file checksum (XXH3-64) does not match"};
  return Status::Ok();
}

}  // namespace engram
