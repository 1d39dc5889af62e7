/* Example of: engram_table_export, engram_table_import, engram_transfer_options_init,
 * engram_rate_limiter_min_size
 *
 * Writes 100 one-step items, exports the table to a NumPy .npz file (numpy
 * reads it: np.load), and imports the file into a second table of the same
 * columns. Usage: export_import [SOCKET] [FILE] */
#include <engram/engram.h>
#include <stdio.h>

static int fail(const char* what) {
  fprintf(stderr, "%s: %s\n", what, engram_last_error());
  return 1;
}

static int report(void* ctx, uint64_t done, uint64_t total) {
  printf("%s: %llu of %llu\n", (const char*)ctx, (unsigned long long)done, (unsigned long long)total);
  return 0; /* nonzero would stop the transfer */
}

int main(int argc, char** argv) {
  engram_connect_options co;
  engram_connect_options_init(&co);
  co.socket_path = argc > 1 ? argv[1] : NULL; /* NULL: $ENGRAM_SOCKET, else /run/engram/engram.sock */
  const char* file = argc > 2 ? argv[2] : "replay.npz";
  engram_client* c;
  if (engram_connect(&co, &c) != ENGRAM_OK) return fail("connect");
  engram_column cols[2] = {{"obs", ENGRAM_FLOAT32, 1, {4}}, {"action", ENGRAM_INT32, 0, {0}}};
  engram_table_options to;
  engram_table_options_init(&to);
  to.max_size = 1000;
  if (engram_rate_limiter_min_size(&to.rate_limiter, 10) != ENGRAM_OK) return fail("limiter"); /* sample from 10 items */
  to.columns = cols;
  to.num_columns = 2;
  to.name = "kept";
  if (engram_table_create(c, &to) != ENGRAM_OK) return fail("create kept");
  to.name = "loaded";
  if (engram_table_create(c, &to) != ENGRAM_OK) return fail("create loaded");
  engram_table *kept, *loaded;
  if (engram_table_open(c, "kept", &kept) != ENGRAM_OK || engram_table_open(c, "loaded", &loaded) != ENGRAM_OK)
    return fail("open");

  engram_writer_options wo;
  engram_writer_options_init(&wo);
  wo.columns = cols;
  wo.num_columns = 2;
  wo.chunk_length = 10;
  engram_writer* w;
  if (engram_writer_open(c, &wo, &w) != ENGRAM_OK) return fail("writer");
  for (int32_t k = 0; k < 100; ++k) {
    float obs[4] = {0.5f * k, 1, 2, 3};
    const void* step[2] = {obs, &k};
    if (engram_writer_append(w, step) != ENGRAM_OK || engram_writer_create_item(w, kept, 1, 1.0 + k % 3) != ENGRAM_OK)
      return fail("write");
  }
  if (engram_writer_flush(w, -1) != ENGRAM_OK) return fail("flush");

  engram_transfer_options o;
  engram_transfer_options_init(&o);
  o.progress = report; /* about once a second, and at the end */
  o.progress_ctx = "export";
  uint64_t items;
  if (engram_table_export(kept, file, &o, &items) != ENGRAM_OK) return fail("export");
  printf("exported %llu items to %s\n", (unsigned long long)items, file);
  o.progress_ctx = "import";
  if (engram_table_import(loaded, file, &o, &items) != ENGRAM_OK) return fail("import");
  printf("imported %llu items into table loaded\n", (unsigned long long)items);
  engram_disconnect(c);
  return 0;
}
