// Device timing for the profiler (ember/profiler.h). On a device that computes apart from the
// host (a GPU, the asynchronous test device), the host's time around a launch is only the time
// to enqueue it. While the profiler runs, the backend gives every launch on such a device a tag
// and asks the plugin to time the tagged calls on the device (abi.h queue_set_timing); the
// profiler's span around the launch (scheduler/trace.h) opens a TimingScope that collects those
// tags, and profiler_stop replaces the span's host times with the device's.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/abi.h"

namespace ember {

class Backend;

// One launch timed on a device: `tag` finds its record among the device's timings.
struct TimedCall {
  Backend* backend = nullptr;
  int device = 0;
  uint64_t tag = 0;
};

// Collects the timed launches made on this thread while it lives (the innermost scope).
class TimingScope {
 public:
  TimingScope();
  ~TimingScope();
  TimingScope(const TimingScope&) = delete;
  TimingScope& operator=(const TimingScope&) = delete;
  static TimingScope* current();
  std::vector<TimedCall> calls;

 private:
  TimingScope* previous_;
};

// Whether launches should be timed on their devices now (a relaxed load: every launch asks).
bool device_timing_wanted();
// From now on, launches on devices that can time their work are timed there (profiler_start);
// records left from an earlier recording are dropped.
void start_device_timing();
// The timing records of every device that timed work since start_device_timing, and timing
// turned off on them. Call after synchronize(), so that every timed call's record is there.
struct DeviceTimings {
  Backend* backend = nullptr;
  int device = 0;
  std::vector<ember_timing> timings;
};
std::vector<DeviceTimings> stop_device_timing();
// Backend: a device whose timing it turned on, for stop_device_timing.
void register_timed_device(Backend* backend, int device);

}  // namespace ember
