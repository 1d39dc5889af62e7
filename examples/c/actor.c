/* Example of: engram_connect, engram_connect_options_init, engram_table_open, engram_writer_open,
 * engram_writer_options_init, engram_writer_append, engram_writer_create_item, engram_writer_flush,
 * engram_writer_end_episode
 *
 * An actor: plays episodes of a made-up environment and writes each step
 * (an observation and an action) into table "replay", with an item over
 * the last 3 steps (a 3-step transition) at every step from the third,
 * prioritized by its reward. Usage: actor [SOCKET] [EPISODES] */
#include <engram/engram.h>
#include <stdio.h>
#include <stdlib.h>

static int fail(const char* what) {
  fprintf(stderr, "actor: %s: %s\n", what, engram_last_error()); /* says what was wrong and how to fix it */
  return 1;
}

int main(int argc, char** argv) {
  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = argc > 1 ? argv[1] : NULL; /* NULL: $ENGRAM_SOCKET, else /run/engram/engram.sock */
  int episodes = argc > 2 ? atoi(argv[2]) : 10;
  engram_client* c;
  if (engram_connect(&co, &c) != ENGRAM_OK) return fail("connect");
  engram_table* t;
  if (engram_table_open(c, "replay", &t) != ENGRAM_OK) return fail("open table replay");

  engram_column cols[2] = {{"obs", ENGRAM_FLOAT32, 1, {4}}, {"action", ENGRAM_INT32, 0, {0}}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols; /* the table's columns */
  wo.num_columns = 2;
  wo.chunk_length = 16;  /* steps per chunk: items of one chunk go to the server together */
  wo.max_item_steps = 3; /* the longest item this writer creates */
  engram_writer* w;
  if (engram_writer_open(c, &wo, &w) != ENGRAM_OK) return fail("writer");

  long items = 0;
  for (int e = 0; e < episodes; ++e) {
    for (int32_t k = 0; k < 50; ++k) {
      float obs[4] = {0.01f * k, (float)e, 0.0f, 1.0f};
      int32_t action = (k + e) % 2;
      const void* step[2] = {obs, &action};
      if (engram_writer_append(w, step) != ENGRAM_OK) return fail("append");
      if (k >= 2) { /* an item over the last 3 steps; its priority, say, the TD error */
        if (engram_writer_create_item(w, t, 3, 1.0 + (k % 5)) != ENGRAM_OK) return fail("create_item");
        ++items;
      }
    }
    if (engram_writer_end_episode(w) != ENGRAM_OK) return fail("end_episode"); /* items never span two */
  }
  if (engram_writer_flush(w, -1) != ENGRAM_OK) return fail("flush"); /* every item applied or refused */
  printf("actor: wrote %d episodes, %ld items\n", episodes, items);
  engram_disconnect(c); /* closes t and w too */
  return 0;
}
