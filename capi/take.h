/* Not part of engram's API (see relay.h): the sending half of engramd's
 * peers. A link of an upstream table takes items from its local table for
 * delivery: a sample that answers each item's inserted_seq (its place in
 * the table's insertion order, kept by checkpoints) and whose chunks stay
 * pinned until the batch is freed, once the peer answered the items. A
 * shard's Sample stream draws for a peer's sharded table: a plain sample,
 * pinned likewise until its reply is built. */
#ifndef ENGRAM_CAPI_TAKE_H
#define ENGRAM_CAPI_TAKE_H

#include "engram/engram.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct engram_taken engram_taken;

typedef struct engram_private_slice {
  const void* block;  /* the chunk's block in this client's mapping of the arena */
  size_t block_size;
  uint64_t chunk;     /* names the chunk while the batch pins it (block and generation) */
  uint32_t offset, length;
} engram_private_slice;

typedef struct engram_private_item {
  uint64_t sequence;  /* inserted_seq: the delivery's sequence (take, newest; 0 for a draw) */
  uint64_t key;
  double priority;
  double probability;     /* a draw's, as engram_sample_info's; 0 for take and newest */
  uint32_t times_sampled; /* a draw's, this draw included; 0 for take and newest */
  uint32_t table_size;    /* a draw's: the table's size when drawn */
  uint32_t num_slices;
  engram_private_slice slices[8];
} engram_private_item;

/* Takes up to max_items items of t (a sample: with sampler fifo and
 * max_times_sampled 1 the oldest, which leave the table): as many as the
 * rate limiter allows now, waiting up to timeout_ms (0: not at all, -1:
 * for ever) while it allows none. *out may hold fewer, or none
 * (ENGRAM_E_RATE_LIMITED, ENGRAM_E_TIMEOUT). */
ENGRAM_API int engram_private_take(engram_table* t, uint32_t max_items, int32_t timeout_ms, engram_taken** out);
/* Looks at up to max_items of t's newest items whose sequence is `from`
 * or later (0: the newest of all), oldest of them first, without
 * drawing: nothing counts as a sample. Never waits; *out may hold none.
 * A mirror's serving side follows a table so. ENGRAM_E_INVALID for a
 * table of more than 4096 items (kMaxLookCapacity). */
ENGRAM_API int engram_private_newest(engram_table* t, uint32_t max_items, uint64_t from, engram_taken** out);
/* Draws max_items items of t as engram_sample would (independently, by
 * the table's sampler; counted as samples, under its rate limiter, waiting
 * up to timeout_ms), of any length, their chunks pinned until the batch
 * is freed. A shard serves a peer's sharded table so. */
ENGRAM_API int engram_private_draw(engram_table* t, uint32_t max_items, int32_t timeout_ms, engram_taken** out);
/* The mass of the table a draw came from when it was drawn: the sum of its
 * items' weights (core/shard_split.hpp), from the first item's priority
 * and probability; its size for a uniform sampler; 0 when every weight
 * is 0. ENGRAM_E_INVALID for a batch that is not a draw, is empty, or
 * comes from a table sampled by neither a uniform nor a prioritized
 * selector (those have no mass: a batch of them is no multinomial). */
ENGRAM_API int engram_private_taken_mass(const engram_taken* b, double* mass);
ENGRAM_API uint32_t engram_private_taken_count(const engram_taken* b);
/* Item i of the batch, its slices checked against the table's chunk
 * layout (ENGRAM_E_CORRUPT for one that is not). */
ENGRAM_API int engram_private_taken_item(const engram_taken* b, uint32_t i, engram_private_item* out);
/* Unpins the batch's chunks and frees it; before its table is closed. */
ENGRAM_API void engram_private_taken_free(engram_taken* b);
/* The table's columns (engram::Column, core/signature.hpp) and their
 * number, for core's copy_sealed_chunk. */
ENGRAM_API const void* engram_private_table_columns(const engram_table* t, uint32_t* n);

#ifdef __cplusplus
}
#endif

#endif
