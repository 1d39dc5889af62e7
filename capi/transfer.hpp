// What engram_table_export and engram_table_import share: their options,
// and how a long transfer reports progress and stops.
#pragma once

#include <cstdint>

#include "capi/client.hpp"
#include "core/futex.hpp"

namespace engram {

// engram/format of an export (engram-export(5)): written, and the one
// version an import reads.
inline constexpr uint32_t kExportFormat = 1;

// The caller's options (NULL: defaults), checked against struct_size.
Status transfer_options(const engram_transfer_options* o, engram_transfer_options* out);

// Between pieces of work: the caller's progress callback about once a
// second (and at the end), and a stop when the callback or
// engram_client_interrupt asks for one.
class TransferClock {
 public:
  TransferClock(engram_client* c, const engram_transfer_options& o, uint64_t total) : c_(c), o_(o), total_(total) {}
  Status tick(uint64_t done, bool last = false) {
    int64_t now = monotonic_ns();
    if (c_->take_interrupt()) return {Errc::interrupted, "engram_client_interrupt stopped the transfer"};
    if (o_.progress && (last || now - reported_ns_ >= 1'000'000'000)) {
      reported_ns_ = now;
      if (o_.progress(o_.progress_ctx, done, total_) != 0)
        return {Errc::interrupted, "the progress callback stopped the transfer"};
    }
    return Status::Ok();
  }

 private:
  engram_client* c_;
  engram_transfer_options o_;
  uint64_t total_;
  int64_t reported_ns_ = monotonic_ns();
};

}  // namespace engram
