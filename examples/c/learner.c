/* Example of: engram_sample, engram_sample_options_init, engram_update_priorities, engram_table_info_get,
 * engram_table_info_init
 *
 * A learner: samples batches of 3-step items from table "replay" (as
 * actor.c writes them), trains on them (here: makes up a new priority for
 * each), and writes the priorities back by key. Usage: learner [SOCKET]
 * [BATCHES] */
#include <engram/engram.h>
#include <stdio.h>
#include <stdlib.h>

#define BATCH 32
#define STEPS 3

static int fail(const char* what) {
  fprintf(stderr, "learner: %s: %s\n", what, engram_last_error());
  return 1;
}

int main(int argc, char** argv) {
  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = argc > 1 ? argv[1] : NULL;
  int batches = argc > 2 ? atoi(argv[2]) : 10;
  engram_client* c;
  if (engram_connect(&co, &c) != ENGRAM_OK) return fail("connect");
  engram_table* t;
  if (engram_table_open(c, "replay", &t) != ENGRAM_OK) return fail("open table replay");

  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = BATCH;
  so.num_steps = STEPS;
  so.timeout_ms = 5000; /* the rate limiter may hold a sample until actors have written enough */
  static float obs[BATCH][STEPS][4]; /* [batch, steps, ...shape], one buffer per column */
  static int32_t action[BATCH][STEPS];
  void* buffers[2] = {obs, action};
  engram_sample_info info[BATCH];
  uint64_t keys[BATCH];
  double priorities[BATCH];
  for (int b = 0; b < batches; ++b) {
    uint32_t n;
    if (engram_sample(t, &so, buffers, info, &n) != ENGRAM_OK) return fail("sample");
    for (uint32_t i = 0; i < n; ++i) {
      /* importance weight for prioritized replay: (size * probability)^-beta */
      keys[i] = info[i].key;
      priorities[i] = 0.5 + obs[i][STEPS - 1][0]; /* a new TD error, here made up */
    }
    if (engram_update_priorities(t, keys, priorities, n, NULL) != ENGRAM_OK) return fail("update priorities");
  }
  engram_table_info ti;
  engram_table_info_init(&ti);
  if (engram_table_info_get(c, "replay", &ti) != ENGRAM_OK) return fail("info");
  printf("learner: %d batches of %d; the table holds %llu items, %llu samples so far\n", batches, BATCH,
         (unsigned long long)ti.size, (unsigned long long)ti.samples);
  engram_disconnect(c);
  return 0;
}
