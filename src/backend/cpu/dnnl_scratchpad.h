// oneDNN scratchpads supplied by Ember (scratchpad_mode::user) for every primitive the CPU backend
// creates (matmul_dnnl.cpp, conv_dnnl.cpp).
//
// Why: in oneDNN's default (library) mode, several implementations (Winograd and gemm-based
// convolutions among them) use a "global" scratchpad: a thread_local buffer of the thread that
// *created* the primitive, looked up again on the thread that *executes* it. Ember creates a
// primitive once, caches it, and runs it on whichever thread executes the queued work: the
// device's worker, or a reading thread that runs queued work inline. A primitive created on one
// thread and run on another then wrote to the other thread's scratchpad (absent: a null store,
// or one sized for other primitives). With a user scratchpad each execution brings its own
// memory from the executing thread, so where a primitive was created no longer matters.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <new>
#include <unordered_map>

namespace ember::cpu {

// Attributes with the user scratchpad mode (callers add their post-ops).
inline dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A growing 64-byte aligned host buffer (kept between calls: fresh pages per call cost page faults).
struct GrowingBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  void* get(size_t n) {
    if (n > bytes) {
      std::free(p);
      p = nullptr;
      bytes = 0;
      const size_t rounded = (n + 4095) / 4096 * 4096;
      p = std::aligned_alloc(64, rounded);
      if (!p) throw std::bad_alloc();
      bytes = rounded;
    }
    return p;
  }
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  ~GrowingBuffer() { std::free(p); }
};

// Adds the scratchpad argument of a primitive created with user_scratchpad_attr(): memory of the
// calling thread, valid until the next call on this thread (executions are synchronous: the caller
// waits on the stream before returning).
inline void add_scratchpad(std::unordered_map<int, dnnl::memory>& args, const dnnl::memory::desc& scratchpad,
                           const dnnl::engine& engine) {
  const size_t n = scratchpad.get_size();
  if (n == 0) return;
  thread_local GrowingBuffer buffer;
  args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpad, engine, buffer.get(n)));
}

}  // namespace ember::cpu
