// Who may use a server: its own user, root, and the members of one group.
// The socket's mode (0660, that group) is the first gate, enforced by the
// kernel; this is the second, checked at hello against the peer's
// credentials (SO_PEERCRED), so that a socket whose mode was widened by
// hand still admits no one else.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <string>

#include "core/status.hpp"

namespace engram {

class AccessControl {
 public:
  // `group` names the group whose members may connect; empty: the
  // server's own (under systemd, the unit's Group=). A group that does not
  // exist is an error that says how to fix it.
  static Result<AccessControl> for_group(const std::string& group);

  gid_t gid() const noexcept { return gid_; }
  const std::string& group_name() const noexcept { return name_; }
  // The server's own user (and root) always; others only as members of
  // the group, as the user database lists them now.
  bool permits(const ucred& peer) const;
  // What a refused client is told: who it is and how to be let in.
  std::string refusal(const ucred& peer) const;

 private:
  gid_t gid_ = static_cast<gid_t>(-1);
  std::string name_;
};

}  // namespace engram
