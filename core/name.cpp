#include "core/name.hpp"

namespace engram {

std::string escaped(std::string_view s) {
  static const char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c >= 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

Status validate_name(std::string_view name, size_t max_bytes, const char* what) {
  std::string w(what);
  if (name.empty()) return {Errc::invalid_argument, w + " is empty; use 1.." + std::to_string(max_bytes) + " " + kNameRule};
  if (name.size() > max_bytes)
    return {Errc::invalid_argument, w + " \"" + escaped(name.substr(0, 80)) + (name.size() > 80 ? "..." : "") + "\" is " +
                                        std::to_string(name.size()) + " bytes long; at most " +
                                        std::to_string(max_bytes) + " are allowed"};
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i]))
      return {Errc::invalid_argument, w + " \"" + escaped(name) + "\" has a byte not allowed in names (at " +
                                          std::to_string(i) + "); use only " + kNameRule};
  return Status::Ok();
}

}  // namespace engram
