// Device naming and parsing. Which devices are available is the plugins' answer
// (runtime/device_queries.cpp); memory statistics wait for the device (scheduler/realize.cpp).
#include "ember/device.h"

#include <fmt/format.h>

#include <ostream>

#include "core/device_kinds.h"
#include "ember/error.h"

namespace ember {

std::string Device::str() const {
  std::string name = device_kind_name(kind);
  if ((kind == DeviceKind::Cpu || kind == DeviceKind::Reference) && index == 0) return name;
  return fmt::format("{}:{}", name, index);
}

std::ostream& operator<<(std::ostream& os, const Device& device) { return os << device.str(); }

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

}  // namespace ember
