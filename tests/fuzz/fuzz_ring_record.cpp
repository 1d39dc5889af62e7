// libFuzzer target: arbitrary bytes as a client's ring records and chunk
// headers, applied by a real TableOwner. The owner must answer or refuse
// every record and never touch memory outside the arena, table and rings.
//
// Input: byte 0 is a mask; for each of its low 4 bits that is set, the next
// 64 bytes overwrite the chunk header of one of the client's 4 reserved
// blocks (which otherwise hold valid 2-step chunks); bit 4 makes the table
// a view over 2 shards (server/table_owner_view.cpp), whose shard requests
// and draws come from the same client. The rest is cut into
// 192-byte request records. tests/fuzz/make_seeds.py writes seeds that
// insert, sample, update, remove, release and drop.
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/channel.hpp"
#include "core/chunk_arena.hpp"
#include "core/chunk_format.hpp"
#include "server/log.hpp"
#include "server/table_owner.hpp"
#include "tests/test_util.hpp"

using namespace engram;

namespace {
constexpr uint32_t kClient = 1, kOwnerId = 2;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = (set_log_level(LogLevel::off), true);
  (void)quiet;
  ArenaConfig ac{{{4096, 8}}};
  test::LocalArena local(ac);
  ChunkArena& arena = local.arena;
  TableOptions to;
  to.name = "fuzz";
  to.capacity = 16;
  to.sampler = {SelectorKind::prioritized, 0.6};
  to.signature = {make_column("obs", DType::u8, {8}), make_column("r", DType::f32, {})};
  test::AlignedBuffer table_mem(Table::bytes_needed(test::checked(to)));
  Table table = *Table::format(table_mem.data(), table_mem.size, test::checked(to));
  test::AlignedBuffer chan_mem(Channel::bytes_needed(16));
  Channel chan = *Channel::format(chan_mem.data(), chan_mem.size, 0, 16);
  TableOwner owner(arena, kOwnerId, table, nullptr, 16);
  owner.attach(kClient, chan);

  // Four blocks reserved by the client, with valid chunks of 2 steps, so
  // that the fuzzer starts from inserts that work.
  uint64_t sig = signature_hash(to.signature.data(), to.signature.size());
  for (int i = 0; i < 4; ++i) {
    BlockRef b = *arena.alloc(kClient, 0);
    ChunkHeader h{kChunkMagic, 2, 2, 2, sig, 1, 0, {}};
    std::memcpy(arena.data(b), &h, sizeof h);
  }
  if (size == 0) return 0;
  uint8_t mask = data[0];
  ++data;
  --size;
  if (mask & 0x10) owner.make_view(2, 64, 1);
  for (uint32_t blk = 0; blk < 4; ++blk) {
    if (!(mask >> blk & 1) || size < 64) continue;
    std::memcpy(arena.data({blk, 1}), data, 64);
    data += 64;
    size -= 64;
  }

  ResponseRecord rsp;
  for (; size >= kRecordSize; data += kRecordSize, size -= kRecordSize) {
    RequestRecord r;
    std::memcpy(&r, data, sizeof r);
    if (r.deadline_ns > 0) r.deadline_ns = 0;  // never wait: the fuzzer has no clock
    if (!chan.requests.try_push(&r).ok()) break;
    owner.poll_once();
    while (chan.responses.try_pop(&rsp).ok()) {
    }
  }
  owner.detach(kClient, ChannelClosed::protocol_error);
  return 0;
}
