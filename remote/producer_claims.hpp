// Which live Deliver stream speaks for each producer of each table.
//
// A producer is one sender's stream into one table (core/table.hpp,
// Delivery); its items are applied once by number, so two senders that
// claim one producer would have one's items answered as the other's
// duplicates. A stream claims its (table, producer) when it opens; a
// second live claim is a clash and is refused, unless it comes from the
// same sender process (the same incarnation, DeliverRequest.incarnation):
// that is the sender reconnecting, whose old stream this server has not
// yet seen end, and the newer claim takes over. A claim ends with its
// stream. Thread-safe: gRPC runs each stream's handler on its own thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/status.hpp"

namespace engram::remote {

class ProducerClaims {
 public:
  struct Claim {
    uint64_t incarnation;
    std::string sender, peer;  // the sender's [remote] name and address, for people
    uint64_t token;            // this claim, as against a newer one of the same sender
  };
  // Releases its claim when it goes (unless a newer one took over).
  class Held {
   public:
    Held() = default;
    Held(ProducerClaims* c, std::string table, uint64_t producer, uint64_t token)
        : claims_(c), table_(std::move(table)), producer_(producer), token_(token) {}
    Held(Held&& o) noexcept : claims_(std::exchange(o.claims_, nullptr)), table_(std::move(o.table_)), producer_(o.producer_), token_(o.token_) {}
    Held& operator=(Held&&) = delete;
    ~Held() {
      if (claims_) claims_->release(table_, producer_, token_);
    }

   private:
    ProducerClaims* claims_ = nullptr;
    std::string table_;
    uint64_t producer_ = 0, token_ = 0;
  };

  // The stream from `peer` claims (table, producer) for sender `sender`
  // of `incarnation` (0: a sender that does not say; it never clashes).
  // Errc::already_exists, naming both streams and what to change, when
  // another sender holds it.
  Result<Held> claim(const std::string& table, uint64_t producer, uint64_t incarnation, const std::string& sender,
                     const std::string& peer);

  uint64_t clashes() const;
  std::string last_clash() const;

 private:
  void release(const std::string& table, uint64_t producer, uint64_t token);

  mutable std::mutex mu_;
  std::map<std::pair<std::string, uint64_t>, Claim> live_;
  uint64_t next_token_ = 1;
  uint64_t clashes_ = 0;
  std::string last_clash_;
};

}  // namespace engram::remote
