// Device: where a tensor's data lives and its kernels run. A value type (kind + index); the
// backend behind each kind is a plugin loaded at run time (see docs/backends.md).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace ember {

// The well-known kinds have names here; the set is open: a plugin file libember_backend_<name>.so
// in a plugin folder is a kind too, with the next free value, found by Device::parse("<name>")
// and available_devices() (src/core/device_kinds.h). Device::str() prints its name.
enum class DeviceKind : uint8_t { Cpu, Reference, Vulkan, Cuda };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;

  static Device cpu() { return {DeviceKind::Cpu, 0}; }
  // The scalar reference interpreter: slow, simple, the oracle that tests compare against.
  static Device reference() { return {DeviceKind::Reference, 0}; }
  static Device vulkan(int i = 0) { return {DeviceKind::Vulkan, i}; }
  static Device cuda(int i = 0) { return {DeviceKind::Cuda, i}; }

  std::string str() const;
  // True when the backend plugin for this device loads and has a device with this index.
  bool available() const;
  // Parses "cpu", "reference", "vulkan:1", "cuda", or "<name>:N" for any plugin file
  // libember_backend_<name>.so in a plugin folder; throws ember::Error naming the kinds found.
  static Device parse(const std::string& text);

  friend bool operator==(const Device&, const Device&) = default;
};

// Prints str(): std::cout << x.device() shows cpu, vulkan:1 or cuda:0.
std::ostream& operator<<(std::ostream& os, const Device& device);

// Devices whose plugin loaded: the well-known kinds first, then discovered plugins by name.
std::vector<Device> available_devices();

// Waits until all work queued on the device (or on every device) has run. Reading values does
// this implicitly for what it reads; eval() does not wait.
void synchronize(Device device);
void synchronize();

// Memory statistics of one device, in bytes: what tensors hold now, the most they held since
// the last reset, and what an allocator keeps cached for reuse.
struct MemoryStats {
  int64_t live_bytes = 0;
  int64_t peak_bytes = 0;
  int64_t cached_bytes = 0;
  int64_t live_buffers = 0;
};
// Synchronizes the device first, so the numbers include all work submitted so far.
MemoryStats memory_stats(Device device = Device::cpu());
void reset_peak_memory(Device device = Device::cpu());
// Freed buffers stay cached per device for reuse (EMBER_CACHE_BYTES bounds the cache, default a
// quarter of physical memory; 0 turns it off). This gives the cached memory back to the system
// (after the device's queued work is done).
void empty_cache(Device device = Device::cpu());

}  // namespace ember
