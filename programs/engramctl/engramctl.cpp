// engramctl: a small command line client of engramd's control socket.
// See man/man1/engramctl.1.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/control_message.hpp"
#include "core/item_listing.hpp"
#include "core/selector.hpp"
#include "server/config.hpp"
#include "programs/engramctl/engramctl_transfer.hpp"

using namespace engram;

namespace {

const char* kUsage =
    "usage: engramctl [--socket PATH] COMMAND [ARGS]\n"
    "\n"
    "  status                 the server: pid, version, clients, arena use\n"
    "  tables [--json]        every table, one line each\n"
    "  info TABLE [--json]    one table: configuration, size, counters\n"
    "  items TABLE [--by insertion|priority] [--limit N] [--json]\n"
    "                         the items of TABLE (key, priority, times sampled,\n"
    "                         insertion order, steps), oldest or highest first;\n"
    "                         writers and samplers go on meanwhile\n"
    "  create-table FILE      create a table from a TOML snippet ('-' reads stdin):\n"
    "                         the keys of an engramd.toml [[table]] entry\n"
    "  reset TABLE            remove every item of TABLE, zero its counters\n"
    "  drop TABLE             delete TABLE\n"
    "  checkpoint             write a checkpoint of every table now, print its path\n"
    "                         (traffic goes on meanwhile; waits until it is on disk)\n"
    "  export TABLE FILE      write TABLE's items to FILE, a NumPy .npz (engram-export(5));\n"
    "                         traffic goes on meanwhile\n"
    "  import FILE TABLE [--timeout-ms N]\n"
    "                         insert the items of FILE into TABLE; N bounds each item's\n"
    "                         wait for the rate limiter (default: no bound)\n"
    "\n"
    "The socket is --socket, else $ENGRAM_SOCKET, else /run/engram/engram.sock.\n";

int fail(const std::string& msg, int code = 1) {
  std::fprintf(stderr, "engramctl: %s\n", msg.c_str());
  return code;
}

class Connection {
 public:
  Status open(const std::string& path) {
    HelloReply hello;
    ReceivedFds segments;  // the arena and the bells: engramctl maps neither
    return connect_control(path, 10000, &fd_, &hello, &segments);
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  // timeout_ms -1: no limit (a checkpoint takes as long as its data).
  Status call(ControlType t, const void* p, size_t n, std::vector<char>* reply, int timeout_ms = 10000) {
    return control_call(fd_, t, p, n, reply, timeout_ms);
  }

 private:
  int fd_ = -1;
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// JSON has no infinity or NaN: an unbounded rate-limiter difference prints
// as the string "inf" or "-inf", a NaN as null.
std::string num(double v) {
  if (std::isnan(v)) return "null";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

std::string shape_of(const Column& c) {
  std::string s = "[";
  for (uint32_t d = 0; d < c.rank && d < kMaxRank; ++d) s += (d ? ", " : "") + std::to_string(c.shape[d]);
  return s + "]";
}

std::string info_json(const TableInfoWire& w) {
  const TableSpec& s = w.spec;
  std::ostringstream o;
  o << "{\"name\": " << json_string(fixed_string(s.name, sizeof s.name)) << ", \"max_size\": " << s.capacity
    << ", \"size\": " << w.size << ", \"sampler\": " << json_string(selector_kind_name(static_cast<SelectorKind>(s.sampler)))
    << ", \"remover\": " << json_string(selector_kind_name(static_cast<SelectorKind>(s.remover)))
    << ", \"priority_exponent\": " << num(s.sampler_exponent) << ", \"max_times_sampled\": " << s.max_times_sampled
    << ", \"rate_limiter\": {\"samples_per_insert\": " << num(s.limiter.samples_per_insert)
    << ", \"min_size_to_sample\": " << s.limiter.min_size_to_sample << ", \"min_diff\": " << num(s.limiter.min_diff)
    << ", \"max_diff\": " << num(s.limiter.max_diff) << ", \"can_sample\": " << (w.can_sample ? "true" : "false")
    << ", \"can_insert\": " << (w.can_insert ? "true" : "false") << "}"
    << ", \"counters\": {\"inserts\": " << w.counters.inserts << ", \"samples\": " << w.counters.samples
    << ", \"deletes\": " << w.counters.deletes << ", \"updates\": " << w.stats.updates
    << ", \"evictions\": " << w.stats.evictions << ", \"expirations\": " << w.stats.expirations
    << ", \"stale\": " << w.stats.stale << ", \"rate_limited\": " << w.stats.rate_limited << "}"
    << ", \"bytes\": {\"raw\": " << w.stats.bytes_raw << ", \"stored\": " << w.stats.bytes_stored << "}"
    << ", \"priority\": {\"max\": " << num(w.max_priority) << ", \"min\": " << num(w.min_priority) << "}"
    << ", \"shards\": " << w.shards << ", \"shards_present\": " << w.shards_present
    << ", \"clients\": " << w.clients << ", \"columns\": [";
  for (uint32_t i = 0; i < s.num_columns && i < kMaxColumns; ++i)
    o << (i ? ", " : "") << "{\"name\": " << json_string(fixed_string(s.columns[i].name, kMaxColumnName))
      << ", \"dtype\": " << json_string(dtype_name(static_cast<DType>(s.columns[i].dtype)))
      << ", \"shape\": " << shape_of(s.columns[i])
      << ", \"compression\": " << json_string(codec_name(static_cast<Codec>(s.columns[i].codec)))
      << ", \"level\": " << s.columns[i].level << "}";
  o << "]}";
  return o.str();
}

void print_info(const TableInfoWire& w) {
  const TableSpec& s = w.spec;
  std::printf("table %s\n", fixed_string(s.name, sizeof s.name).c_str());
  std::printf("  size            %u / %llu items\n", w.size, static_cast<unsigned long long>(s.capacity));
  std::printf("  sampler         %s", selector_kind_name(static_cast<SelectorKind>(s.sampler)));
  if (static_cast<SelectorKind>(s.sampler) == SelectorKind::prioritized) std::printf(" (exponent %g)", s.sampler_exponent);
  std::printf("\n  remover         %s\n", selector_kind_name(static_cast<SelectorKind>(s.remover)));
  std::printf("  max sampled     %s\n", s.max_times_sampled ? std::to_string(s.max_times_sampled).c_str() : "unlimited");
  if (w.shards)
    std::printf("  shards          %u of %u present (a view: batches come from those)\n", w.shards_present, w.shards);
  if (w.size) std::printf("  priorities      %g .. %g\n", w.min_priority, w.max_priority);
  else std::printf("  priorities      none (no items)\n");
  std::printf("  rate limiter    samples/insert %g, min size %lld, diff [%g, %g]; can sample %s, can insert %s\n",
              s.limiter.samples_per_insert, static_cast<long long>(s.limiter.min_size_to_sample), s.limiter.min_diff,
              s.limiter.max_diff, w.can_sample ? "yes" : "no", w.can_insert ? "yes" : "no");
  std::printf("  counters        %lld inserts, %lld samples, %lld deletes (%llu evicted, %llu expired), %llu updates\n",
              static_cast<long long>(w.counters.inserts), static_cast<long long>(w.counters.samples),
              static_cast<long long>(w.counters.deletes), static_cast<unsigned long long>(w.stats.evictions),
              static_cast<unsigned long long>(w.stats.expirations), static_cast<unsigned long long>(w.stats.updates));
  std::printf("  chunk bytes     %llu raw, %llu stored", static_cast<unsigned long long>(w.stats.bytes_raw),
              static_cast<unsigned long long>(w.stats.bytes_stored));
  if (w.stats.bytes_raw) std::printf(" (%.1f%%)", 100.0 * double(w.stats.bytes_stored) / double(w.stats.bytes_raw));
  std::printf("\n  clients         %u\n  columns\n", w.clients);
  for (uint32_t i = 0; i < s.num_columns && i < kMaxColumns; ++i)
    std::printf("    %-20s %-8s %-12s %s\n", fixed_string(s.columns[i].name, kMaxColumnName).c_str(),
                dtype_name(static_cast<DType>(s.columns[i].dtype)), shape_of(s.columns[i]).c_str(),
                s.columns[i].codec ? (std::string(codec_name(static_cast<Codec>(s.columns[i].codec))) + " level " +
                                      std::to_string(s.columns[i].level))
                                         .c_str()
                                   : "");
}

Status name_payload(const std::string& name, NameRequest* n) {
  *n = NameRequest{};
  return copy_fixed(n->name, sizeof n->name, name, "table name");
}

// engramctl items: the listing (core/item_listing.hpp), with progress on
// stderr once it has taken a second, then the first `limit` items.
int print_items(Connection& c, const std::string& table, ItemOrder by, uint64_t limit, bool json) {
  std::vector<ListedItem> items;
  auto started = std::chrono::steady_clock::now();
  auto last_report = started;
  auto progress = [&](size_t listed, uint32_t done, uint32_t capacity) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_report < std::chrono::seconds(1)) return;
    last_report = now;
    std::fprintf(stderr, "engramctl: %zu items listed, %u of %u slots looked at\n", listed, done, capacity);
  };
  ListCall call = [&](const ItemsRequest& rq, std::vector<char>* reply) {
    return c.call(ControlType::list_items, &rq, sizeof rq, reply);
  };
  if (Status s = collect_items(call, table, by, &items, progress); !s.ok()) return fail(s.message());
  size_t n = static_cast<size_t>(std::min<uint64_t>(limit, items.size()));
  if (json) {
    std::printf("[");
    for (size_t i = 0; i < n; ++i) {
      const ListedItem& it = items[i];
      std::printf("%s{\"key\": %llu, \"priority\": %s, \"times_sampled\": %u, \"inserted\": %llu, \"steps\": %u}",
                  i ? ",\n " : "", (unsigned long long)it.key, num(it.priority).c_str(), it.times_sampled,
                  (unsigned long long)it.inserted_seq, it.num_steps);
    }
    std::printf("]\n");
    return 0;
  }
  std::printf("%-20s %14s %13s %20s %6s\n", "KEY", "PRIORITY", "TIMES_SAMPLED", "INSERTED", "STEPS");
  for (size_t i = 0; i < n; ++i) {
    const ListedItem& it = items[i];
    std::printf("%-20llu %14.6g %13u %20llu %6u\n", (unsigned long long)it.key, it.priority, it.times_sampled,
                (unsigned long long)it.inserted_seq, it.num_steps);
  }
  if (n < items.size()) std::fprintf(stderr, "engramctl: %zu of %zu items shown (--limit)\n", n, items.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket;
  std::vector<std::string> args;
  bool json = false;
  ItemOrder by = ItemOrder::insertion;
  uint64_t limit = UINT64_MAX;
  int32_t timeout_ms = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--version") {
      std::printf("engramctl %s\n", ENGRAM_VERSION_STRING);
      return 0;
    }
    if (a == "--json") json = true;
    else if (a == "--by") {
      std::string v = i + 1 < argc ? argv[++i] : "";
      if (v != "insertion" && v != "priority") return fail("--by takes insertion or priority, not '" + v + "'", 2);
      by = v == "priority" ? ItemOrder::priority : ItemOrder::insertion;
    } else if (a == "--limit") {
      std::string v = i + 1 < argc ? argv[++i] : "";
      char* end = nullptr;
      errno = 0;
      unsigned long long n = v.empty() || v[0] == '-' ? 0 : std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || v[0] == '-' || errno || *end || n == 0)
        return fail("--limit takes a count of items >= 1, not '" + v + "'", 2);
      limit = n;
    } else if (a == "--timeout-ms") {
      std::string v = i + 1 < argc ? argv[++i] : "";
      char* end = nullptr;
      errno = 0;
      long n = v.empty() ? -2 : std::strtol(v.c_str(), &end, 10);
      if (v.empty() || errno || *end || n < -1 || n > INT32_MAX)
        return fail("--timeout-ms takes milliseconds (or -1: no bound), not '" + v + "'", 2);
      timeout_ms = static_cast<int32_t>(n);
    } else if (a == "--socket") {
      if (i + 1 >= argc) return fail("--socket needs a path", 2);
      socket = argv[++i];
    } else args.push_back(a);
  }
  if (args.empty()) return fail(std::string("no command\n") + kUsage, 2);
  if (socket.empty())
    if (const char* env = std::getenv("ENGRAM_SOCKET"); env && *env) socket = env;
  if (socket.empty()) socket = kDefaultSocket;
  const std::string& cmd = args[0];
  if (cmd == "export" || cmd == "import") {
    if (args.size() != 3) return fail(cmd + " takes two arguments\n" + kUsage, 2);
    return cmd == "export" ? export_command(socket, args[1], args[2]) : import_command(socket, args[1], args[2], timeout_ms);
  }
  bool needs_table = cmd == "info" || cmd == "items" || cmd == "reset" || cmd == "drop" || cmd == "create-table";
  if (needs_table && args.size() != 2) return fail(cmd + " takes one argument\n" + kUsage, 2);
  if (!needs_table && args.size() != 1) return fail(cmd + " takes no argument\n" + kUsage, 2);
  if (cmd != "status" && cmd != "tables" && cmd != "checkpoint" && !needs_table)
    return fail("unknown command " + cmd + "\n" + kUsage, 2);

  // Parse before connecting, so a bad file fails the same with or without a server.
  TableSpec spec{};
  if (cmd == "create-table") {
    std::stringstream text;
    if (args[1] == "-") text << std::cin.rdbuf();
    else {
      FILE* f = std::fopen(args[1].c_str(), "r");
      if (!f) return fail("cannot read " + args[1] + ": " + std::strerror(errno));
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.write(buf, static_cast<std::streamsize>(n));
      std::fclose(f);
    }
    auto o = parse_table_snippet(text.str(), args[1] == "-" ? "<stdin>" : args[1]);
    if (!o.ok()) return fail(o.status().message());
    auto checked = Table::check(*o);
    if (!checked.ok()) return fail(checked.status().message());
    spec = to_spec(*checked);
  }

  Connection c;
  if (Status s = c.open(socket); !s.ok()) return fail(s.message());
  std::vector<char> reply;
  if (cmd == "status") {
    if (Status s = c.call(ControlType::status, nullptr, 0, &reply); !s.ok()) return fail(s.message());
    StatusReply st;
    std::vector<ClientStatus> each;
    if (reply.size() < sizeof st) return fail("the server's status has another size (another version?)");
    std::memcpy(&st, reply.data(), sizeof st);
    if (reply.size() != sizeof st + size_t{st.clients} * sizeof(ClientStatus))
      return fail("the server's status has another size (another version?)");
    each.resize(st.clients);
    if (!each.empty()) std::memcpy(each.data(), reply.data() + sizeof st, each.size() * sizeof(ClientStatus));
    st.num_classes = std::min<uint32_t>(st.num_classes, kArenaMaxClasses);
    // The peers' view (remote/), empty without [remote].
    std::vector<char> remote_reply;
    uint32_t as_json = json ? 1 : 0;
    if (Status s = c.call(ControlType::remote_status, &as_json, sizeof as_json, &remote_reply); !s.ok())
      return fail(s.message());
    std::string remote(remote_reply.begin(), remote_reply.end());
    if (json) {
      std::printf("{\"pid\": %llu, \"version\": %s, \"uptime_ms\": %llu, \"clients\": %u, \"tables\": %u, "
                  "\"arena_bytes\": %llu, \"arena_grow_to\": %llu, \"blocks\": {\"total\": %llu, \"free\": %llu, \"reserved\": %llu, \"sealed\": %llu}, "
                  "\"connections\": {\"open\": %u, \"max\": %u, \"max_per_uid\": %u, \"refused\": %llu}, "
                  "\"descriptors\": {\"open\": %u, \"limit\": %u}, "
                  "\"waiting_for_blocks\": {\"clients\": %u, \"block_size\": %llu}, \"classes\": [",
                  (unsigned long long)st.pid, json_string(fixed_string(st.version, sizeof st.version)).c_str(),
                  (unsigned long long)st.uptime_ms, st.clients, st.tables, (unsigned long long)st.arena_bytes,
                  (unsigned long long)st.arena_grow_to,
                  (unsigned long long)st.blocks_total, (unsigned long long)st.blocks_free,
                  (unsigned long long)st.blocks_reserved, (unsigned long long)st.blocks_sealed, st.connections,
                  st.max_connections, st.max_connections_per_uid, (unsigned long long)st.refused, st.fds_open,
                  st.fds_limit, st.waiting_for_blocks, (unsigned long long)st.waiting_block_size);
      for (uint32_t k = 0; k < st.num_classes; ++k)
        std::printf("%s{\"block_size\": %llu, \"total\": %u, \"free\": %u, \"reserved\": %u, \"sealed\": %u, "
                    "\"most\": %u}",
                    k ? ", " : "", (unsigned long long)st.classes[k].block_size, st.classes[k].total,
                    st.classes[k].free, st.classes[k].reserved, st.classes[k].sealed, st.classes[k].most);
      std::printf("], \"client_list\": [");
      for (size_t i = 0; i < each.size(); ++i)
        std::printf("%s{\"id\": %u, \"pid\": %u, \"uid\": %u, \"tables_open\": %u, \"reserved_blocks\": %llu}",
                    i ? ", " : "", each[i].id, each[i].pid, each[i].uid, each[i].channels,
                    (unsigned long long)each[i].reserved_blocks);
      std::printf("]%s%s}\n", remote.empty() ? "" : ", \"remote\": ", remote.c_str());
      return 0;
    }
    std::printf("engramd %s, pid %llu, up %.1f s, socket %s\n", fixed_string(st.version, sizeof st.version).c_str(),
                (unsigned long long)st.pid, st.uptime_ms / 1000.0, socket.c_str());
    std::printf("  clients      %u attached (this one included), %u connections of at most %u (%u per uid), "
                "%llu refused or timed out\n",
                st.clients, st.connections, st.max_connections, st.max_connections_per_uid,
                (unsigned long long)st.refused);
    std::printf("  descriptors  %u open of %u\n  tables       %u\n", st.fds_open, st.fds_limit, st.tables);
    std::printf("  arena        %.1f MiB",  st.arena_bytes / 1048576.0);
    if (st.arena_grow_to > st.arena_bytes) std::printf(" (grows on demand to %.1f MiB)", st.arena_grow_to / 1048576.0);
    std::printf(": %llu blocks, %llu free, %llu being written, %llu holding chunks\n",
                (unsigned long long)st.blocks_total, (unsigned long long)st.blocks_free,
                (unsigned long long)st.blocks_reserved, (unsigned long long)st.blocks_sealed);
    for (uint32_t k = 0; k < st.num_classes; ++k) {
      const auto& sc = st.classes[k];
      std::printf("    %9s %9u blocks, %9u free, %7u being written, %9u holding chunks",
                  size_text(sc.block_size).c_str(), sc.total, sc.free, sc.reserved, sc.sealed);
      if (sc.most > sc.total) std::printf(", may grow to %u", sc.most);
      std::printf("\n");
    }
    if (st.waiting_for_blocks)
      std::printf("  waiting      %u %s for arena blocks of %llu bytes (the class is full; see the log)\n",
                  st.waiting_for_blocks, st.waiting_for_blocks == 1 ? "client waits" : "clients wait",
                  (unsigned long long)st.waiting_block_size);
    std::fputs(remote.c_str(), stdout);
    if (!each.empty()) std::printf("  %8s %10s %10s %12s %16s\n", "CLIENT", "PID", "UID", "TABLES_OPEN", "RESERVED_BLOCKS");
    for (const ClientStatus& k : each)
      std::printf("  %8u %10u %10u %12u %16llu\n", k.id, k.pid, k.uid, k.channels, (unsigned long long)k.reserved_blocks);
    return 0;
  }
  if (cmd == "tables") {
    if (Status s = c.call(ControlType::list_tables, nullptr, 0, &reply); !s.ok()) return fail(s.message());
    if (reply.size() % sizeof(TableInfoWire) != 0) return fail("the server's table list has another size");
    size_t n = reply.size() / sizeof(TableInfoWire);
    std::vector<TableInfoWire> all(n);
    if (n) std::memcpy(all.data(), reply.data(), reply.size());
    if (json) {
      std::printf("[");
      for (size_t i = 0; i < n; ++i) std::printf("%s%s", i ? ", " : "", info_json(all[i]).c_str());
      std::printf("]\n");
      return 0;
    }
    std::printf("%-24s %12s %12s %-12s %12s %12s\n", "TABLE", "SIZE", "MAX_SIZE", "SAMPLER", "INSERTS", "SAMPLES");
    for (const TableInfoWire& w : all)
      std::printf("%-24s %12u %12llu %-12s %12lld %12lld\n", fixed_string(w.spec.name, sizeof w.spec.name).c_str(),
                  w.size, static_cast<unsigned long long>(w.spec.capacity),
                  selector_kind_name(static_cast<SelectorKind>(w.spec.sampler)),
                  static_cast<long long>(w.counters.inserts), static_cast<long long>(w.counters.samples));
    return 0;
  }
  if (cmd == "checkpoint") {
    std::fprintf(stderr, "engramctl: writing a checkpoint...\n");
    if (Status s = c.call(ControlType::checkpoint, nullptr, 0, &reply, -1); !s.ok()) return fail(s.message());
    std::printf("%s\n", std::string(reply.begin(), reply.end()).c_str());
    return 0;
  }
  if (cmd == "create-table") {
    if (Status s = c.call(ControlType::create_table, &spec, sizeof spec, nullptr); !s.ok()) return fail(s.message());
    std::printf("created table %s\n", fixed_string(spec.name, sizeof spec.name).c_str());
    return 0;
  }
  NameRequest n;
  if (Status s = name_payload(args[1], &n); !s.ok()) return fail(s.message(), 2);
  if (cmd == "items") return print_items(c, args[1], by, limit, json);
  ControlType t = cmd == "info" ? ControlType::table_info : cmd == "reset" ? ControlType::reset_table : ControlType::drop_table;
  if (Status s = c.call(t, &n, sizeof n, &reply); !s.ok()) return fail(s.message());
  if (cmd == "info") {
    TableInfoWire w;
    if (reply.size() != sizeof w) return fail("the server's table info has another size");
    std::memcpy(&w, reply.data(), sizeof w);
    if (json) std::printf("%s\n", info_json(w).c_str());
    else print_info(w);
    return 0;
  }
  std::printf("%s table %s\n", cmd == "reset" ? "reset" : "dropped", args[1].c_str());
  return 0;
}
