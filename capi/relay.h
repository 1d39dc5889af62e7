/* Not part of engram's API: what engramd's peers (remote/) need of
 * libengram to act as a client of their own server, exported under the
 * ENGRAM_PRIVATE version node for engramd and libengram-server of the same
 * release. Not installed; no program outside this tree may call it.
 *
 * A relay is a writer whose chunks were sealed elsewhere (by a writer on
 * another machine): each chunk arrives whole, header and columns as
 * core/chunk_format.hpp lays them out, is copied into a block of this
 * client, and items over it are inserted with their delivery (producer,
 * sequence), which the table applies at most once. What the chunk holds is
 * checked where a local writer's chunk is: by the table's owner at insert,
 * and by samplers as they read. Same thread rules as a writer. */
#ifndef ENGRAM_CAPI_RELAY_H
#define ENGRAM_CAPI_RELAY_H

#include "engram/engram.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The signature hash of t's columns (core/signature.hpp), which every
 * chunk header of the table carries. */
ENGRAM_API uint64_t engram_private_table_signature(const engram_table* t);
/* A relay into table t, with t's columns. Close it with engram_writer_close. */
ENGRAM_API int engram_private_relay_open(engram_client* c, engram_table* t, engram_writer** out);
/* Copies a sealed chunk of n bytes into a block (waiting up to timeout_ms,
 * -1 for ever, while the arena has none free for this client); *id names it
 * for items until engram_private_relay_forget. ENGRAM_E_CORRUPT if the
 * bytes are no chunk of the table's columns, ENGRAM_E_RANGE if no block
 * holds n bytes. */
ENGRAM_API int engram_private_relay_chunk(engram_writer* w, const void* bytes, size_t n, int32_t timeout_ms,
                                          uint64_t* id);
/* Inserts an item over steps [offsets[i], offsets[i] + lengths[i]) of chunk
 * ids[i], i < n (oldest first, n at most the table's chunks per item), from
 * producer's item `sequence` (producer 0: no delivery). Answered in order:
 * see engram_private_relay_answered. */
ENGRAM_API int engram_private_relay_item(engram_writer* w, const uint64_t* ids, const uint32_t* offsets,
                                         const uint32_t* lengths, uint32_t n, double priority, uint64_t producer,
                                         uint64_t sequence);
/* A shard's draw into a view's table (the relay's; see the shard request,
 * core/ring_record.hpp): an item as engram_private_relay_item's, drawn in
 * the shard as item remote_key with probability `probability`, at the
 * mass that the last engram_private_shard_poll reported. Answered in order
 * as items are; refused unless the table is a view whose shard this relay
 * reported present. */
ENGRAM_API int engram_private_relay_draw(engram_writer* w, const uint64_t* ids, const uint32_t* offsets,
                                         const uint32_t* lengths, uint32_t n, double priority, uint64_t remote_key,
                                         double probability);
/* Reports shard `shard` of the relay's view, present (mass and size as it
 * answered last) or away (present 0: its waiting draws go), after sending
 * the draws inserted before; then waits up to timeout_ms (0: not at all,
 * -1: for ever) until the shard is owed something: fewer than wait_below
 * of its draws waiting, draws that held batches lack, or priority updates.
 * *waiting and *short_of say how many draws wait and how many more the
 * held batches need; up to max updates owed (keys in the shard's table,
 * oldest first; max at most 10) go to keys and priorities, *n of them,
 * each handed over once. */
ENGRAM_API int engram_private_shard_poll(engram_writer* w, uint32_t shard, int present, double mass, uint64_t size,
                                         uint32_t wait_below, int32_t timeout_ms, uint32_t* waiting,
                                         uint32_t* short_of, uint64_t* keys, double* priorities, uint32_t max,
                                         uint32_t* n);
/* No item inserted from now on names chunk id: its block goes back once
 * the items over it are answered. */
ENGRAM_API int engram_private_relay_forget(engram_writer* w, uint64_t id);
/* Takes the answers that came, waiting up to timeout_ms (0: not at all,
 * -1: for ever) for one more while any is owed, and says how many items
 * are answered, in the order they were inserted: applied, refused as
 * delivered before (*duplicates counts those), or refused for another
 * reason (*refused). Every answer is final. */
ENGRAM_API int engram_private_relay_answered(engram_writer* w, int32_t timeout_ms, uint64_t* answered,
                                             uint64_t* duplicates, uint64_t* refused);
/* Why the first refused item (not a duplicate) was refused; "" if none. */
ENGRAM_API const char* engram_private_relay_refusal(const engram_writer* w);

#ifdef __cplusplus
}
#endif

#endif
