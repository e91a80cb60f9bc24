// Device naming, parsing, availability and memory statistics.
#include "ember/device.h"

#include <fmt/format.h>

#include <ostream>

#include "backend/device_kinds.h"
#include "backend/registry.h"
#include "ember/error.h"

namespace ember {

std::string Device::str() const {
  std::string name = device_kind_name(kind);
  if ((kind == DeviceKind::Cpu || kind == DeviceKind::Reference) && index == 0) return name;
  return fmt::format("{}:{}", name, index);
}

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

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
  if (std::optional<DeviceKind> k = find_device_kind(name)) return Device{*k, index};
  std::string found;
  for (DeviceKind k : device_kinds()) found = fmt::format("{}{}{}", found, found.empty() ? "" : ", ", device_kind_name(k));
  throw Error(fmt::format("device: unknown device '{}' (known kinds: {}; a kind is a plugin file "
                          "libember_backend_<kind>.so in a plugin folder, see EMBER_PLUGIN_PATH)",
                          text, found));
}

std::vector<Device> available_devices() {
  std::vector<Device> out;
  for (DeviceKind k : device_kinds())
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
