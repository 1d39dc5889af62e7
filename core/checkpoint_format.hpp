// The on-disk format of a checkpoint: one directory holding
//
//   MANIFEST     what was saved (below), ending in an XXH3-64 of itself
//   chunks.zst   every saved chunk, back to back: a zstd frame of the
//                chunk's bytes, or the bytes themselves when they do not
//                compress (each chunk's encoding and XXH3-64 are in MANIFEST)
//
// MANIFEST, all integers little-endian, strings as u32 length + bytes:
//   magic "ENGRAMCK" | u32 format version | str engram version
//   | u64 created (Unix ns) | u64 sequence (checkpoint number)
//   | u32 files, each: str name, u64 size, u64 XXH3-64 of the whole file
//   | u32 chunks, each: u64 offset, u64 stored bytes, u64 raw bytes,
//                       u32 encoding (0 raw, 1 zstd), u64 XXH3-64 of the stored bytes
//   | u32 tables, each: the table's options (name, capacity, sampler and
//       remover kind and exponent, max_times_sampled, max chunks per item,
//       rate limiter, columns with codecs), its rate-limiter counters and
//       statistics, its insertion and heap counters, the generation of every
//       slot, the free-slot stack, and its items in insertion order: key,
//       priority, inserted_seq, times_sampled, heap ages, chunk references
//       (chunk number in this manifest, step offset, length); from format 2,
//       then its delivery marks: u32 count, each u64 producer, u64 sequence
//       (Delivery, core/table.hpp)
//   | u64 XXH3-64 of everything before it
//
// The trailer stays the last 8 bytes in every version, so any version's
// manifest can be checked before its version is read. A reader refuses a
// newer format version, naming both. See engram-checkpoint(5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "core/table.hpp"

namespace engram {

// 2: delivery marks. A reader takes every version up to its own.
inline constexpr uint32_t kCheckpointFormat = 2;
inline constexpr char kManifestFile[] = "MANIFEST";
inline constexpr char kChunksFile[] = "chunks.zst";

uint64_t checksum(const void* data, size_t n) noexcept;  // XXH3-64

struct SavedFile {
  std::string name;
  uint64_t size = 0;
  uint64_t checksum = 0;
};

struct SavedChunk {
  uint64_t offset = 0;        // in kChunksFile
  uint64_t stored_bytes = 0;
  uint64_t raw_bytes = 0;     // of the chunk in its block
  uint32_t encoding = 0;      // Encoding::raw or Encoding::zstd
  uint64_t checksum = 0;      // of the stored bytes
};

// A checkpoint's manifest. In `tables`, a ChunkRef's block is an index into
// `chunks` and its generation is 0.
struct Manifest {
  uint32_t format_version = kCheckpointFormat;
  std::string engram_version;
  uint64_t created_unix_ns = 0;
  uint64_t sequence = 0;
  std::vector<SavedFile> files;
  std::vector<SavedChunk> chunks;
  std::vector<TableState> tables;
};

std::string encode_manifest(const Manifest& m);
// Parses and checks a manifest's bytes: size, magic, checksum, version,
// every count and length against the bytes left, every chunk reference
// against the chunk list. Errc::corrupt (or layout_mismatch for a newer
// version) with a message that names the check that failed.
Result<Manifest> decode_manifest(const void* data, size_t n);

}  // namespace engram
