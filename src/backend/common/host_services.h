// The core's services as a plugin sees them (abi.h, ember_host_services): today the on-disk cache
// of compiled programs (src/runtime/program_disk_cache.h). Compiled into each plugin (one attached
// table per plugin); without a table (a plugin loaded by a test harness, not the core) a load
// misses and a store does nothing, so the plugin compiles every time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/abi.h"

namespace ember::plugin {

// The plugin table's attach_host.
void attach_host(const ember_host_services* host);

// The bytes `plugin` stored under `key` (which spells out everything that determines them), if
// the core's cache has them whole.
std::optional<std::vector<uint8_t>> cache_load(const char* plugin, const std::string& key);
bool cache_store(const char* plugin, const std::string& key, const void* data, size_t bytes);

}  // namespace ember::plugin
