/* The C side of bench/bindings.sh: the same work as bench_py.py and the
 * Rust example `bench`, through the C API directly. Writes N items of one
 * step (a uint8 payload of BYTES) into TABLE, then samples N items in
 * batches of 64 (or BATCH: bench/torch.sh's 256), copied out into plain
 * buffers; prints one JSON object with items/s of each.
 * Usage: bench_c SOCKET TABLE BYTES N [BATCH] */
#define _POSIX_C_SOURCE 200809L
#include <engram/engram.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: bench_c SOCKET TABLE BYTES N [BATCH]\n");
    return 2;
  }
  uint32_t bytes = (uint32_t)atoi(argv[3]);
  long n = atol(argv[4]);
  uint32_t batch = argc == 6 ? (uint32_t)atoi(argv[5]) : 64;
  if (batch < 1 || batch > 4096) {
    fprintf(stderr, "bench_c: BATCH is 1..4096\n");
    return 2;
  }
  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = argv[1];
  engram_client* c = NULL;
  engram_table* t = NULL;
  engram_writer* w = NULL;
  engram_column col = {"payload", ENGRAM_UINT8, 1, {bytes}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  uint8_t* step = malloc(bytes);
  uint8_t* out = malloc((size_t)bytes * batch);
  memset(step, 7, bytes);
  if (engram_connect(&co, &c) || engram_table_open(c, argv[2], &t) || engram_writer_open(c, &wo, &w)) goto fail;
  double t0 = now();
  for (long i = 0; i < n; ++i) {
    const void* cols[1] = {step};
    if (engram_writer_append(w, cols) || engram_writer_create_item(w, t, 1, 1.0)) goto fail;
  }
  if (engram_writer_flush(w, 30000)) goto fail;
  double t1 = now();
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = batch;
  so.num_steps = 1;
  so.timeout_ms = 10000;
  for (long got = 0; got < n; got += batch) {
    void* bufs[1] = {out};
    uint32_t k = 0;
    if (engram_sample(t, &so, bufs, NULL, &k)) goto fail;
  }
  double t2 = now();
  printf("{\"lang\": \"c\", \"bytes\": %u, \"insert_per_s\": %.0f, \"sample_per_s\": %.0f}\n", bytes, n / (t1 - t0),
         n / (t2 - t1));
  engram_disconnect(c);
  return 0;
fail:
  fprintf(stderr, "bench_c: %s\n", engram_last_error());
  return 1;
}
