// What a handler of the peer service knows of its call, gRPC aside (so
// that a fuzzer can drive it), and how engram's errors become statuses.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <string>

namespace engram::remote {

struct PeerCall {
  std::string name;             // the peer, for the log
  std::function<bool()> gone;   // the peer went away, or this server stops
};

// A status for engram code `code` (ENGRAM_E_*) of a call on `what`, with
// engram_last_error()'s detail.
grpc::Status status_of(int code, const std::string& what);

// FAILED_PRECONDITION: this server's `table` has other columns than the
// peer's (`whose`: sender, follower), by their signature hashes.
grpc::Status other_columns(const std::string& table, const char* whose);

// INVALID_ARGUMENT: a field broke a rule, which `why` names.
inline grpc::Status bad_field(const std::string& why) { return {grpc::StatusCode::INVALID_ARGUMENT, why}; }

}  // namespace engram::remote
