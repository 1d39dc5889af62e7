// Small integer ids (table ids, arena client ids), handed out lowest first
// so that logs stay readable. Used by the control thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace engram {

class IdPool {
 public:
  IdPool(uint32_t first, uint32_t end) {
    for (uint32_t i = end; i-- > first;) free_.push_back(i);
  }
  Result<uint32_t> take(const char* what) {
    if (free_.empty()) return Status{Errc::full, std::string("no free ") + what + " id left"};
    uint32_t id = free_.back();
    free_.pop_back();
    return id;
  }
  void give(uint32_t id) { free_.push_back(id); }

 private:
  std::vector<uint32_t> free_;
};

}  // namespace engram
