/* A client of the installed engram, for the test under systemd
 * (tests/service/run.sh): C99, the public header, the packaged library.
 *
 *   service_client write TABLE N      create TABLE if missing, write N items
 *                                     of one step, sample them back
 *   service_client size TABLE         print the table's size
 *   service_client reconnect TABLE S  hold a connection until the server goes
 *                                     away, then reconnect within S seconds
 *
 * The socket is $ENGRAM_SOCKET or /run/engram/engram.sock. On an error it
 * prints engram_last_error() and exits 1. */
#define _POSIX_C_SOURCE 200809L
#include <engram/engram.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fail(const char* what, int rc) {
  fprintf(stderr, "service_client: %s: %s (%s)\n", what, engram_last_error(), engram_strerror(rc));
  return 1;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static int table_size(engram_client* c, const char* table, uint64_t* size) {
  engram_table_info info;
  engram_table_info_init(&info);
  int rc = engram_table_info_get(c, table, &info);
  *size = info.size;
  return rc;
}

static int write_items(engram_client* c, const char* table, int n) {
  engram_column col = {"x", ENGRAM_FLOAT32, 1, {4}};
  engram_table_options o;
  engram_table_options_init(&o);
  o.name = table;
  o.max_size = 1000;
  o.columns = &col;
  o.num_columns = 1;
  int rc = engram_table_create(c, &o);
  if (rc != ENGRAM_OK && rc != ENGRAM_E_EXISTS) return fail("engram_table_create", rc);
  engram_table* t = NULL;
  if ((rc = engram_table_open(c, table, &t)) != ENGRAM_OK) return fail("engram_table_open", rc);
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  engram_writer* w = NULL;
  if ((rc = engram_writer_open(c, &wo, &w)) != ENGRAM_OK) return fail("engram_writer_open", rc);
  for (int i = 0; i < n; ++i) {
    float x[4] = {(float)i, (float)i, (float)i, (float)i};
    const void* cols[1] = {x};
    if ((rc = engram_writer_append(w, cols)) != ENGRAM_OK) return fail("engram_writer_append", rc);
    if ((rc = engram_writer_create_item(w, t, 1, 1.0)) != ENGRAM_OK) return fail("engram_writer_create_item", rc);
  }
  if ((rc = engram_writer_flush(w, 10000)) != ENGRAM_OK) return fail("engram_writer_flush", rc);
  engram_writer_close(w);
  float out[8][4];
  void* bufs[1] = {out};
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = 8;
  so.num_steps = 1;
  so.timeout_ms = 10000;
  uint32_t got = 0;
  if ((rc = engram_sample(t, &so, bufs, NULL, &got)) != ENGRAM_OK) return fail("engram_sample", rc);
  for (uint32_t i = 0; i < got; ++i)
    if (out[i][0] != out[i][3] || out[i][0] < 0) {
      fprintf(stderr, "service_client: sampled item %u holds %g..%g\n", i, out[i][0], out[i][3]);
      return 1;
    }
  engram_table_close(t);
  uint64_t size = 0;
  if ((rc = table_size(c, table, &size)) != ENGRAM_OK) return fail("engram_table_info_get", rc);
  printf("wrote %d, sampled %u, size %llu\n", n, got, (unsigned long long)size);
  return 0;
}

static int reconnect(engram_client* c, const char* table, int seconds) {
  uint64_t size = 0;
  int rc;
  while ((rc = table_size(c, table, &size)) == ENGRAM_OK) sleep_ms(50);
  if (rc != ENGRAM_E_DISCONNECTED) return fail("engram_table_info_get", rc);
  printf("disconnected\n");
  fflush(stdout);
  engram_disconnect(c);
  for (long waited = 0; waited < seconds * 1000L; waited += 100) {
    engram_client* again = NULL;
    if (engram_connect(NULL, &again) == ENGRAM_OK) {
      rc = table_size(again, table, &size);
      engram_disconnect(again);
      if (rc != ENGRAM_OK) return fail("engram_table_info_get after reconnecting", rc);
      printf("reconnected after %ld ms, size %llu\n", waited, (unsigned long long)size);
      return 0;
    }
    sleep_ms(100);
  }
  return fail("engram_connect", ENGRAM_E_DISCONNECTED);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: service_client write TABLE N | size TABLE | reconnect TABLE SECONDS\n");
    return 2;
  }
  engram_client* c = NULL;
  int rc = engram_connect(NULL, &c);
  if (rc != ENGRAM_OK) return fail("engram_connect", rc);
  const char* cmd = argv[1];
  const char* table = argv[2];
  int status = 2;
  if (strcmp(cmd, "write") == 0 && argc == 4) {
    status = write_items(c, table, atoi(argv[3]));
  } else if (strcmp(cmd, "size") == 0) {
    uint64_t size = 0;
    status = (rc = table_size(c, table, &size)) == ENGRAM_OK ? (printf("%llu\n", (unsigned long long)size), 0)
                                                             : fail("engram_table_info_get", rc);
  } else if (strcmp(cmd, "reconnect") == 0 && argc == 4) {
    return reconnect(c, table, atoi(argv[3]));
  } else {
    fprintf(stderr, "service_client: unknown command %s\n", cmd);
  }
  engram_disconnect(c);
  return status;
}
