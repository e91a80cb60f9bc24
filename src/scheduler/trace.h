// Internal side of ember/profiler.h: the realization code records spans through TraceSpan, which
// does nothing (one relaxed atomic load) while the profiler is off.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "ember/profiler.h"

namespace ember::trace {

bool enabled();
int64_t now_ns();
// Adds a record; `describe` fills name, ops, where and device (called only when recording).
void record(int64_t start_ns, int64_t end_ns, const std::function<void(KernelRecord&)>& describe);

// Times its scope; `describe` runs only when the profiler is on.
template <class Describe>
class Span {
 public:
  explicit Span(Describe describe) : describe_(std::move(describe)), on_(enabled()) {
    if (on_) start_ = now_ns();
  }
  ~Span() {
    if (on_) record(start_, now_ns(), describe_);
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Describe describe_;
  bool on_;
  int64_t start_ = 0;
};

}  // namespace ember::trace
