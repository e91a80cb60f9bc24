// The core's on-disk cache of compiled programs, shared by every compiled backend (the CPU's
// tier-1 shared objects, Vulkan's SPIR-V; CUBINs next). Plugins reach it through
// ember_host_services (abi.h); the `ember cache` command and tests through the functions here.
//
// Folder: $EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember/kernels, else ~/.cache/ember/kernels.
// Entry: one file `<plugin>-<hash of the key>.bin` holding a header, the plugin's name, the whole
// key and the payload, with a checksum over all three. A load compares the whole key (a hash
// collision is a miss, never another program's bytes) and the checksum (a truncated or damaged
// file is a miss, replaced by the next store). A store writes a temporary file and renames it, so
// concurrent processes see an entry whole or not at all. The folder is bounded: past
// EMBER_CACHE_MAX_BYTES (default 1 GiB; suffixes K, M, G; 0 turns the cache off) the least
// recently used entries go (a load marks its entry used).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/abi.h"

namespace ember::program_disk_cache {

// The cache folder, created if needed; "" when the cache is off or no folder is writable
// (*tried, when given, names the folder that was tried).
std::string folder(std::string* tried = nullptr);
// EMBER_CACHE_MAX_BYTES, or the default (1 GiB).
uint64_t max_bytes();

std::optional<std::vector<uint8_t>> load(std::string_view plugin, std::string_view key);
bool store(std::string_view plugin, std::string_view key, const void* data, size_t bytes);

// Where `plugin`'s entry for `key` lives (in folder()), whether or not it exists.
std::string entry_path(std::string_view plugin, std::string_view key);

struct Summary {
  std::string folder;   // "" when none is usable
  std::string tried;    // the folder that was tried
  uint64_t max_bytes = 0;
  int64_t entries = 0;  // this cache's entries
  uint64_t entry_bytes = 0;
  int64_t legacy_files = 0;  // files of the per-plugin caches before this one (ember_*.so, vulkan_*.spv)
  uint64_t legacy_bytes = 0;
};
Summary summary();
// Removes every entry, legacy file and leftover temporary file; returns the bytes freed.
uint64_t clear();

// This process's loads that hit, loads that missed, and stores.
struct Counters {
  int64_t hits = 0, misses = 0, stores = 0;
};
Counters counters();

// The services table given to every plugin (abi.h).
const ember_host_services* host_services();

}  // namespace ember::program_disk_cache
