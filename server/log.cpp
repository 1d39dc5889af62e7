#include "server/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "core/futex.hpp"
#include "core/name.hpp"

namespace engram {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::info)};
}

void set_log_level(LogLevel level) noexcept { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

void log_line(LogLevel level, const std::string& line) {
  if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
  // <N> prefixes are syslog priorities, which journald understands on stderr.
  static const char* const prefix[] = {"<7>debug: ", "<6>", "<4>warning: ", "<3>error: "};
  const char* p = prefix[static_cast<int>(level)];
  // Escaped: a line may quote what a client sent (names, paths), and a
  // newline in it would start a line of its own, with a priority of its own.
  std::string text = escaped(line);
  std::string out = isatty(STDERR_FILENO) ? std::string("engramd: ") + (p + 3) + text + "\n"
                                          : std::string(p, 3) + "engramd: " + (p + 3) + text + "\n";
  // One write per line: atomic for lines under PIPE_BUF, never interleaved.
  ssize_t n = ::write(STDERR_FILENO, out.data(), out.size());
  (void)n;
}

void RepeatedLog::note(const std::string& line) {
  if (line == last_) {
    ++repeats_;
    tick();
    return;
  }
  tick(true);
  log_line(level_, line);
  last_ = line;
  since_ns_ = monotonic_ns();
}

void RepeatedLog::tick(bool now) {
  if (repeats_ == 0 || (!now && monotonic_ns() - since_ns_ < kRepeatSummaryNs)) return;
  double secs = double(monotonic_ns() - since_ns_) / 1e9;
  char span[32];
  std::snprintf(span, sizeof span, "%.1f", secs);
  log_line(level_, last_ + " (" + (repeats_ == 1 ? std::string("once more") : std::to_string(repeats_) + " more times") +
                       " in " + span + " s)");
  repeats_ = 0;
  since_ns_ = monotonic_ns();
}

int64_t RepeatedLog::due_in_ns() const {
  if (repeats_ == 0) return -1;
  int64_t left = since_ns_ + kRepeatSummaryNs - monotonic_ns();
  return left < 0 ? 0 : left;
}

}  // namespace engram
