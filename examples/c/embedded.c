/* Example of: engram_server_start, engram_server_stop, engram_server_options_init, engram_rate_limiter_queue,
 * engram_table_create, engram_table_options_init, engram_sample_begin, engram_sample_end, engram_sample_view,
 * engram_batch_size, engram_batch_info, engram_batch_views, engram_batch_release, engram_checkpoint
 *
 * One process, no daemon: it runs the server itself (IMPALA-style: a
 * queue of unrolls), writes unrolls into the queue, takes them out two
 * ways (a sample begun and collected later; a zero-copy view), and writes
 * a checkpoint. Other processes could attach to the same socket. Usage:
 * embedded DIR (for the socket and the checkpoints) */
#include <engram/engram.h>
#include <engram/server.h>
#include <stdio.h>
#include <string.h>

#define UNROLL 20 /* steps per item */

static int fail(const char* what) {
  fprintf(stderr, "embedded: %s: %s\n", what, engram_last_error());
  return 1;
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : ".";
  char socket_path[256], config[512];
  snprintf(socket_path, sizeof socket_path, "%s/embedded.sock", dir);
  snprintf(config, sizeof config, "[checkpoint]\ndir = \"%s/checkpoints\"\n", dir);
  engram_server_options so;
  engram_server_options_init(&so);
  so.socket_path = socket_path;
  so.config_toml = config; /* engramd.toml(5) as text; or config_path */
  so.quiet = 1;
  engram_server* server;
  if (engram_server_start(&so, &server) != ENGRAM_OK) return fail("server");

  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = socket_path;
  engram_client* c;
  if (engram_connect(&co, &c) != ENGRAM_OK) return fail("connect");
  engram_column cols[2] = {{"obs", ENGRAM_UINT8, 1, {8}}, {"reward", ENGRAM_FLOAT32, 0, {0}}};
  engram_table_options to;
  engram_table_options_init(&to);
  to.name = "unrolls";
  to.max_size = 64;
  to.sampler = ENGRAM_FIFO; /* oldest first, each once: a queue */
  to.max_times_sampled = 1;
  to.columns = cols;
  to.num_columns = 2;
  if (engram_rate_limiter_queue(&to.rate_limiter, 16) != ENGRAM_OK) return fail("rate limiter"); /* writers wait at 16 */
  if (engram_table_create(c, &to) != ENGRAM_OK) return fail("create");
  engram_table* t;
  if (engram_table_open(c, "unrolls", &t) != ENGRAM_OK) return fail("open");

  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  wo.chunk_length = UNROLL;
  wo.max_item_steps = UNROLL;
  engram_writer* w;
  if (engram_writer_open(c, &wo, &w) != ENGRAM_OK) return fail("writer");
  for (int u = 0; u < 4; ++u) {
    for (int k = 0; k < UNROLL; ++k) {
      uint8_t obs[8];
      memset(obs, u * UNROLL + k, sizeof obs);
      float reward = (float)k;
      const void* step[2] = {obs, &reward};
      if (engram_writer_append(w, step) != ENGRAM_OK) return fail("append");
    }
    if (engram_writer_create_item(w, t, UNROLL, 1.0) != ENGRAM_OK) return fail("create_item"); /* one unroll */
  }
  if (engram_writer_flush(w, -1) != ENGRAM_OK) return fail("flush");

  /* A sample sent now and collected later: the server draws it while the
   * learner would be training on the previous batch. */
  engram_sample_options sample;
  engram_sample_options_init(&sample);
  sample.batch_size = 2;
  sample.num_steps = UNROLL;
  if (engram_sample_begin(t, &sample) != ENGRAM_OK) return fail("sample_begin");
  static uint8_t obs[2][UNROLL][8];
  static float rewards[2][UNROLL];
  void* buffers[2] = {obs, rewards};
  uint32_t n;
  if (engram_sample_end(t, buffers, NULL, &n) != ENGRAM_OK) return fail("sample_end");
  printf("embedded: collected %u unrolls; the first starts with obs %u\n", n, obs[0][0][0]);

  /* Zero-copy: the batch lends the chunks' memory until it is released. */
  engram_batch* b;
  if (engram_sample_view(t, &sample, &b) != ENGRAM_OK) return fail("sample_view");
  for (uint32_t i = 0; i < engram_batch_size(b); ++i) {
    engram_sample_info info;
    engram_view views[8];
    uint32_t pieces;
    if (engram_batch_info(b, i, &info) != ENGRAM_OK) return fail("batch_info");
    if (engram_batch_views(b, i, 0, views, 8, &pieces) != ENGRAM_OK) return fail("batch_views");
    const uint8_t* first = views[0].data;
    printf("embedded: viewed unroll %llu in %u piece(s), starting with obs %u\n", (unsigned long long)info.key,
           pieces, first[0]);
  }
  engram_batch_release(b);

  char path[512];
  if (engram_checkpoint(c, -1, path, sizeof path) != ENGRAM_OK) return fail("checkpoint");
  printf("embedded: checkpoint written\n");
  engram_disconnect(c);
  return engram_server_stop(server) == ENGRAM_OK ? 0 : fail("stop");
}
