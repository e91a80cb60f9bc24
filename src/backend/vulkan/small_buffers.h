// Small tensors share large device allocations. A VkDeviceMemory per tensor costs a driver call
// of tens of microseconds each time, counts against maxMemoryAllocationCount (4096 on some
// drivers: a model with more small tensors alive would fail to allocate), and rounds every bias
// and scalar up to the driver's allocation granularity. Buffers up to kLargest bytes are ranges of
// kSlabBytes slabs instead (each slab one VkBuffer over its own memory); larger ones keep their
// own allocation. Ranges start at multiples of the binding alignment, so a slice binds like a
// buffer of its own (at its base offset).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/vulkan/context.h"

namespace ember::vk {

class SmallBufferPool;

// A range of a slab: what a small buffer is.
struct BufferSlice {
  void* slab = nullptr;  // the pool's slab (opaque), nullptr for none
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0, size = 0;
  void* mapped = nullptr;  // byte 0 of the slice where the memory is host visible
};

class SmallBufferPool {
 public:
  static constexpr VkDeviceSize kLargest = VkDeviceSize(256) << 10;
  static constexpr VkDeviceSize kSlabBytes = VkDeviceSize(16) << 20;

  // A slice of at least `bytes` (rounded up to `grain`, a power of two); false with *why when no
  // slab has room and a new one cannot be created (out of device memory).
  bool take(DeviceContext& d, VkDeviceSize bytes, VkDeviceSize grain, BufferSlice* out, std::string* why);
  // Returns a slice (its work done); a slab left empty is destroyed unless it is the only empty one.
  void give_back(DeviceContext& d, const BufferSlice& s);
  // Slabs alive and slices handed out (EMBER_VULKAN_STATS, tests).
  uint64_t slabs() const;
  uint64_t slices() const;

 private:
  struct Slab {
    MemoryBlock block;
    std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, coalesced
    VkDeviceSize used = 0;
  };
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Slab>> slabs_;
  uint64_t slices_ = 0;
};

// The device's pool (created on first use).
SmallBufferPool& small_buffer_pool(DeviceContext& d);

}  // namespace ember::vk
