#include "remote/peer_call.hpp"

#include "engram/engram.h"

namespace engram::remote {

grpc::Status status_of(int code, const std::string& what) {
  std::string msg = what + ": " + engram_last_error();
  switch (code) {
    case ENGRAM_E_NOT_FOUND: return {grpc::StatusCode::NOT_FOUND, msg};
    case ENGRAM_E_DISCONNECTED: return {grpc::StatusCode::UNAVAILABLE, msg + " (this server is stopping)"};
    case ENGRAM_E_LIMIT:
    case ENGRAM_E_NOMEM: return {grpc::StatusCode::RESOURCE_EXHAUSTED, msg};
    case ENGRAM_E_CORRUPT:
    case ENGRAM_E_INVALID:
    case ENGRAM_E_RANGE:
    case ENGRAM_E_PRIORITY: return {grpc::StatusCode::INVALID_ARGUMENT, msg};
    default: return {grpc::StatusCode::INTERNAL, msg};
  }
}

grpc::Status other_columns(const std::string& table, const char* whose) {
  return {grpc::StatusCode::FAILED_PRECONDITION,
          "table " + table + " has other columns than the " + whose +
              "'s table (signature hashes differ); give both tables the same columns, dtypes, shapes and compression"};
}

}  // namespace engram::remote
