// Internal side of ember/profiler.h: the realization code records spans through Span, which does
// nothing (one relaxed atomic load) while the profiler is off. On a device that computes apart
// from the host, a span's launches are timed on the device too (runtime/device_timing.h).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ember/profiler.h"
#include "runtime/device_timing.h"

namespace ember::trace {

bool enabled();
int64_t now_ns();
// Adds a record; `describe` fills name, ops, where and device (called only when recording).
// `device_calls`: the launches made in it that their device times (profiler_stop then gives
// the record the device's times).
void record(int64_t start_ns, int64_t end_ns, const std::function<void(KernelRecord&)>& describe,
            std::vector<TimedCall> device_calls = {});

// Times its scope; `describe` runs only when the profiler is on.
template <class Describe>
class Span {
 public:
  explicit Span(Describe describe) : describe_(std::move(describe)), on_(enabled()) {
    if (on_) {
      timing_.emplace();
      start_ = now_ns();
    }
  }
  ~Span() {
    if (on_) record(start_, now_ns(), describe_, std::move(timing_->calls));
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Describe describe_;
  bool on_;
  std::optional<TimingScope> timing_;
  int64_t start_ = 0;
};

}  // namespace ember::trace
