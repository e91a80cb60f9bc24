// Activations kept in a oneDNN primitive's layout for the next convolution call that wants the
// same bytes in the same layout, per thread (conv_dnnl.cpp).
//
// A training step reorders the same activation twice: a layer's input x into oneDNN's blocked
// layout for the forward and again for the weight gradient, and the output gradient dy for the
// data gradient and again for the weight gradient. In the Fashion-MNIST CNN's second layer that was
// 1.0 of the 3.5 ms per step that its layout reorders took (1 thread, ONEDNN_VERBOSE). A slot keeps
// the last reorders of a few plain operands; a call reuses one only for the same address, the same
// plain and wanted layouts, and the same write stamp (common/host_memory.h: no write to the buffer
// since). Operands without a stamp (a packed copy of a strided view) are never kept. Unlike
// ReorderedWeights, nothing is compared byte for byte: activations change with every batch.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace ember::cpu {

class ReorderedActivations {
 public:
  static constexpr size_t kMaxBytes = size_t(16) << 20;  // larger ones are not kept (at most 64 MB per thread)
  static constexpr int kSlots = 4;  // a layer's x and dy, with room for a second layer's

  // Where this call's reordered operand lives. `ready`: it is already there (skip the reorder).
  // Otherwise, with `slot` >= 0, the caller reorders into `data` and calls keep(slot) after.
  // data == nullptr: not kept; the caller reorders into its own scratch.
  struct Use {
    void* data = nullptr;
    bool ready = false;
    int slot = -1;
  };

  Use use(const void* plain, uint64_t stamp, const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
    ++tick_;
    const size_t bytes = to.get_size();
    if (stamp == 0 || bytes > kMaxBytes) return {};
    int oldest = 0;
    for (int i = 0; i < kSlots; ++i) {
      Slot& s = slots_[size_t(i)];
      if (s.valid && s.plain == plain && s.stamp == stamp && s.from == from && s.to == to) {
        s.last_use = tick_;
        return {s.data.get(), true, i};
      }
      if (s.last_use < slots_[size_t(oldest)].last_use) oldest = i;
    }
    Slot& s = slots_[size_t(oldest)];
    s.valid = false;  // until keep(): the reorder may fail
    if (s.capacity < bytes) {
      s.data.reset();
      void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (!p) throw std::bad_alloc();
      s.data.reset(p);
      s.capacity = bytes;
    }
    s.last_use = tick_;
    return {s.data.get(), false, oldest};
  }

  // After the reorder into use.data succeeded: the slot holds `plain` (stamp `stamp`) as `to`.
  void keep(int slot, const void* plain, uint64_t stamp, const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
    Slot& s = slots_[size_t(slot)];
    s.plain = plain;
    s.stamp = stamp;
    s.from = from;
    s.to = to;
    s.valid = true;
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Slot {
    std::unique_ptr<void, Free> data;
    size_t capacity = 0;
    const void* plain = nullptr;
    uint64_t stamp = 0;
    dnnl::memory::desc from, to;
    bool valid = false;
    uint64_t last_use = 0;
  };
  std::array<Slot, kSlots> slots_;
  uint64_t tick_ = 0;
};

}  // namespace ember::cpu
