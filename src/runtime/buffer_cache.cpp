// The per-device caching allocator (buffer_cache.h).
#include "runtime/buffer_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ember {

int64_t buffer_cache_limit() {
  static const int64_t limit = [] {
    if (const char* s = std::getenv("EMBER_CACHE_BYTES"); s && *s) {
      char* end = nullptr;
      long long v = std::strtoll(s, &end, 10);
      if (end && *end == '\0' && v >= 0) return int64_t(v);
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? int64_t(pages) * page / 4 : int64_t(1) << 30;
  }();
  return limit;
}

ember_buffer BufferCache::take(size_t bytes) {
  std::lock_guard lock(mutex_);
  auto it = free_.find(bytes);
  if (it == free_.end() || it->second.empty()) return nullptr;
  ember_buffer b = it->second.back();
  it->second.pop_back();
  cached_ -= int64_t(bytes);
  return b;
}

bool BufferCache::give(ember_buffer handle, size_t bytes) {
  std::lock_guard lock(mutex_);
  if (cached_ + int64_t(bytes) > buffer_cache_limit()) return false;
  free_[bytes].push_back(handle);
  cached_ += int64_t(bytes);
  return true;
}

std::vector<ember_buffer> BufferCache::drain() {
  std::lock_guard lock(mutex_);
  std::vector<ember_buffer> out;
  for (auto& [cap, list] : free_) out.insert(out.end(), list.begin(), list.end());
  free_.clear();
  cached_ = 0;
  return out;
}

int64_t BufferCache::cached_bytes() {
  std::lock_guard lock(mutex_);
  return cached_;
}

}  // namespace ember
