#include "server/peer_address.hpp"

#include <arpa/inet.h>

#include <cctype>

namespace engram {
namespace {

Status bad(std::string_view s, const std::string& why) {
  return {Errc::invalid_argument, "\"" + std::string(s) + "\" is not HOST:PORT (" + why +
                                      "); write e.g. 127.0.0.1:7000, [::1]:7000 or learner.example:7000"};
}

bool loopback_host(const std::string& h) {
  if (h == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return ::inet_pton(AF_INET6, h.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace

std::string PeerAddress::text() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<PeerAddress> parse_peer_address(std::string_view s, bool any_port) {
  size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return bad(s, "no port");
  std::string_view host = s.substr(0, colon), port = s.substr(colon + 1);
  PeerAddress a;
  if (!host.empty() && host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad(s, "an IPv6 address needs both brackets");
    a.host = std::string(host.substr(1, host.size() - 2));
    in6_addr v6{};
    if (::inet_pton(AF_INET6, a.host.c_str(), &v6) != 1) return bad(s, a.host + " is not an IPv6 address");
  } else {
    if (host.empty()) return bad(s, "no host");
    if (host.find(':') != std::string_view::npos) return bad(s, "an IPv6 address goes in brackets");
    for (char c : host)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
        return bad(s, "the host has a character a host name cannot have");
    a.host = std::string(host);
  }
  if (port.empty() || port.size() > 5) return bad(s, "the port must be a number, 1 to 65535");
  uint32_t p = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad(s, "the port must be a number, 1 to 65535");
    p = p * 10 + static_cast<uint32_t>(c - '0');
  }
  if (p > 65535 || (p == 0 && !any_port))
    return bad(s, any_port ? "the port must be 0 (any free one) to 65535" : "the port must be 1 to 65535");
  a.port = static_cast<uint16_t>(p);
  a.loopback = loopback_host(a.host);
  return a;
}

}  // namespace engram
