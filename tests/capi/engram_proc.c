/* A client process for the multi-process tests, in plain C99 against the
 * public header only (it also proves the header is C).
 *
 *   engram_proc writer  SOCKET TABLE WRITER_ID STEPS KEYS_OUT [one|cycle]
 *       appends STEPS steps in episodes of 50 and creates a 3-step item at
 *       every odd step (from the 3rd) of an episode; writes "key last_step
 *       priority" for every applied item to KEYS_OUT.
 *       Priorities: 1 (one) or (last_step/2) % 4 (cycle).
 *   engram_proc sampler SOCKET TABLE BATCHES BATCH OUT copy|view [TIMEOUT_MS]
 *       samples BATCHES batches, checks every byte against what its writer
 *       wrote, writes "key" per sampled item to OUT.
 *   engram_proc consume SOCKET TABLE OUT TIMEOUT_MS
 *       samples one item at a time until a sample times out.
 *
 * ENGRAM_PROC_INSERT_TIMEOUT_MS sets the writer's insert_timeout_ms.
 *
 * Exit status: 0 ok, 3 data mismatch, 4 API error (message on stderr),
 * 5 timeout (a sample, or items that waited past the insert timeout). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engram/engram.h"
#include "engram_proc_data.h"

/* Heap buffers of the running role, freed by main whatever path the role
 * returned by (leak checkers would otherwise change the exit status). */
static void* g_heap[4];
static engram_client* g_client; /* disconnected by main if a role returned early */

static void* heap(int slot, size_t bytes) {
  g_heap[slot] = malloc(bytes);
  if (!g_heap[slot]) exit(4);
  return g_heap[slot];
}

static int die(const char* what, int rc) {
  fprintf(stderr, "engram_proc: %s: %s (%s)\n", what, engram_strerror(rc), engram_last_error());
  return 4;
}

static engram_client* connect_to(const char* socket) {
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = socket;
  engram_client* c = NULL;
  int rc = engram_connect(&o, &c);
  if (rc != ENGRAM_OK) exit(die("connect", rc));
  g_client = c;
  return c;
}

static int writer(char** argv, int cycle) {
  const char* socket = argv[2];
  uint32_t id = (uint32_t)atoi(argv[4]);
  uint32_t steps = (uint32_t)atoi(argv[5]);
  engram_client* c = connect_to(socket);
  engram_table* t = NULL;
  int rc = engram_table_open(c, argv[3], &t);
  if (rc) return die("table_open", rc);
  engram_column cols[2];
  proc_columns(cols);
  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  wo.chunk_length = 4;
  wo.max_item_steps = PROC_ITEM_STEPS;
  wo.keep_keys = 1;
  if (getenv("ENGRAM_PROC_INSERT_TIMEOUT_MS")) wo.insert_timeout_ms = atoi(getenv("ENGRAM_PROC_INSERT_TIMEOUT_MS"));
  engram_writer* w = NULL;
  if ((rc = engram_writer_open(c, &wo, &w))) return die("writer_open", rc);
  FILE* out = fopen(argv[6], "w");
  if (!out) return 4;
  uint8_t obs[PROC_OBS];
  int64_t meta[2];
  uint32_t* last_steps = heap(0, sizeof(uint32_t) * (steps + 1));
  uint32_t items = 0;
  for (uint32_t s = 0; s < steps; ++s) {
    proc_fill(id, s, obs, meta);
    const void* colv[2] = {obs, meta};
    if ((rc = engram_writer_append(w, colv))) return die("append", rc);
    if (proc_item_ends_at(s)) {
      double prio = cycle ? (double)((s / 2) % 4) : 1.0;
      if ((rc = engram_writer_create_item(w, t, PROC_ITEM_STEPS, prio))) return die("create_item", rc);
      last_steps[items++] = s;
    }
    if (s % PROC_EPISODE == PROC_EPISODE - 1 && (rc = engram_writer_end_episode(w))) return die("end_episode", rc);
  }
  if ((rc = engram_writer_flush(w, -1))) {
    if (rc == ENGRAM_E_TIMEOUT) {
      fprintf(stderr, "engram_proc: flush: %s\n", engram_last_error());
      return 5;
    }
    return die("flush", rc);
  }
  uint64_t keys[256];
  size_t n = 0;
  uint32_t done = 0;
  do {
    if ((rc = engram_writer_take_keys(w, keys, 256, &n))) return die("take_keys", rc);
    for (size_t i = 0; i < n; ++i, ++done)
      fprintf(out, "%llu %u %g\n", (unsigned long long)keys[i], last_steps[done],
              cycle ? (double)((last_steps[done] / 2) % 4) : 1.0);
  } while (n > 0);
  fclose(out);
  engram_writer_close(w);
  engram_table_close(t);
  engram_disconnect(c);
  g_client = NULL;
  if (done != items) {
    fprintf(stderr, "engram_proc: %u items created, %u keys\n", items, done);
    return 4;
  }
  return 0;
}

/* One sampled item, its steps contiguous: meta names writer and step of
 * each, and every byte must be what proc_fill makes for them. */
static int item_ok(const uint8_t* obs, const int64_t* meta) {
  uint8_t want[PROC_OBS];
  int64_t want_meta[2];
  for (uint32_t k = 0; k < PROC_ITEM_STEPS; ++k) {
    proc_fill((uint32_t)meta[2 * k], (uint32_t)meta[2 * k + 1], want, want_meta);
    if (memcmp(want, obs + (size_t)k * PROC_OBS, PROC_OBS) != 0) return 0;
    if (meta[2 * k] != meta[0] || meta[2 * k + 1] != meta[1] + (int64_t)k) return 0;
  }
  return proc_item_ends_at((uint32_t)meta[2 * (PROC_ITEM_STEPS - 1) + 1]);
}

static int sampler(int argc, char** argv, int consume) {
  const char* socket = argv[2];
  uint32_t batches = consume ? 0xffffffffu : (uint32_t)atoi(argv[4]);
  uint32_t batch = consume ? 1 : (uint32_t)atoi(argv[5]);
  const char* out_path = consume ? argv[4] : argv[6];
  int view = !consume && strcmp(argv[7], "view") == 0;
  int32_t timeout = consume ? atoi(argv[5]) : (argc > 8 ? atoi(argv[8]) : -1);
  engram_client* c = connect_to(socket);
  engram_table* t = NULL;
  int rc = engram_table_open(c, argv[3], &t);
  if (rc) return die("table_open", rc);
  FILE* out = fopen(out_path, "w");
  if (!out) return 4;
  uint8_t* obs = heap(0, (size_t)batch * PROC_ITEM_STEPS * PROC_OBS);
  int64_t* meta = heap(1, (size_t)batch * PROC_ITEM_STEPS * 2 * sizeof(int64_t));
  engram_sample_info* info = heap(2, batch * sizeof *info);
  engram_sample_options so;
  engram_sample_options_init(&so);
  so.batch_size = batch;
  so.num_steps = PROC_ITEM_STEPS;
  so.timeout_ms = timeout;
  int bad = 0;
  for (uint32_t b = 0; b < batches; ++b) {
    uint32_t n = 0;
    if (!view) {
      void* bufs[2] = {obs, meta};
      rc = engram_sample(t, &so, bufs, info, &n);
      if (rc == ENGRAM_E_TIMEOUT) {
        if (consume) break;
        fclose(out);
        return 5;
      }
      if (rc) return die("sample", rc);
      for (uint32_t i = 0; i < n; ++i) {
        if (!item_ok(obs + (size_t)i * PROC_ITEM_STEPS * PROC_OBS, meta + (size_t)i * PROC_ITEM_STEPS * 2)) bad = 1;
        fprintf(out, "%llu\n", (unsigned long long)info[i].key);
      }
      continue;
    }
    engram_batch* bt = NULL;
    rc = engram_sample_view(t, &so, &bt);
    if (rc == ENGRAM_E_TIMEOUT) {
      fclose(out);
      return 5;
    }
    if (rc) return die("sample_view", rc);
    n = engram_batch_size(bt);
    for (uint32_t i = 0; i < n; ++i) {
      engram_sample_info si;
      engram_view vo[8], vm[8];
      uint32_t no = 0, nm = 0, at = 0;
      engram_batch_info(bt, i, &si);
      engram_batch_views(bt, i, 0, vo, 8, &no);
      engram_batch_views(bt, i, 1, vm, 8, &nm);
      for (uint32_t k = 0; k < no && k < nm; ++k) {
        if (at + vo[k].steps > PROC_ITEM_STEPS) break;
        memcpy(obs + (size_t)at * PROC_OBS, vo[k].data, (size_t)vo[k].steps * PROC_OBS);
        memcpy(meta + 2 * at, vm[k].data, (size_t)vm[k].steps * 2 * sizeof(int64_t));
        at += vo[k].steps;
      }
      if (at != PROC_ITEM_STEPS || !item_ok(obs, meta)) bad = 1;
      fprintf(out, "%llu\n", (unsigned long long)si.key);
    }
    engram_batch_release(bt);
  }
  fclose(out);
  engram_table_close(t);
  engram_disconnect(c);
  g_client = NULL;
  if (bad) fprintf(stderr, "engram_proc: sampled data differs from what was written\n");
  return bad ? 3 : 0;
}

int main(int argc, char** argv) {
  int rc = 2;
  if (argc >= 7 && strcmp(argv[1], "writer") == 0) rc = writer(argv, argc > 7 && strcmp(argv[7], "cycle") == 0);
  else if (argc >= 8 && strcmp(argv[1], "sampler") == 0) rc = sampler(argc, argv, 0);
  else if (argc >= 6 && strcmp(argv[1], "consume") == 0) rc = sampler(argc, argv, 1);
  else fprintf(stderr, "usage: engram_proc writer|sampler|consume ... (see the source)\n");
  engram_disconnect(g_client);
  for (int i = 0; i < 4; ++i) free(g_heap[i]);
  return rc;
}
