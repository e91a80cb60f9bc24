// Weights kept in a oneDNN primitive's own layout between calls, per thread (conv_dnnl.cpp).
//
// A convolution primitive wants its weights blocked (e.g. OIhw16i16o) while Ember's buffers are
// plain OIHW, so each call reorders them. Inference calls the same convolution with the same
// weights every time; at batch 1 those reorders were 8 of the 13 per forward of the exported CNN
// and, with oneDNN's per-execution cost, about 3 us of its 25. A slot here keeps the last reordered
// weights of one (primitive, weight buffer) pair together with a copy of the plain bytes they came
// from, and a call reuses them only when the plain weights are the same bytes. Buffers are mutable
// and their addresses are reused, so the address alone says nothing; what says it is the buffer's
// write stamp (common/host_memory.h): the same stamp as when the slot was filled means no write
// since, and the bytes are not read at all. Weights without a stamp (a packed copy of a strided
// view) or with a new one (rewritten, perhaps with the same values) are compared byte for byte
// (memcmp), and an equal copy takes the new stamp. Comparing the bytes on every call was 12 % of a
// batch-1 CNN forward (1.2 MB of weights read twice).
//
// Weights that change on every call (training) would pay a copy per call for nothing, so a slot
// that missed three times in a row stops taking copies and is tried again every 64th call. The
// memory is bounded per thread (kBudget), least recently used slots first to go; a slot in use
// within the last kRecent calls is never evicted, so a model whose weights exceed the budget caches
// what fits instead of thrashing.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <utility>

namespace ember::cpu {

class ReorderedWeights {
 public:
  static constexpr size_t kBudget = size_t(64) << 20;    // plain copies + reordered, per thread
  static constexpr size_t kMaxWeights = size_t(16) << 20;  // larger weights are not kept
  static constexpr uint64_t kRecent = 1024;

  struct Slot;
  // Where this call's reordered weights live. `ready`: they are already there (skip the reorder).
  // Otherwise the caller reorders into `data` and, when `slot` is set, calls keep() afterwards.
  struct Use {
    void* data = nullptr;
    bool ready = false;
    Slot* slot = nullptr;
  };

  // Whether the slot of primitive `entry_id` and weights `plain` holds the reorder of exactly
  // these bytes. A forward primitive's slot holds only weights its caller scanned as finite
  // (conv_dnnl.cpp; the backward-data scans its result instead), so a yes for a forward also says
  // they are finite and spares that scan; the caller then passes `same_as_kept` to use(), which
  // skips its own comparison.
  // `stamp`: the weights buffer's write stamp, 0 when unknown.
  bool holds(uint64_t entry_id, const void* plain, size_t plain_bytes, uint64_t stamp) {
    auto it = slots_.find({entry_id, plain});
    return it != slots_.end() && current(it->second, plain, plain_bytes, stamp);
  }

  // `plain` (plain_bytes) are the call's weights for primitive `entry_id`, whose layout takes
  // want_bytes; `scratch` is where the reorder goes when nothing is kept. `same_as_kept`: holds()
  // said yes for these weights in this call.
  template <class Scratch>
  Use use(uint64_t entry_id, const void* plain, size_t plain_bytes, uint64_t stamp, size_t want_bytes,
          Scratch& scratch, bool same_as_kept = false) {
    ++tick_;
    if (plain_bytes + want_bytes > kMaxWeights) return {scratch.get(want_bytes), false, nullptr};
    auto it = slots_.find({entry_id, plain});
    if (it != slots_.end()) {
      Slot& s = it->second;
      s.last_use = tick_;
      if (same_as_kept || current(s, plain, plain_bytes, stamp)) {
        s.misses = 0;
        return {s.layout.get(), true, nullptr};
      }
      if (++s.misses > 3 && tick_ % 64 != 0) return {scratch.get(want_bytes), false, nullptr};
      if (s.plain_bytes != plain_bytes || s.layout_bytes != want_bytes) {
        used_ -= s.bytes();
        slots_.erase(it);
      } else {
        s.valid = false;  // until keep(): the reorder may fail
        return {s.layout.get(), false, &s};
      }
    }
    if (!make_room(plain_bytes + want_bytes)) return {scratch.get(want_bytes), false, nullptr};
    Slot& s = slots_[{entry_id, plain}];
    s.plain = allocate(plain_bytes);
    s.layout = allocate(want_bytes);
    s.plain_bytes = plain_bytes;
    s.layout_bytes = want_bytes;
    s.last_use = tick_;
    used_ += plain_bytes + want_bytes;
    return {s.layout.get(), false, &s};
  }

  // After the reorder into use.data succeeded: the slot now holds the layout of these plain bytes,
  // which carry write stamp `stamp` (0: unknown).
  static void keep(Slot* s, const void* plain, uint64_t stamp) {
    std::memcpy(s->plain.get(), plain, s->plain_bytes);
    s->stamp = stamp;
    s->valid = true;
  }

  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<void, Free> plain, layout;
    size_t plain_bytes = 0, layout_bytes = 0;
    bool valid = false;  // `layout` holds the reorder of `plain`
    uint64_t stamp = 0;  // the write stamp `plain` was copied at (0: unknown)
    uint64_t last_use = 0;
    int misses = 0;
    size_t bytes() const { return plain_bytes + layout_bytes; }
  };

 private:
  // Whether slot s holds the reorder of these weights: the same write stamp, or else the same bytes
  // (then the slot takes the stamp, so the next call need not compare).
  static bool current(Slot& s, const void* plain, size_t plain_bytes, uint64_t stamp) {
    if (!s.valid || s.plain_bytes != plain_bytes) return false;
    if (stamp != 0 && s.stamp == stamp) return true;
    if (std::memcmp(s.plain.get(), plain, plain_bytes) != 0) return false;
    if (stamp != 0) s.stamp = stamp;
    return true;
  }

  static std::unique_ptr<void, Free> allocate(size_t n) {
    void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return std::unique_ptr<void, Free>(p);
  }

  // Evicts least recently used slots (none used in the last kRecent calls) until n bytes fit.
  bool make_room(size_t n) {
    while (used_ + n > kBudget) {
      auto oldest = slots_.end();
      for (auto it = slots_.begin(); it != slots_.end(); ++it)
        if (oldest == slots_.end() || it->second.last_use < oldest->second.last_use) oldest = it;
      if (oldest == slots_.end() || oldest->second.last_use + kRecent > tick_) return false;
      used_ -= oldest->second.bytes();
      slots_.erase(oldest);
    }
    return true;
  }

  std::map<std::pair<uint64_t, const void*>, Slot> slots_;
  size_t used_ = 0;
  uint64_t tick_ = 0;
};

}  // namespace ember::cpu
