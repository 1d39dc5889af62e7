/* Example of: engram_items_open, engram_items_count, engram_items_next, engram_items_close,
 * engram_writer_create_item_at_max, engram_sample, engram_rate_limiter_sample_to_insert_ratio
 *
 * A prioritized table: new items go in at the largest priority the table
 * holds (Schaul et al.'s rule), one gets a higher priority, the items are
 * listed highest first, and a batch is drawn without repeats. Usage:
 * see_inside [SOCKET] */
#include <engram/engram.h>
#include <stdio.h>

static int fail(const char* what) {
  fprintf(stderr, "%s: %s\n", what, engram_last_error());
  return 1;
}

int main(int argc, char** argv) {
  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = argc > 1 ? argv[1] : NULL;
  engram_client* c;
  if (engram_connect(&co, &c) != ENGRAM_OK) return fail("connect");
  engram_column col = {"reward", ENGRAM_FLOAT32, 0, {0}};
  engram_table_options to;
  engram_table_options_init(&to);
  to.name = "inside";
  to.max_size = 100;
  to.sampler = ENGRAM_PRIORITIZED;
  /* about one sample per insert once 1 item is in, give or take 100 */
  if (engram_rate_limiter_sample_to_insert_ratio(&to.rate_limiter, 1.0, 1, 100.0) != ENGRAM_OK) return fail("limiter");
  to.columns = &col;
  to.num_columns = 1;
  engram_table* t;
  if (engram_table_create(c, &to) != ENGRAM_OK || engram_table_open(c, "inside", &t) != ENGRAM_OK)
    return fail("table");
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  wo.keep_keys = 1;
  engram_writer* w;
  if (engram_writer_open(c, &wo, &w) != ENGRAM_OK) return fail("writer");
  for (int k = 0; k < 8; ++k) {
    float r = (float)k;
    const void* step[1] = {&r};
    if (engram_writer_append(w, step) != ENGRAM_OK) return fail("append");
    /* the first at 1.0 (an empty table's maximum), then each at the maximum */
    if (engram_writer_create_item_at_max(w, t, 1) != ENGRAM_OK) return fail("create at max");
  }
  if (engram_writer_flush(w, -1) != ENGRAM_OK) return fail("flush");
  uint64_t keys[8];
  size_t got;
  engram_writer_take_keys(w, keys, 8, &got);
  double high = 5.0;
  if (engram_update_priorities(t, &keys[3], &high, 1, NULL) != ENGRAM_OK) return fail("update");

  engram_items* it;
  if (engram_items_open(c, "inside", ENGRAM_BY_PRIORITY, &it) != ENGRAM_OK) return fail("list");
  printf("%llu items, highest priority first:\n", (unsigned long long)engram_items_count(it));
  engram_item page[3];
  uint32_t n;
  while (engram_items_next(it, page, 3, &n) == ENGRAM_OK && n > 0) /* pages of 3 */
    for (uint32_t i = 0; i < n; ++i)
      printf("  key %llu priority %g inserted %llu\n", (unsigned long long)page[i].key, page[i].priority,
             (unsigned long long)page[i].inserted);
  engram_items_close(it);

  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 8;
  so.num_steps = 1;
  so.flags = ENGRAM_SAMPLE_NO_REPEATS; /* every item at most once: here all eight */
  float rewards[8];
  void* bufs[1] = {rewards};
  engram_sample_info info[8];
  if (engram_sample(t, &so, bufs, info, &n) != ENGRAM_OK) return fail("sample");
  printf("a batch of %u without repeats; item %llu was in it with probability %g\n", n,
         (unsigned long long)info[0].key, info[0].probability * n);
  engram_disconnect(c);
  return 0;
}
