// Every C API call a test makes after including this header is checked
// against its man page: a call that returns a code its page's ERRORS list
// does not name fails the test, naming the function, the code and the
// message. The lists are the headers' Errors clauses, which
// scripts/gen-man3.py turns into both the pages and listed_errors.inc, so
// a page cannot promise less than the code does where a test goes.
// Include it after engram.h and server.h (their declarations must not
// meet the macros).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "engram/engram.h"
#include "engram/server.h"

namespace engram::test {

inline const std::map<std::string, std::set<int>>& listed_errors() {
  static const std::map<std::string, std::set<int>> table = {
#define ENGRAM_LISTED(fn, ...) {#fn, {__VA_ARGS__}},
#include "listed_errors.inc"
#undef ENGRAM_LISTED
  };
  return table;
}

// Every (function, code) a checked call returned in this process. Tests
// call from several threads (writers beside a sampler), so the set is
// only touched under its mutex.
struct ErrorsSeen {
  std::mutex mu;
  std::set<std::pair<std::string, int>> seen;
};
inline ErrorsSeen& errors_seen() {
  static ErrorsSeen s;
  return s;
}

// With $ENGRAM_ERRORS_SEEN_DIR set, the process leaves what it saw there
// (one "function code" line each, a file per process) for
// tests/errors_driven.py, which checks that the main functions' listed
// codes are each driven by some test.
class ErrorsSeenWriter : public ::testing::Environment {
 public:
  void TearDown() override {
    const char* dir = std::getenv("ENGRAM_ERRORS_SEEN_DIR");
    if (!dir || !*dir) return;
    std::ofstream out(std::string(dir) + "/" + std::to_string(::getpid()) + ".seen", std::ios::app);
    std::lock_guard<std::mutex> lock(errors_seen().mu);
    for (const auto& [fn, rc] : errors_seen().seen) out << fn << " " << rc << "\n";
  }
};
inline const bool kErrorsSeenWriter = (::testing::AddGlobalTestEnvironment(new ErrorsSeenWriter), true);

inline int listed(const char* fn, int rc) {
  if (rc == ENGRAM_OK) return rc;
  {
    std::lock_guard<std::mutex> lock(errors_seen().mu);
    errors_seen().seen.insert({fn, rc});
  }
  auto it = listed_errors().find(fn);
  if (it == listed_errors().end() || !it->second.count(rc))
    ADD_FAILURE() << fn << " returned " << engram_strerror(rc) << " (" << rc
                  << "), which its man page does not list; the message: " << engram_last_error();
  return rc;
}

}  // namespace engram::test

#include "listed_errors.inc"
