// The server's log: one line per event on stderr (the journal, under
// systemd), prefixed with a level. Thread-safe; lines never interleave.
#pragma once

#include <cstdint>
#include <string>

namespace engram {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

void set_log_level(LogLevel level) noexcept;
void log_line(LogLevel level, const std::string& line);
inline void log_info(const std::string& s) { log_line(LogLevel::info, s); }
inline void log_warn(const std::string& s) { log_line(LogLevel::warn, s); }
inline void log_error(const std::string& s) { log_line(LogLevel::error, s); }

// A line that can repeat as fast as a loop turns (accept failing for want
// of descriptors, a flood refused): the first is logged at once, repeats
// are counted, and the count is logged in one line when another line comes,
// or at tick() once kRepeatSummaryNs has passed. One owner thread.
class RepeatedLog {
 public:
  static constexpr int64_t kRepeatSummaryNs = 10'000'000'000;
  explicit RepeatedLog(LogLevel level = LogLevel::warn) : level_(level) {}
  ~RepeatedLog() { tick(true); }
  void note(const std::string& line);
  // Logs the count of repeats if the period is over (or `now`).
  void tick(bool now = false);
  // Nanoseconds until tick() has a count to log; -1 if it has none.
  int64_t due_in_ns() const;

 private:
  LogLevel level_;
  std::string last_;
  uint64_t repeats_ = 0;
  int64_t since_ns_ = 0;
};

}  // namespace engram
