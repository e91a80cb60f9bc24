// Device timing for the profiler (device_timing.h), and the Backend calls behind it.
#include "runtime/device_timing.h"

#include <atomic>
#include <mutex>
#include <utility>

#include "runtime/registry.h"

namespace ember {

namespace {
thread_local TimingScope* t_scope = nullptr;
std::atomic<bool> g_wanted{false};
std::mutex g_mutex;  // guards g_devices
std::vector<std::pair<Backend*, int>> g_devices;  // devices whose timing a backend turned on
}  // namespace

TimingScope::TimingScope() : previous_(t_scope) { t_scope = this; }
TimingScope::~TimingScope() { t_scope = previous_; }
TimingScope* TimingScope::current() { return t_scope; }

bool device_timing_wanted() { return g_wanted.load(std::memory_order_relaxed); }

void register_timed_device(Backend* backend, int device) {
  std::lock_guard lock(g_mutex);
  for (const auto& d : g_devices)
    if (d.first == backend && d.second == device) return;
  g_devices.emplace_back(backend, device);
}

void start_device_timing() {
  std::vector<std::pair<Backend*, int>> devices;
  {
    std::lock_guard lock(g_mutex);
    devices = g_devices;
  }
  for (const auto& [backend, device] : devices) backend->take_timings(device);  // a stale recording's
  g_wanted.store(true, std::memory_order_relaxed);
}

std::vector<DeviceTimings> stop_device_timing() {
  g_wanted.store(false, std::memory_order_relaxed);
  std::vector<std::pair<Backend*, int>> devices;
  {
    std::lock_guard lock(g_mutex);
    devices = std::move(g_devices);
    g_devices.clear();
  }
  std::vector<DeviceTimings> out;
  for (const auto& [backend, device] : devices) {
    out.push_back({backend, device, backend->take_timings(device)});
    backend->set_timing(device, false);
  }
  return out;
}

// ---- Backend ------------------------------------------------------------------------------

bool Backend::set_timing(int device, bool on) {
  if (device < 0 || device >= device_states_ || !table_.queue_set_timing || !table_.queue_take_timings ||
      !is_async(device))
    return false;
  ember_queue q = queue(device);  // before the lock: creating it takes the lock too
  std::lock_guard lock(device_mutex_);
  DeviceState& d = devices_[device];
  const int state = d.timing.load(std::memory_order_relaxed);
  if (state == kTimingUnsupported) return false;
  if ((state == kTimingOn) == on) return on;
  ember_status st{};
  if (table_.queue_set_timing(q, on ? 1 : 0, &st) != EMBER_OK) {
    // The device cannot time its work: the profiler keeps the host's times for it.
    d.timing.store(kTimingUnsupported, std::memory_order_relaxed);
    return false;
  }
  d.timing.store(on ? kTimingOn : kTimingOff, std::memory_order_release);
  if (on) register_timed_device(this, device);
  return on;
}

std::vector<ember_timing> Backend::take_timings(int device) {
  std::vector<ember_timing> out;
  if (!table_.queue_take_timings || device < 0 || device >= device_states_ ||
      !devices_[device].queue.load(std::memory_order_acquire))
    return out;
  ember_timing batch[256];
  for (;;) {
    const int32_t n = table_.queue_take_timings(queue(device), batch, 256);
    out.insert(out.end(), batch, batch + std::max(n, 0));
    if (n < 256) return out;
  }
}

uint64_t Backend::timed_tag_slow(int device, uint64_t tag) {
  TimingScope* scope = TimingScope::current();
  if (!scope || device < 0 || device >= device_states_) return tag;
  if (devices_[device].timing.load(std::memory_order_acquire) != kTimingOn && !set_timing(device, true)) return tag;
  // A tag of its own, apart from the checks' (settle treats an error with it as untagged).
  if (tag == 0) tag = kTimingTagBit | next_timing_tag_.fetch_add(1, std::memory_order_relaxed);
  scope->calls.push_back({this, device, tag});
  return tag;
}

}  // namespace ember
