// The server's log: one line per event on stderr (the journal, under
// systemd), prefixed with a level. Thread-safe; lines never interleave.
#pragma once

#include <string>

namespace engram {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

void set_log_level(LogLevel level) noexcept;
void log_line(LogLevel level, const std::string& line);
inline void log_info(const std::string& s) { log_line(LogLevel::info, s); }
inline void log_warn(const std::string& s) { log_line(LogLevel::warn, s); }
inline void log_error(const std::string& s) { log_line(LogLevel::error, s); }

}  // namespace engram
