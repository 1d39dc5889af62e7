// Checkpoints: writing a snapshot of every table to a directory, and reading
// one back. The format is core/checkpoint_format.hpp (and engram-checkpoint(5)).
//
// A checkpoint is written under a temporary name (.tmp-ckpt-N), every file
// fsynced, then renamed to ckpt-N (N the sequence number, zero-padded) and
// the parent directory fsynced: a directory named ckpt-N is complete. The
// newest `keep` are kept.
//
// Traffic goes on while a checkpoint is written: the snapshot holds copies of
// the indexes and one pinned reference per chunk (sealed chunks never
// change), and each pin is released as soon as its chunk is copied out.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/checkpoint_format.hpp"
#include "core/chunk_arena.hpp"
#include "core/codec.hpp"
#include "core/status.hpp"
#include "server/file_writer.hpp"

namespace engram {

struct CheckpointConfig {
  std::string dir;           // empty: checkpoints are off
  uint32_t interval_s = 0;   // 0: only on request (and shutdown)
  bool on_shutdown = false;  // on SIGTERM / stop
  uint32_t keep = 3;         // newest complete checkpoints kept
  IoMode io = IoMode::automatic;
  bool direct = true;        // chunk file with O_DIRECT (falls back where refused)
  uint32_t max_mb_per_s = 512;  // pace of the chunk file; 0 = unlimited
  int32_t level = 1;         // zstd level of chunk data
  bool restore = true;       // restore the newest at start-up
  std::string restore_path;  // a named checkpoint to restore instead (engramd --restore)
};

// Every table's index at one moment, and a pinned reference on each chunk.
// In `tables`, a ChunkRef's block is an index into `chunks`, generation 0.
struct Snapshot {
  std::vector<TableState> tables;
  std::vector<BlockRef> chunks;
  // The first table that referenced each chunk: its signature says how
  // much of the block to save (worked out by the writer, not while the
  // tables stand still).
  std::vector<uint32_t> chunk_table;
  std::unordered_map<uint64_t, uint32_t> index;  // pack_block -> chunk number
  int64_t pause_ns = 0;                           // how long the tables stood still for it

  // Adds a table's state, pinning each chunk it references the first time
  // (ChunkArena::acquire) and rewriting its refs to chunk numbers. Call it
  // while the table's owner is parked: only the pins must happen then.
  Status add(TableState st, ChunkArena& arena);
  // Drops every pin still held.
  void release_all(ChunkArena& arena, uint32_t arena_id);
};

struct CheckpointResult {
  std::string path;
  uint64_t sequence = 0;
  uint64_t chunk_bytes = 0;   // raw
  uint64_t file_bytes = 0;    // all files as written
  double seconds = 0;
  IoPath io = IoPath::pwrite;
};

// Bytes of a chunk worth saving, for columns `cols` (sig_hash their
// signature_hash): its layout (plain) or up to its last column (packed); the
// whole block when its header does not check out.
uint64_t chunk_used_bytes(const ChunkArena& arena, BlockRef b, const std::vector<Column>& cols, uint64_t sig_hash);

// Writes `s` as checkpoint number `sequence` under c.dir, releasing each pin
// once its chunk is copied; on failure everything written is removed and
// every pin released. `log_fallback` is called once if io_uring is unusable;
// `progress`, if set, after each chunk with the chunks done and in all.
Result<CheckpointResult> write_checkpoint(Snapshot s, ChunkArena& arena, uint32_t arena_id, const CheckpointConfig& c,
                                          uint64_t sequence, const std::string& engram_version,
                                          void (*log_fallback)(const std::string&),
                                          const std::function<void(uint64_t, uint64_t)>& progress = {});

// Complete checkpoints under dir, newest first (by sequence).
std::vector<std::string> list_checkpoints(const std::string& dir);
// The sequence number in a checkpoint directory's name, or 0.
uint64_t checkpoint_sequence(const std::string& path);
// Removes all but the newest `keep` complete checkpoints and any temporary
// directory left by an interrupted write.
void prune_checkpoints(const std::string& dir, uint32_t keep);

// A checkpoint being read: the manifest is checked when opened; chunks are
// read in order, each checked against its checksum, and the chunk file's own
// checksum and size are checked after the last (finish()).
class CheckpointReader {
 public:
  // Reads and checks MANIFEST and that every file it lists exists with its size.
  static Result<CheckpointReader> open(const std::string& path);
  const Manifest& manifest() const noexcept { return m_; }
  // Chunk i (in order: 0, 1, ...) decoded into dst (raw_bytes bytes).
  Status read_chunk(uint32_t i, void* dst);
  // After the last chunk: the chunk file's checksum.
  Status finish();

 private:
  std::string path_;
  Manifest m_;
  std::shared_ptr<int> fd_;  // the chunk file; closed with the last copy
  uint32_t next_ = 0;
  std::shared_ptr<void> hash_;     // XXH3 state of the chunk file so far
  std::shared_ptr<Decoder> dec_;
  std::string buf_;
};

}  // namespace engram
