/* What the test writers write: step s of writer w is fully determined by
 * (w, s), so a sampler can check every byte it gets. */
#ifndef ENGRAM_PROC_DATA_H
#define ENGRAM_PROC_DATA_H

#include <stdint.h>

#include "engram/engram.h"

#define PROC_OBS 300   /* uint8 observation bytes per step */
#define PROC_ITEM_STEPS 3
#define PROC_EPISODE 50

static void proc_columns(engram_column* cols) {
  cols[0].name = "obs";
  cols[0].dtype = ENGRAM_UINT8;
  cols[0].rank = 2;
  cols[0].shape[0] = 10;
  cols[0].shape[1] = 30;
  cols[1].name = "meta";
  cols[1].dtype = ENGRAM_INT64;
  cols[1].rank = 1;
  cols[1].shape[0] = 2;
}

static void proc_fill(uint32_t writer, uint32_t step, uint8_t* obs, int64_t* meta) {
  uint64_t x = ((uint64_t)writer << 32 | step) * 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < PROC_OBS; ++i) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ULL;
    obs[i] = (uint8_t)(x >> 56);
  }
  meta[0] = writer;
  meta[1] = step;
}

/* An item ends at step s when s is odd within its episode and >= 3; it
 * covers steps s-2..s. */
static int proc_item_ends_at(uint32_t step) {
  uint32_t in_episode = step % PROC_EPISODE;
  return in_episode % 2 == 1 && in_episode >= PROC_ITEM_STEPS;
}

#endif
