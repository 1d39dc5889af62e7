#include "remote/identity.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "core/durable_file.hpp"

namespace engram::remote {

uint64_t random_u64() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = std::random_device{}() * 0x9e3779b97f4a7c15ULL;
  return v ? v : 1;
}

namespace {

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

bool valid_id(const std::string& s) {
  if (s.size() != 16) return false;
  for (char ch : s)
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  return true;
}

std::string host_name() {
  char host[256] = {};
  return ::gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "engramd";
}

}  // namespace

Identity identity_of(const RemoteConfig& c) {
  if (!c.name.empty()) return {c.name, "[remote] name"};
  const std::string host = host_name();
  if (c.state_dir.empty()) {
    return {host + "/" + hex(random_u64()),
            "drawn for this start: no [checkpoint] dir to keep it in, so a restart is a new producer"};
  }
  const std::string path = c.state_dir + "/" + kInstanceIdFile;
  std::string note = "kept in " + path;
  {
    std::ifstream in(path);
    std::string id;
    if (in && std::getline(in, id)) {
      if (valid_id(id)) return {host + "/" + id, note};
      note = "made anew in " + path + " (what it held was no id)";
    }
  }
  std::string id = hex(random_u64());
  std::string text = id + "\n";
  DurableFile f;
  Status s = f.create(path, ".tmp");
  if (s.ok()) s = f.write(text.data(), text.size());
  if (s.ok()) s = f.commit();
  if (!s.ok()) return {host + "/" + id, "drawn for this start (" + path + ": " + s.message() + ")"};
  return {host + "/" + id, note};
}

}  // namespace engram::remote
