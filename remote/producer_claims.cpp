#include "remote/producer_claims.hpp"

#include "remote/identity.hpp"

namespace engram::remote {

Result<ProducerClaims::Held> ProducerClaims::claim(const std::string& table, uint64_t producer, uint64_t incarnation,
                                                   const std::string& sender, const std::string& peer) {
  std::lock_guard lock(mu_);
  auto key = std::make_pair(table, producer);
  auto it = live_.find(key);
  if (it != live_.end() && incarnation != 0 && it->second.incarnation != 0 && it->second.incarnation != incarnation) {
    ++clashes_;
    const Claim& c = it->second;
    last_clash_ = "producer " + std::to_string(producer) + " of table " + table + " is already delivering from " +
                  c.peer + " (sender '" + c.sender + "'), and a second stream from " + peer + " (sender '" + sender +
                  "') claims it too: two senders share one [remote] name, and one's items would be taken for the "
                  "other's duplicates. Give each sender its own [remote] name (or leave name out: the default is "
                  "unique per installation); a machine restored from another's backup keeps the other's id: remove "
                  "its [checkpoint] dir's " +
                  kInstanceIdFile + " and restart it";
    return Status{Errc::already_exists, last_clash_};
  }
  uint64_t token = next_token_++;
  live_[key] = Claim{incarnation, sender, peer, token};  // a reconnect of the same sender takes over
  return Held(this, table, producer, token);
}

void ProducerClaims::release(const std::string& table, uint64_t producer, uint64_t token) {
  std::lock_guard lock(mu_);
  auto it = live_.find(std::make_pair(table, producer));
  if (it != live_.end() && it->second.token == token) live_.erase(it);
}

uint64_t ProducerClaims::clashes() const {
  std::lock_guard lock(mu_);
  return clashes_;
}

std::string ProducerClaims::last_clash() const {
  std::lock_guard lock(mu_);
  return last_clash_;
}

}  // namespace engram::remote
