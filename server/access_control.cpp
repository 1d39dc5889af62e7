#include "server/access_control.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <vector>

namespace engram {

Result<AccessControl> AccessControl::for_group(const std::string& group) {
  AccessControl a;
  if (!group.empty()) {
    struct group* g = ::getgrnam(group.c_str());
    if (!g) return Status{Errc::invalid_argument, "group \"" + group + "\" does not exist; create it or change `group`"};
    a.gid_ = g->gr_gid;
    a.name_ = group;
  } else {
    a.gid_ = ::getegid();
    struct group* g = ::getgrgid(a.gid_);
    a.name_ = g ? g->gr_name : std::to_string(a.gid_);
  }
  return a;
}

bool AccessControl::permits(const ucred& cr) const {
  if (cr.uid == 0 || cr.uid == ::geteuid()) return true;
  if (cr.gid == gid_) return true;
  passwd* pw = ::getpwuid(cr.uid);
  if (!pw) return false;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (::getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i)
    if (groups[static_cast<size_t>(i)] == gid_) return true;
  return false;
}

std::string AccessControl::refusal(const ucred& cr) const {
  return "uid " + std::to_string(cr.uid) + " may not use this server; clients must be in group " + name_ +
         ": sudo usermod -aG " + name_ + " \"$USER\", then log in again";
}

}  // namespace engram
