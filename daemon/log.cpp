#include "daemon/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>

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

}  // namespace engram
