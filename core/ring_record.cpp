#include "core/ring_record.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace engram {

const char* request_op_name(uint32_t op) noexcept {
  switch (static_cast<RequestOp>(op)) {
    case RequestOp::insert: return "insert";
    case RequestOp::sample: return "sample";
    case RequestOp::release: return "release";
    case RequestOp::drop: return "drop";
    case RequestOp::update: return "update";
    case RequestOp::remove: return "remove";
  }
  return "unknown";
}

Status check_request(const RequestRecord& r, uint32_t max_batch) noexcept {
  auto count_in = [&](uint32_t lo, uint32_t hi) -> Status {
    if (r.count >= lo && r.count <= hi) return Status::Ok();
    return {Errc::invalid_argument, std::string(request_op_name(r.op)) + " request with count " +
                                        std::to_string(r.count) + ", allowed " + std::to_string(lo) + ".." +
                                        std::to_string(hi)};
  };
  switch (static_cast<RequestOp>(r.op)) {
    case RequestOp::insert: return count_in(1, kRecordRefs);
    case RequestOp::sample: return count_in(1, max_batch);
    case RequestOp::release: return count_in(0, 0);
    case RequestOp::drop: return count_in(1, kRecordKeys);
    case RequestOp::update: return count_in(1, kRecordUpdates);
    case RequestOp::remove: return count_in(1, kRecordKeys);
  }
  return {Errc::invalid_argument, "unknown request op " + std::to_string(r.op)};
}

ResponseRecord error_response(const RequestRecord& r, const Status& s) noexcept {
  ResponseRecord out{};
  out.op = r.op;
  out.id = r.id;
  out.status = static_cast<int32_t>(s.code());
  size_t n = std::min(s.message().size(), sizeof out.payload.message - 1);
  std::memcpy(out.payload.message, s.message().data(), n);
  out.payload.message[n] = '\0';
  return out;
}

Status response_status(const ResponseRecord& r) {
  if (r.status == 0) return Status::Ok();
  return {static_cast<Errc>(r.status), std::string(r.payload.message, strnlen(r.payload.message, sizeof r.payload.message))};
}

}  // namespace engram
