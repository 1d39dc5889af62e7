/* The C writer and the checker of the network-namespace tests (run.sh),
 * against engram.h only.
 *
 *   netns_tool write SOCKET TABLE ID N [RATE]
 *     writes N items of one step: x = {ID, i} (int64 [2]), pad = 48 bytes of
 *     (ID * 31 + i) & 0xff (uint8 [48]), priority 1 + i % 7; RATE > 0 caps
 *     items per second. Progress on stderr every tenth.
 *   netns_tool check SOCKET TABLE ID:N...
 *     drains TABLE (each item once: a FIFO queue; with NETNS_WAIT_S set, on
 *     until every expected item came or none came for that many seconds,
 *     as a learner would), checks each item's bytes
 *     and priority against what the writer wrote, and prints one JSON line:
 *     per writer the items expected, received, duplicated and missing, the
 *     missing ones as ranges of i; exit status 0 whatever it found (run.sh
 *     decides), 1 if the table could not be read.
 */
#include <engram/engram.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAD 48
#define MAX_WRITERS 8

static int die(const char* what) {
  fprintf(stderr, "netns_tool: %s: %s\n", what, engram_last_error());
  return 1;
}

static engram_client* connect_to(const char* socket) {
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = socket;
  engram_client* c = NULL;
  return engram_connect(&o, &c) == ENGRAM_OK ? c : NULL;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int write_items(const char* socket, const char* table, int64_t id, int64_t n, double rate) {
  engram_client* c = connect_to(socket);
  if (!c) return die("connect");
  engram_table* t = NULL;
  if (engram_table_open(c, table, &t) != ENGRAM_OK) return die("table");
  engram_column cols[2] = {{"x", ENGRAM_INT64, 1, {2}}, {"pad", ENGRAM_UINT8, 1, {PAD}}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  wo.chunk_length = 32;
  engram_writer* w = NULL;
  if (engram_writer_open(c, &wo, &w) != ENGRAM_OK) return die("writer");
  double t0 = now_s();
  for (int64_t i = 0; i < n; ++i) {
    int64_t x[2] = {id, i};
    uint8_t pad[PAD];
    memset(pad, (int)((id * 31 + i) & 0xff), PAD);
    const void* step[2] = {x, pad};
    if (engram_writer_append(w, step) != ENGRAM_OK) return die("append");
    if (engram_writer_create_item(w, t, 1, 1.0 + (double)(i % 7)) != ENGRAM_OK) return die("create_item");
    if (n >= 10 && (i + 1) % (n / 10) == 0)
      fprintf(stderr, "netns_tool: writer %lld: %lld of %lld items (%.1f s)\n", (long long)id, (long long)(i + 1),
              (long long)n, now_s() - t0);
    if (rate > 0)
      while ((double)(i + 1) > rate * (now_s() - t0)) {
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
      }
  }
  if (engram_writer_flush(w, -1) != ENGRAM_OK) return die("flush");
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  return 0;
}

struct writer {
  int64_t id, expected, received, duplicates;
  uint8_t* seen;
};

static int check(const char* socket, const char* table, int argc, char** argv) {
  struct writer ws[MAX_WRITERS];
  int nw = 0;
  for (int a = 0; a < argc && nw < MAX_WRITERS; ++a, ++nw) {
    long long id = 0, n = 0;
    if (sscanf(argv[a], "%lld:%lld", &id, &n) != 2 || n < 0) {
      fprintf(stderr, "netns_tool: %s is not ID:N\n", argv[a]);
      return 1;
    }
    ws[nw] = (struct writer){id, n, 0, 0, calloc((size_t)n + 1, 1)};
  }
  engram_client* c = connect_to(socket);
  if (!c) return die("connect");
  engram_table* t = NULL;
  if (engram_table_open(c, table, &t) != ENGRAM_OK) return die("table");
  enum { B = 256 };
  static int64_t x[B][2];
  static uint8_t pad[B][PAD];
  engram_sample_info info[B];
  void* bufs[2] = {x, pad};
  int64_t corrupt = 0, strangers = 0;
  const char* wait_env = getenv("NETNS_WAIT_S");
  double wait_s = wait_env ? atof(wait_env) : 0, last_item = now_s();
  for (;;) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = B;
    so.num_steps = 1;
    so.timeout_ms = 0;
    uint32_t got = 0;
    int e = engram_sample(t, &so, bufs, info, &got);
    if (e == ENGRAM_E_RATE_LIMITED) {  /* a queue's limiter wants B unsampled items: take the last one by one */
      so.batch_size = 1;
      e = engram_sample(t, &so, bufs, info, &got);
    }
    if (e == ENGRAM_E_RATE_LIMITED || e == ENGRAM_E_TIMEOUT || (e == ENGRAM_OK && got == 0)) {
      int complete = 1;
      for (int j = 0; j < nw; ++j) complete = complete && ws[j].received >= ws[j].expected;
      if (wait_s <= 0 || complete || now_s() - last_item > wait_s) break;
      struct timespec d = {0, 5000000};
      nanosleep(&d, NULL);
      continue;
    }
    last_item = now_s();
    if (e != ENGRAM_OK) return die("sample");
    for (uint32_t k = 0; k < got; ++k) {
      int64_t id = x[k][0], i = x[k][1];
      struct writer* w = NULL;
      for (int j = 0; j < nw; ++j)
        if (ws[j].id == id) w = &ws[j];
      if (!w || i < 0 || i >= w->expected) {
        ++strangers;
        continue;
      }
      int ok = info[k].priority == 1.0 + (double)(i % 7);
      for (int b = 0; b < PAD; ++b) ok = ok && pad[k][b] == (uint8_t)((id * 31 + i) & 0xff);
      if (!ok) ++corrupt;
      if (w->seen[i]) ++w->duplicates;
      w->seen[i] = 1;
      ++w->received;
    }
  }
  printf("{\"corrupt\": %lld, \"strangers\": %lld, \"writers\": [", (long long)corrupt, (long long)strangers);
  for (int j = 0; j < nw; ++j) {
    struct writer* w = &ws[j];
    int64_t distinct = 0;
    for (int64_t i = 0; i < w->expected; ++i) distinct += w->seen[i];
    printf("%s{\"id\": %lld, \"expected\": %lld, \"received\": %lld, \"duplicates\": %lld, \"missing\": %lld, "
           "\"missing_ranges\": [",
           j ? ", " : "", (long long)w->id, (long long)w->expected, (long long)w->received, (long long)w->duplicates,
           (long long)(w->expected - distinct));
    int first = 1;
    for (int64_t i = 0; i < w->expected;) {
      if (w->seen[i]) {
        ++i;
        continue;
      }
      int64_t end = i;
      while (end < w->expected && !w->seen[end]) ++end;
      printf("%s[%lld, %lld]", first ? "" : ", ", (long long)i, (long long)end);
      first = 0;
      i = end;
    }
    printf("]}");
    free(w->seen);
  }
  printf("]}\n");
  engram_table_close(t);
  engram_disconnect(c);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 6 && strcmp(argv[1], "write") == 0)
    return write_items(argv[2], argv[3], atoll(argv[4]), atoll(argv[5]), argc > 6 ? atof(argv[6]) : 0);
  if (argc >= 4 && strcmp(argv[1], "check") == 0) return check(argv[2], argv[3], argc - 4, argv + 4);
  fprintf(stderr,
          "usage: netns_tool write SOCKET TABLE ID N [RATE]\n"
          "       netns_tool check SOCKET TABLE ID:N...\n");
  return 2;
}
