// Names of tables and columns. They reach file names (checkpoints), log
// lines and other clients' messages, so they are restricted to a set that
// is safe in all three: ASCII letters, digits and `_ . : -`, at least one
// byte. Everything else is refused with a message that states the rule,
// instead of being escaped in some places and forgotten in others.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace engram {

inline constexpr char kNameRule[] = "letters, digits, '_', '.', ':' and '-'";

// Is c allowed in a name?
constexpr bool name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == ':' || c == '-';
}

// 1..max_bytes bytes of name_char; else Errc::invalid_argument naming
// `what` ("table name", "column 2's name"), quoting the name escaped, and
// stating the rule.
Status validate_name(std::string_view name, size_t max_bytes, const char* what);

// s with every byte outside printable ASCII written as \xNN (and '\' as
// \\): for text that came from a client and goes into a log line or a
// message, where a newline could forge a line of its own.
std::string escaped(std::string_view s);

}  // namespace engram
