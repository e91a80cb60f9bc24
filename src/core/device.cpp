// Device naming, parsing, availability and memory statistics.
#include "ember/device.h"

#include <fmt/format.h>

#include "backend/registry.h"
#include "ember/error.h"

namespace ember {

static const char* kind_str(DeviceKind k) {
  switch (k) {
    case DeviceKind::Cpu: return "cpu";
    case DeviceKind::Reference: return "reference";
    case DeviceKind::Vulkan: return "vulkan";
    case DeviceKind::Cuda: return "cuda";
  }
  return "?";
}

std::string Device::str() const {
  if ((kind == DeviceKind::Cpu || kind == DeviceKind::Reference) && index == 0) return kind_str(kind);
  return fmt::format("{}:{}", kind_str(kind), index);
}

bool Device::available() const {
  Backend* b = Backend::try_get(kind);
  return b && index >= 0 && index < b->device_count();
}

Device Device::parse(const std::string& text) {
  std::string name = text;
  int index = 0;
  if (auto colon = text.find(':'); colon != std::string::npos) {
    name = text.substr(0, colon);
    try {
      size_t used = 0;
      index = std::stoi(text.substr(colon + 1), &used);
      if (used != text.size() - colon - 1 || index < 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw Error(fmt::format("device: bad index in '{}' (expected e.g. 'cuda:0')", text));
    }
  }
  for (DeviceKind k : {DeviceKind::Cpu, DeviceKind::Reference, DeviceKind::Vulkan, DeviceKind::Cuda})
    if (name == kind_str(k)) return Device{k, index};
  throw Error(fmt::format("device: unknown device '{}' (expected cpu, reference, vulkan[:N] or cuda[:N])",
                          text));
}

std::vector<Device> available_devices() {
  std::vector<Device> out;
  for (DeviceKind k : {DeviceKind::Cpu, DeviceKind::Reference, DeviceKind::Vulkan, DeviceKind::Cuda})
    if (Backend* b = Backend::try_get(k))
      for (int i = 0; i < b->device_count(); ++i) out.push_back(Device{k, i});
  return out;
}

MemoryStats memory_stats(Device device) {
  Backend& b = Backend::get(device.kind);
  synchronize(device);
  return b.stats(device.index);
}

void empty_cache(Device device) {
  Backend& b = Backend::get(device.kind);
  synchronize(device);
  b.empty_cache(device.index);
}

void reset_peak_memory(Device device) {
  Backend& b = Backend::get(device.kind);
  synchronize(device);
  b.reset_peak(device.index);
}

}  // namespace ember
