// Who this server is among its peers: the name its upstream streams give
// (one producer per name and table, remote/upstream_link.hpp).
//
// Two senders of one name share producers, and the receiver would take
// one's items for the other's (a duplicate is anything at or below a
// producer's mark). So the default is unique per installation: the host
// name, for people, and an id drawn at random at the first start and kept
// in the state directory (RemoteConfig::state_dir, the checkpoint
// directory), so that a restart keeps its producers and their marks. With
// no state directory the id is drawn anew at every start (nothing of the
// last start is resent then: its items were lost with its memory). A
// machine restored from another's backup has the other's id: while both
// deliver, the receiver refuses the second stream as a clash, naming the
// file to remove. [remote] name, when set, is the name as given.
#pragma once

#include <string>

#include "server/config.hpp"

namespace engram::remote {

// The file in the state directory that holds the id (16 hex digits).
inline constexpr const char* kInstanceIdFile = "instance-id";

struct Identity {
  std::string name;  // what producers hash: [remote] name, or HOST/ID
  std::string note;  // for the log: where the id came from
};

// c.name if set; else HOST/ID, ID read from or made in c.state_dir (or
// drawn for this start, said in note, if there is none or it cannot be
// written). A damaged id file is replaced, and said.
Identity identity_of(const RemoteConfig& c);

// A random nonzero 64-bit number (getrandom(2)).
uint64_t random_u64();

}  // namespace engram::remote
