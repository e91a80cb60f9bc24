// Slabs for small buffers (small_buffers.h): first fit over each slab's free ranges, coalesced on
// return.
#include "backend/vulkan/small_buffers.h"

#include <algorithm>

namespace ember::vk {

bool SmallBufferPool::take(DeviceContext& d, VkDeviceSize bytes, VkDeviceSize grain, BufferSlice* out,
                           std::string* why) {
  const VkDeviceSize need = std::max<VkDeviceSize>((bytes + grain - 1) / grain * grain, grain);
  std::lock_guard lock(mutex_);
  auto carve = [&](Slab& s) {
    for (auto it = s.free.begin(); it != s.free.end(); ++it) {
      if (it->second < need) continue;
      const VkDeviceSize at = it->first, left = it->second - need;
      s.free.erase(it);
      if (left > 0) s.free.emplace(at + need, left);
      s.used += need;
      ++slices_;
      *out = BufferSlice{&s, s.block.buffer, at, need,
                         s.block.mapped ? static_cast<char*>(s.block.mapped) + at : nullptr};
      return true;
    }
    return false;
  };
  for (auto& s : slabs_)
    if (carve(*s)) return true;
  auto slab = std::make_unique<Slab>();
  if (!d.create(kSlabBytes, false, slab->block, why)) return false;
  slab->free.emplace(0, kSlabBytes);
  slabs_.push_back(std::move(slab));
  return carve(*slabs_.back());
}

void SmallBufferPool::give_back(DeviceContext& d, const BufferSlice& slice) {
  std::lock_guard lock(mutex_);
  auto* s = static_cast<Slab*>(slice.slab);
  VkDeviceSize at = slice.offset, size = slice.size;
  auto next = s->free.lower_bound(at);
  if (next != s->free.end() && next->first == at + size) {  // merge with the range after it
    size += next->second;
    next = s->free.erase(next);
  }
  if (next != s->free.begin()) {  // and with the one before it
    auto prev = std::prev(next);
    if (prev->first + prev->second == at) {
      at = prev->first;
      size += prev->second;
      s->free.erase(prev);
    }
  }
  s->free.emplace(at, size);
  s->used -= slice.size;
  --slices_;
  if (s->used != 0) return;
  // Keep one empty slab for the next small buffers; destroy the others.
  const auto empty = std::count_if(slabs_.begin(), slabs_.end(), [](const auto& x) { return x->used == 0; });
  if (empty <= 1) return;
  d.destroy(s->block);
  slabs_.erase(std::find_if(slabs_.begin(), slabs_.end(), [&](const auto& x) { return x.get() == s; }));
}

SmallBufferPool& small_buffer_pool(DeviceContext& d) {
  std::call_once(d.small_buffers_once, [&] { d.small_buffers = new SmallBufferPool; });  // lives with the device
  return *d.small_buffers;
}

uint64_t SmallBufferPool::slabs() const {
  std::lock_guard lock(mutex_);
  return slabs_.size();
}

uint64_t SmallBufferPool::slices() const {
  std::lock_guard lock(mutex_);
  return slices_;
}

}  // namespace ember::vk
