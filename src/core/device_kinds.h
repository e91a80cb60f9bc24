// Device kinds and where their plugins are found. The well-known kinds have fixed values
// (DeviceKind::Cpu, Reference, Vulkan, Cuda); any other kind is a plugin file
// libember_backend_<name>.so found in the plugin folders at run time, which gets the next free
// value the first time its name is seen. So a new plugin needs no change to the core: drop the
// file into a plugin folder and Device::parse("<name>:1") finds it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ember/device.h"

namespace ember {

// "cpu", "reference", "vulkan", "cuda", or a discovered plugin's name.
std::string device_kind_name(DeviceKind kind);
// The kind called `name`: a well-known one, one seen before, or one whose plugin file is in a
// plugin folder now. nullopt otherwise (also for names that are not [a-z0-9_]{1,32}).
std::optional<DeviceKind> find_device_kind(std::string_view name);
// The well-known kinds, then every plugin file found in the plugin folders, by name.
std::vector<DeviceKind> device_kinds();
// Folders searched for plugins, in order: $EMBER_PLUGIN_PATH (':'-separated), the folder of the
// Ember library and its ember/plugins subfolder, the folder recorded by a statically linked
// program, the install prefix's plugin folder.
std::vector<std::filesystem::path> plugin_dirs();
// "libember_backend_<name>.so".
std::string plugin_file_name(DeviceKind kind);

}  // namespace ember
