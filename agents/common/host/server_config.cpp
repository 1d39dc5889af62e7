#include "agents/common/host/server_config.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>
#include <stdexcept>

namespace engram::agents {

namespace {

// A parameter block holds the version, the floats and the chunk's header
// (4 KiB is room to spare for both), rounded to a cache line.
uint64_t param_block_size(size_t params) { return (params * 4 + 4096 + 63) / 64 * 64; }

// Episodes' chunks are one step each (episodes.hpp): 512 bytes hold one.
constexpr ArenaClass kEpisodeClass{512, 120000};
// The parameter table keeps one item; 64 blocks leave room for the items
// that actors still read while newer ones are written.
constexpr uint64_t kParamBlocks = 64;

}  // namespace

std::string toml_string(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      q += '\\';
      q += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", c);
      q += u;
    } else {
      q += static_cast<char>(c);
    }
  }
  return q + "\"";
}

namespace {

const char* dtype_name(int32_t t) {
  static const char* names[] = {"",      "uint8", "int8",    "uint16",  "int16",   "uint32", "int32",
                                "uint64", "int64", "float16", "float32", "float64", "bool"};
  if (t < ENGRAM_UINT8 || t > ENGRAM_BOOL) throw std::invalid_argument("table_toml: a column of an unknown dtype");
  return names[t];
}

const char* selector_name(int32_t s) {
  static const char* names[] = {"", "uniform", "prioritized", "fifo", "lifo", "max_heap", "min_heap"};
  if (s < ENGRAM_UNIFORM || s > ENGRAM_MIN_HEAP) throw std::invalid_argument("table_toml: an unknown selector");
  return names[s];
}

}  // namespace

std::string arena_toml(ArenaClass chunks, size_t params) {
  // The server wants its classes by ascending block size, each size once:
  // a small network's parameter blocks may be smaller than the chunks.
  std::vector<ArenaClass> classes = {kEpisodeClass, chunks, {param_block_size(params), kParamBlocks}};
  std::sort(classes.begin(), classes.end(), [](ArenaClass a, ArenaClass b) { return a.block_size < b.block_size; });
  std::string s = "[arena]\nclasses = [";
  for (size_t i = 0; i < classes.size(); ++i) {
    if (i + 1 < classes.size() && classes[i + 1].block_size == classes[i].block_size) {
      classes[i + 1].count += classes[i].count;
      continue;
    }
    s += " { block_size = " + std::to_string(classes[i].block_size) + ", count = " + std::to_string(classes[i].count) +
         " },";
  }
  s.back() = ' ';
  return s + "]\n";
}

std::string remote_toml(const RunOptions& o, const std::string& name) {
  if (o.listen.empty() && o.upstream.empty()) return "";
  std::string r = "[remote]\n";
  if (!o.listen.empty()) r += "listen = " + toml_string(o.listen) + "\n";
  if (!name.empty()) r += "name = " + toml_string(name) + "\n";
  if (!o.tls_cert.empty())
    r += "tls_cert = " + toml_string(o.tls_cert) + "\ntls_key = " + toml_string(o.tls_key) + "\ntls_ca = " + toml_string(o.tls_ca) + "\n";
  if (o.insecure) r += "insecure = true\n";
  return r;
}

std::string table_toml(const api::TableOptions& t, const std::string& limiter, const std::string& extra) {
  char exponent[32];
  std::snprintf(exponent, sizeof exponent, "%.17g", t.priority_exponent);
  std::string s = "[[table]]\nname = " + toml_string(t.name) + "\nmax_size = " + std::to_string(t.max_size) +
                  "\nsampler = \"" + selector_name(t.sampler) + "\"\nremover = \"" + selector_name(t.remover) +
                  "\"\npriority_exponent = " + exponent + "\nmax_times_sampled = " +
                  std::to_string(t.max_times_sampled) + "\n";
  if (!limiter.empty()) s += "rate_limiter = " + limiter + "\n";
  s += extra;
  const engram_compression* codecs = t.columns.compression();
  for (uint32_t i = 0; i < t.columns.size(); ++i) {
    const engram_column& c = t.columns.data()[i];
    s += "[[table.column]]\nname = " + toml_string(t.columns.name(i)) + "\ndtype = \"" + dtype_name(c.dtype) + "\"\n";
    if (c.rank > 0) {
      s += "shape = [";
      for (uint32_t d = 0; d < c.rank; ++d) s += (d ? ", " : "") + std::to_string(c.shape[d]);
      s += "]\n";
    }
    if (codecs && codecs[i].codec != ENGRAM_CODEC_NONE)
      s += std::string("compression = \"") + (codecs[i].codec == ENGRAM_CODEC_ZSTD ? "zstd" : "delta_zstd") +
           "\"\nlevel = " + std::to_string(codecs[i].level) + "\n";
  }
  return s;
}

}  // namespace engram::agents
