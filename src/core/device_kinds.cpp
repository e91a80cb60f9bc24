// The open registry of device kinds (device_kinds.h): names of the well-known kinds, names
// registered when a plugin file is found, and the plugin folders.
#include "core/device_kinds.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <sstream>

#include "ember/error.h"

namespace ember {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kPrefix = "libember_backend_", kSuffix = ".so";

// Names by kind value; values are never reused, names never removed (a Device holding a value
// stays printable). At most 256 kinds: DeviceKind is 8 bits.
struct KindTable {
  std::mutex m;
  std::deque<std::string> names = {"cpu", "reference", "vulkan", "cuda"};
};
KindTable& table() {
  static auto* t = new KindTable;  // never destroyed: Devices may be printed during exit
  return *t;
}

bool valid_name(std::string_view name) {
  return !name.empty() && name.size() <= 32 &&
         std::all_of(name.begin(), name.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

DeviceKind register_name(std::string_view name) {  // under table().m
  KindTable& t = table();
  for (size_t i = 0; i < t.names.size(); ++i)
    if (t.names[i] == name) return DeviceKind(i);
  if (t.names.size() >= 256) throw Error(fmt::format("device: too many device kinds (256) to add '{}'", name));
  t.names.emplace_back(name);
  return DeviceKind(t.names.size() - 1);
}

// Names of the plugin files in the plugin folders.
std::set<std::string> plugin_names_found() {
  std::set<std::string> names;
  for (const fs::path& dir : plugin_dirs()) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string file = it->path().filename().string();
      if (file.size() <= kPrefix.size() + kSuffix.size() || !file.starts_with(kPrefix) || !file.ends_with(kSuffix))
        continue;
      std::string name = file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
      if (valid_name(name)) names.insert(name);
    }
  }
  return names;
}

}  // namespace

// A program linked with libember.a through the CMake package or ember-static.pc defines this as
// its prefix's plugin folder (include/ember/plugin_dir.h); weak, so it is null otherwise.
extern "C" __attribute__((weak)) const char* ember_static_plugin_dir;

std::vector<fs::path> plugin_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("EMBER_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) dirs.emplace_back(item);
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_file_name), &info) && info.dli_fname) {
    fs::path self = fs::path(info.dli_fname).parent_path();
    dirs.push_back(self / "ember" / "plugins");
    dirs.push_back(self);
  }
  if (&ember_static_plugin_dir != nullptr && ember_static_plugin_dir) dirs.emplace_back(ember_static_plugin_dir);
#ifdef EMBER_INSTALLED_PLUGIN_DIR
  dirs.emplace_back(EMBER_INSTALLED_PLUGIN_DIR);
#endif
  return dirs;
}

std::string device_kind_name(DeviceKind kind) {
  KindTable& t = table();
  std::lock_guard lock(t.m);
  return size_t(kind) < t.names.size() ? t.names[size_t(kind)] : fmt::format("kind{}", int(kind));
}

std::string plugin_file_name(DeviceKind kind) {
  return fmt::format("{}{}{}", kPrefix, device_kind_name(kind), kSuffix);
}

std::optional<DeviceKind> find_device_kind(std::string_view name) {
  if (!valid_name(name)) return std::nullopt;
  {
    KindTable& t = table();
    std::lock_guard lock(t.m);
    for (size_t i = 0; i < t.names.size(); ++i)
      if (t.names[i] == name) return DeviceKind(i);
  }
  if (!plugin_names_found().count(std::string(name))) return std::nullopt;
  std::lock_guard lock(table().m);
  return register_name(name);
}

std::vector<DeviceKind> device_kinds() {
  std::vector<DeviceKind> kinds = {DeviceKind::Cpu, DeviceKind::Reference, DeviceKind::Vulkan, DeviceKind::Cuda};
  std::set<std::string> found = plugin_names_found();
  std::lock_guard lock(table().m);
  for (const std::string& name : found) {
    DeviceKind k = register_name(name);
    if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(k);
  }
  return kinds;
}

}  // namespace ember
