/* The programs of bench/remote.sh: a plain TCP stream (the link's limit),
 * a writer and a learner for upstream items of any size, and a publisher
 * and a follower for parameter mirrors. Each prints one JSON line with
 * what it measured and its own CPU time (getrusage: user + system).
 *
 *   remote_bench tcp-recv PORT
 *   remote_bench tcp-send HOST PORT BYTES
 *   remote_bench write SOCKET TABLE SIZE N CHUNK_LENGTH     one column data uint8 [SIZE]
 *   remote_bench drain SOCKET TABLE SIZE N                  until N items came (60 s without one: gives up)
 *   remote_bench sample SOCKET TABLE SIZE N BATCH           N items sampled (with repeats), copied out
 *   remote_bench publish SOCKET TABLE FLOATS VERSIONS PERIOD_US
 *   remote_bench follow SOCKET TABLE FLOATS VERSIONS        latency of each version, publish to here
 *
 * The mirror's table has columns stamp int64 [2] = {version, CLOCK_MONOTONIC
 * ns at publish} and params float32 [FLOATS]; namespaces share the clock.
 */
#include <arpa/inet.h>
#include <engram/engram.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"

static int die(const char* what) {
  fprintf(stderr, "remote_bench: %s: %s\n", what, engram_last_error());
  return 1;
}

static engram_client* connect_to(const char* socket) {
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = socket;
  engram_client* c = NULL;
  return engram_connect(&o, &c) == ENGRAM_OK ? c : NULL;
}

enum { BUF = 1 << 20 };

static int tcp_recv(int port) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
  if (bind(l, (struct sockaddr*)&a, sizeof a) || listen(l, 1)) return perror("remote_bench: listen"), 1;
  int fd = accept(l, NULL, NULL);
  static char buf[BUF];
  int64_t bytes = 0, t0 = 0;
  for (;;) {
    ssize_t n = read(fd, buf, BUF);
    if (n <= 0) break;
    if (!bytes) t0 = now_ns();
    bytes += n;
  }
  printf("{\"bytes\": %lld, \"seconds\": %.6f, \"cpu_s\": %.3f}\n", (long long)bytes, (now_ns() - t0) * 1e-9, cpu_s());
  return 0;
}

static int tcp_send(const char* host, int port, int64_t bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &a.sin_addr);
  for (int tries = 0; connect(fd, (struct sockaddr*)&a, sizeof a) != 0; ++tries) {
    if (tries > 100) return perror("remote_bench: connect"), 1;
    usleep(20000);
  }
  static char buf[BUF];
  memset(buf, 0x5a, BUF);
  int64_t t0 = now_ns();
  for (int64_t sent = 0; sent < bytes;) {
    ssize_t n = write(fd, buf, (size_t)(bytes - sent < BUF ? bytes - sent : BUF));
    if (n <= 0) return perror("remote_bench: write"), 1;
    sent += n;
  }
  close(fd);
  printf("{\"bytes\": %lld, \"seconds\": %.6f, \"cpu_s\": %.3f}\n", (long long)bytes, (now_ns() - t0) * 1e-9, cpu_s());
  return 0;
}

static int write_items(const char* socket, const char* table, uint32_t size, int64_t n, uint32_t chunk) {
  engram_client* c = connect_to(socket);
  engram_table* t = NULL;
  if (!c || engram_table_open(c, table, &t) != ENGRAM_OK) return die("table");
  engram_column col = {"data", ENGRAM_UINT8, 1, {size}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = &col;
  wo.num_columns = 1;
  wo.chunk_length = chunk;
  engram_writer* w = NULL;
  if (engram_writer_open(c, &wo, &w) != ENGRAM_OK) return die("writer");
  uint8_t* data = malloc(size);
  int64_t t0 = now_ns();
  for (int64_t i = 0; i < n; ++i) {
    memset(data, (int)(i & 0xff), size < 64 ? size : 64);
    const void* step[1] = {data};
    if (engram_writer_append(w, step) != ENGRAM_OK || engram_writer_create_item(w, t, 1, 1.0) != ENGRAM_OK)
      return die("write");
  }
  if (engram_writer_flush(w, -1) != ENGRAM_OK) return die("flush");
  printf("{\"items\": %lld, \"seconds\": %.6f, \"cpu_s\": %.3f}\n", (long long)n, (now_ns() - t0) * 1e-9, cpu_s());
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  free(data);
  return 0;
}

static int drain(const char* socket, const char* table, uint32_t size, int64_t n) {
  engram_client* c = connect_to(socket);
  engram_table* t = NULL;
  if (!c || engram_table_open(c, table, &t) != ENGRAM_OK) return die("table");
  enum { B = 64 };
  uint8_t* buf = malloc((size_t)size * B);
  void* bufs[1] = {buf};
  int64_t got_all = 0, t0 = 0, last = now_ns();
  while (got_all < n) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = n - got_all < B ? (uint32_t)(n - got_all) : B;
    so.num_steps = 1;
    so.timeout_ms = 100;
    uint32_t got = 0;
    int e = engram_sample(t, &so, bufs, NULL, &got);
    if (e == ENGRAM_E_TIMEOUT || e == ENGRAM_E_RATE_LIMITED) {
      if (now_ns() - last > 60 * 1000000000LL) return die("no item for 60 s");
      if (e == ENGRAM_E_RATE_LIMITED) usleep(1000);
      continue;
    }
    if (e != ENGRAM_OK) return die("sample");
    if (!got_all) t0 = now_ns();
    got_all += got;
    last = now_ns();
  }
  printf("{\"items\": %lld, \"seconds\": %.6f, \"cpu_s\": %.3f}\n", (long long)got_all, (now_ns() - t0) * 1e-9, cpu_s());
  free(buf);
  engram_table_close(t);
  engram_disconnect(c);
  return 0;
}

/* Sampled items/s of a table or a view (bench/shards.sh), copied out in
 * batches; the first batch, which may wait for a view's shards, is not
 * timed. */
static int sample(const char* socket, const char* table, uint32_t size, int64_t n, uint32_t batch) {
  engram_client* c = connect_to(socket);
  engram_table* t = NULL;
  if (!c || engram_table_open(c, table, &t) != ENGRAM_OK) return die("table");
  uint8_t* buf = malloc((size_t)size * batch);
  void* bufs[1] = {buf};
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = batch;
  so.num_steps = 1;
  so.timeout_ms = 30000;
  uint32_t got = 0;
  if (engram_sample(t, &so, bufs, NULL, &got) != ENGRAM_OK) return die("sample");
  int64_t t0 = now_ns(), items = 0;
  while (items < n) {
    if (engram_sample(t, &so, bufs, NULL, &got) != ENGRAM_OK) return die("sample");
    items += got;
  }
  printf("{\"items\": %lld, \"seconds\": %.6f, \"cpu_s\": %.3f}\n", (long long)items, (now_ns() - t0) * 1e-9, cpu_s());
  free(buf);
  engram_table_close(t);
  engram_disconnect(c);
  return 0;
}

static int publish(const char* socket, const char* table, uint32_t floats, int64_t versions, int64_t period_us) {
  engram_client* c = connect_to(socket);
  engram_table* t = NULL;
  if (!c || engram_table_open(c, table, &t) != ENGRAM_OK) return die("table");
  engram_column cols[2] = {{"stamp", ENGRAM_INT64, 1, {2}}, {"params", ENGRAM_FLOAT32, 1, {floats}}};
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  engram_writer* w = NULL;
  if (engram_writer_open(c, &wo, &w) != ENGRAM_OK) return die("writer");
  float* p = calloc(floats, sizeof(float));
  for (int64_t v = 1; v <= versions; ++v) {
    int64_t stamp[2] = {v, now_ns()};
    p[0] = (float)v;
    const void* step[2] = {stamp, p};
    if (engram_writer_append(w, step) != ENGRAM_OK || engram_writer_create_item(w, t, 1, 1.0) != ENGRAM_OK ||
        engram_writer_flush(w, 10000) != ENGRAM_OK)
      return die("publish");
    usleep((useconds_t)period_us);
  }
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  free(p);
  return 0;
}

static int cmp_i64(const void* a, const void* b) {
  int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return (x > y) - (x < y);
}

static int follow(const char* socket, const char* table, uint32_t floats, int64_t versions) {
  engram_client* c = connect_to(socket);
  engram_table* t = NULL;
  if (!c || engram_table_open(c, table, &t) != ENGRAM_OK) return die("table");
  int64_t* latency = calloc((size_t)versions + 1, sizeof(int64_t));
  float* p = malloc(sizeof(float) * floats);
  int64_t stamp[2], have = 0, seen = 0, last = now_ns();
  void* bufs[2] = {stamp, p};
  while (have < versions && now_ns() - last < 30 * 1000000000LL) {
    engram_sample_options so;
    engram_sample_options_init(&so);
    so.batch_size = 1;
    so.num_steps = 1;
    so.timeout_ms = 0;
    uint32_t got = 0;
    if (engram_sample(t, &so, bufs, NULL, &got) == ENGRAM_OK && got == 1 && stamp[0] > have) {
      int64_t at = now_ns();
      have = stamp[0];
      if (have <= versions) latency[seen++] = at - stamp[1];
      last = at;
    }
    usleep(50);  /* a reader polling as an actor would, often */
  }
  qsort(latency, (size_t)seen, sizeof(int64_t), cmp_i64);
  printf("{\"versions_seen\": %lld, \"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n", (long long)seen,
         seen ? latency[seen / 2] / 1e3 : 0, seen ? latency[(seen * 99) / 100] / 1e3 : 0,
         seen ? latency[seen - 1] / 1e3 : 0);
  free(latency);
  free(p);
  engram_table_close(t);
  engram_disconnect(c);
  return 0;
}

int main(int argc, char** argv) {
  const char* cmd = argc > 1 ? argv[1] : "";
  if (!strcmp(cmd, "tcp-recv") && argc == 3) return tcp_recv(atoi(argv[2]));
  if (!strcmp(cmd, "tcp-send") && argc == 5) return tcp_send(argv[2], atoi(argv[3]), atoll(argv[4]));
  if (!strcmp(cmd, "write") && argc == 7)
    return write_items(argv[2], argv[3], (uint32_t)atoi(argv[4]), atoll(argv[5]), (uint32_t)atoi(argv[6]));
  if (!strcmp(cmd, "drain") && argc == 6) return drain(argv[2], argv[3], (uint32_t)atoi(argv[4]), atoll(argv[5]));
  if (!strcmp(cmd, "sample") && argc == 7)
    return sample(argv[2], argv[3], (uint32_t)atoi(argv[4]), atoll(argv[5]), (uint32_t)atoi(argv[6]));
  if (!strcmp(cmd, "publish") && argc == 7)
    return publish(argv[2], argv[3], (uint32_t)atoi(argv[4]), atoll(argv[5]), atoll(argv[6]));
  if (!strcmp(cmd, "follow") && argc == 6) return follow(argv[2], argv[3], (uint32_t)atoi(argv[4]), atoll(argv[5]));
  fprintf(stderr, "usage: see the comment at the top of bench/remote_bench.c\n");
  return 2;
}
