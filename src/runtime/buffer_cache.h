// The per-device caching allocator behind Backend::alloc: freed buffers go back to a free list
// keyed by size class instead of to the plugin, so a training loop that allocates the same sizes
// every step reuses memory that is already mapped (no page faults, no zeroing by the OS, no
// device allocation calls). Buffers are reused for requests of exactly their size: shapes repeat
// from step to step, and the plugin's bounds checks keep seeing the true size. The cache is
// bounded (EMBER_CACHE_BYTES, default a quarter of physical memory, 0 turns caching off); beyond
// the bound, or on ember::empty_cache(), buffers go back to the plugin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "backend/abi.h"

namespace ember {

class BufferCache {
 public:
  // A cached buffer of exactly `bytes` bytes, or nullptr.
  ember_buffer take(size_t bytes);
  // Keeps `handle` (of `bytes` bytes) for reuse; false when the cache is full (the caller frees it).
  bool give(ember_buffer handle, size_t bytes);
  // Removes and returns every cached buffer (the caller frees them).
  std::vector<ember_buffer> drain();
  int64_t cached_bytes();

 private:
  std::mutex mutex_;
  std::map<size_t, std::vector<ember_buffer>> free_;
  int64_t cached_ = 0;
};

// EMBER_CACHE_BYTES, or a quarter of physical memory.
int64_t buffer_cache_limit();

}  // namespace ember
