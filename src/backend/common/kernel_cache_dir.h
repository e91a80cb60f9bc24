// Where plugins keep compiled programs between runs (the CPU's tier-1 shared objects, Vulkan's
// SPIR-V): $EMBER_CACHE_DIR, else $XDG_CACHE_HOME/ember/kernels, else ~/.cache/ember/kernels,
// created on first use. Files are named by a hash of everything that determines their content,
// so a cache never needs invalidating; deleting the folder is always safe.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace ember::plugin {

inline uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Creates `dir` and its parents; true if it exists and is writable.
inline bool make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos < dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return ::access(dir.c_str(), W_OK) == 0;
}

// The cache folder, or "" when none is set or writable (*tried says which was tried).
inline std::string kernel_cache_dir(std::string* tried = nullptr) {
  std::string dir;
  if (const char* e = std::getenv("EMBER_CACHE_DIR"); e && *e) dir = e;
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/ember/kernels";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/ember/kernels";
  if (tried) *tried = dir;
  return !dir.empty() && make_dirs(dir) ? dir : std::string();
}

}  // namespace ember::plugin
