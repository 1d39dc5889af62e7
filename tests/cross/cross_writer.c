/* The C writer of the cross-language test (tests/cross/run.sh): N items of
 * table "cross", item k holding writer id W, step k, and payload byte i =
 * (W*31 + k*7 + i) & 0xFF. The Python and Rust writers write the same way.
 * Usage: cross_writer SOCKET WRITER_ID N */
#include <engram/engram.h>
#include <stdio.h>
#include <stdlib.h>

#define PAYLOAD 48

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: cross_writer SOCKET WRITER_ID N\n");
    return 2;
  }
  int32_t id = atoi(argv[2]);
  int64_t n = atoll(argv[3]);
  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = argv[1];
  engram_client* c = NULL;
  engram_table* t = NULL;
  engram_writer* w = NULL;
  engram_column cols[3] = {{"writer", ENGRAM_INT32, 0, {0}}, {"step", ENGRAM_INT64, 0, {0}},
                           {"payload", ENGRAM_UINT8, 1, {PAYLOAD}}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 3;
  if (engram_connect(&co, &c) || engram_table_open(c, "cross", &t) || engram_writer_open(c, &wo, &w)) goto fail;
  for (int64_t k = 0; k < n; ++k) {
    uint8_t payload[PAYLOAD];
    for (int i = 0; i < PAYLOAD; ++i) payload[i] = (uint8_t)((id * 31 + k * 7 + i) & 0xFF);
    const void* step[3] = {&id, &k, payload};
    if (engram_writer_append(w, step) || engram_writer_create_item(w, t, 1, 1.0)) goto fail;
  }
  if (engram_writer_flush(w, 10000)) goto fail;
  engram_disconnect(c);
  printf("c writer %d: %lld items\n", id, (long long)n);
  return 0;
fail:
  fprintf(stderr, "cross_writer: %s\n", engram_last_error());
  return 1;
}
