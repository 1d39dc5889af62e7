// Starts a server in this process, writes an item and samples it, through
// an installed engram's headers and library.
#include <engram/engram.hpp>
#include <engram/server.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  namespace api = engram::api;
  if (argc < 2) return 2;
  try {
    api::Server server("", argv[1]);
    api::Client c = api::Client::connect(argv[1]);
    api::TableOptions t;
    t.name = "t";
    t.max_size = 10;
    t.columns.add("x", ENGRAM_INT32);
    c.create_table(t);
    api::Table table = c.open_table("t");
    api::WriterOptions wo;
    wo.columns = t.columns;
    api::Writer w = c.writer(wo);
    int32_t x = 42, y = 0;
    w.append({&x});
    w.create_item(table, 1, 1.0);
    w.flush(5000);
    void* bufs[1] = {&y};
    table.sample(api::sample_options(1, 1, 5000), api::Span<void* const>(bufs, 1));
    std::printf("engram %s: sampled %d\n", engram_version_string(), y);
    return y == 42 ? 0 : 1;
  } catch (const api::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
