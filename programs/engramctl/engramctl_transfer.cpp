// engramctl export and import: a table to and from a .npz file
// (engram-export(5)) through libengram, as any client would do it; the
// rest of engramctl speaks the control protocol directly and maps no
// memory, but an export reads chunks from the arena and an import writes
// them, which is libengram's job.
#include "programs/engramctl/engramctl_transfer.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "engram/engram.h"

namespace engram {
namespace {

struct Progress {
  const char* what;
  const char* unit;  // "MiB" (done and total in bytes) or "items"
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool said = false;
};

// Progress on stderr once the transfer has taken a second, then each second.
int report(void* ctx, uint64_t done, uint64_t total) {
  auto* p = static_cast<Progress*>(ctx);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - p->started).count();
  if (secs < 1 && !p->said) return 0;
  p->said = true;
  bool mib = std::string(p->unit) == "MiB";
  double d = mib ? done / 1048576.0 : double(done), t = mib ? total / 1048576.0 : double(total);
  std::fprintf(stderr, "engramctl: %s: %.0f of %.0f %s (%.0f%%), %.0f %s/s\n", p->what, d, t, p->unit,
               total ? 100.0 * done / total : 100.0, secs > 0 ? d / secs : 0.0, p->unit);
  return 0;
}

int failed(const std::string& what, int rc) {
  std::fprintf(stderr, "engramctl: %s: %s (%s)\n", what.c_str(), engram_last_error(), engram_strerror(rc));
  return 1;
}

// Connects and opens `table`; the caller disconnects c (also on failure).
int open_table(const std::string& socket, const std::string& table, engram_client** c, engram_table** t) {
  engram_connect_options o;
  engram_connect_options_init(&o);
  o.socket_path = socket.c_str();
  int rc = engram_connect(&o, c);
  if (rc != ENGRAM_OK) return failed("cannot connect to " + socket, rc);
  rc = engram_table_open(*c, table.c_str(), t);
  if (rc != ENGRAM_OK) return failed("cannot open table " + table, rc);
  return 0;
}

using Transfer = int (*)(engram_table*, const char*, const engram_transfer_options*, uint64_t*);

// Connects, opens `table`, runs the transfer with progress on stderr, and
// says what it did ("exported 48 items of table t to f in 0.1 s").
int transfer(const std::string& socket, const std::string& table, const std::string& file, Transfer fn,
             Progress p, int32_t timeout_ms, const std::string& done) {
  engram_client* c = nullptr;
  engram_table* t = nullptr;
  int r = open_table(socket, table, &c, &t);
  if (r == 0) {
    engram_transfer_options o;
    engram_transfer_options_init(&o);
    o.progress = report;
    o.progress_ctx = &p;
    o.insert_timeout_ms = timeout_ms;
    uint64_t items = 0;
    int rc = fn(t, file.c_str(), &o, &items);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.started).count();
    if (rc != ENGRAM_OK) {
      r = failed(std::string(p.what) + " " + file, rc);
      if (items) std::fprintf(stderr, "engramctl: %llu items went in before that\n", (unsigned long long)items);
    } else {
      std::printf("%s %llu items %s in %.1f s\n", p.what == std::string("exporting") ? "exported" : "imported",
                  (unsigned long long)items, done.c_str(), secs);
    }
  }
  engram_disconnect(c);
  return r;
}

}  // namespace

int export_command(const std::string& socket, const std::string& table, const std::string& file) {
  return transfer(socket, table, file, engram_table_export, {"exporting", "MiB"}, -1,
                  "of table " + table + " to " + file);
}

int import_command(const std::string& socket, const std::string& file, const std::string& table, int32_t timeout_ms) {
  return transfer(socket, table, file, engram_table_import, {"importing", "items"}, timeout_ms,
                  "from " + file + " into table " + table);
}

}  // namespace engram
