// Errors as values. Core never throws on a path a client can trigger; every
// failure is a Status with a code and a message that says what was wrong and
// how to fix it. The codes are finer than the C ABI's: several map to one
// ENGRAM_E_* (capi/errors.cpp, to_code), and the message tells them apart.
#pragma once

#include <string>
#include <utility>

namespace engram {

enum class Errc : int {
  ok = 0,
  invalid_argument,      // generic bad parameter (message says which)
  invalid_priority,      // NaN, infinite or negative priority
  invalid_exponent,      // non-finite or negative priority exponent
  invalid_capacity,      // zero or too large a capacity
  invalid_rate_limiter,  // inconsistent rate limiter parameters
  stale_key,             // key's slot was reused or deleted since it was issued
  unknown_key,           // key never named a slot of this table
  rate_limited,          // the rate limiter does not allow the operation now
  empty,                 // nothing to sample / pop
  full,                  // ring or free list has no room
  out_of_memory,         // arena has no free block of the requested class
  double_free,           // block freed twice, or freed by a client that does not own it
  stale_reference,       // block reference whose generation no longer matches
  layout_mismatch,       // shared segment written by another layout version
  corrupt,               // shared memory failed validation
  system,                // an OS call failed (message has errno text)
  timeout,
  not_found,             // no table (or other named thing) of that name
  already_exists,        // a table of that name exists
  permission_denied,     // the peer's credentials do not allow it
  disconnected,          // the server went away; reconnect
  signature_mismatch,    // columns (count, dtype, shape) differ from the table's
  closed,                // the handle's table was dropped or its channel closed
  interrupted,           // another thread or a signal handler interrupted the wait
  limit,                 // a limit the server sets per client or per user (the message names it)
  arena_exhausted,       // a class has no free block, and no table will free one unless a client deletes items
};

const char* errc_name(Errc c) noexcept;

// A double as a message shows it (%g): std::to_string prints -1e-300 as
// -0.000000 and DBL_MAX with 309 digits.
std::string number_text(double v);

class Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const noexcept { return code_ == Errc::ok; }
  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  std::string to_string() const;

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

// A value or a Status; deliberately tiny (std::expected is C++23).
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const noexcept { return status_.ok(); }
  const Status& status() const noexcept { return status_; }
  T& value() & { return value_; }
  const T& value() const& { return value_; }
  T&& value() && { return std::move(value_); }
  T* operator->() { return &value_; }
  const T* operator->() const { return &value_; }
  T& operator*() { return value_; }

 private:
  T value_{};
  Status status_;
};

}  // namespace engram
