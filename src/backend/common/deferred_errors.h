// The deferred errors of a plugin's queue (abi.h, "Errors"): one per failing call, oldest first,
// each returned once by a synchronize. Past `max` kept errors the newest kept one is flagged
// EMBER_STATUS_ERRORS_LOST and later ones are dropped. Not locked: the queue's own lock guards it.
// Used by the host queue (host_queue.h), Vulkan and CUDA.
#pragma once

#include <cstddef>
#include <deque>

#include "backend/abi.h"

namespace ember::plugin {

class DeferredErrors {
 public:
  explicit DeferredErrors(size_t max = 4096) : max_(max) {}
  void set_max(size_t max) { max_ = max; }

  void add(const ember_status& s) {
    if (list_.size() < max_ || list_.empty()) list_.push_back(s);
    else list_.back().reserved |= EMBER_STATUS_ERRORS_LOST;
  }
  // Returns (and forgets) the oldest one; EMBER_OK when there is none.
  int32_t take(ember_status* st) {
    if (list_.empty()) return EMBER_OK;
    const ember_status oldest = list_.front();
    list_.pop_front();
    if (st) *st = oldest;
    return oldest.code;
  }
  bool empty() const { return list_.empty(); }

 private:
  size_t max_;
  std::deque<ember_status> list_;
};

}  // namespace ember::plugin
