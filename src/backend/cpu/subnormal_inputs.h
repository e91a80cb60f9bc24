// Plain products and fused attention on the CPU read subnormal operands as zero (x86's MXCSR.DAZ,
// set only for the call), except products too large to run on one thread (below).
//
// Why: each vector multiply-add with a subnormal operand takes a microcode assist on x86 cores,
// about a hundred cycles. A product whose operand is all subnormal ran 170x slower than one of
// normal numbers (oneDNN and MKL alike: torch.bmm took 181 ms against 0.9 ms), and attention
// probabilities are partly subnormal whenever a row's scores span more than about 87 (exp(-87)
// is 2^-126): a transformer encoder training step spent 130 of its 240 ms in its per-head
// products, and took 119 ms instead of 242 ms with this (docs/performance.md, 2026-12-05). What it changes: a subnormal operand element (below 2^-126 in magnitude)
// contributes nothing to the sums, so a result moves by less than K * 2^-126 * max|other operand|
// (only results that are themselves near 2^-126 can change visibly); NaN and signed zero are
// unaffected, but a subnormal operand times an infinity gives NaN (0 * inf) instead of +-inf.
// Elementwise kernels keep full IEEE subnormal arithmetic: the flag is restored when the call
// returns, and contraction epilogues (whose post-ops are elementwise) do not set it.
// EMBER_CPU_SUBNORMALS=keep leaves every subnormal operand as it is. docs/semantics.md
// ("Subnormal numbers") says the same for users.
#pragma once

#include <cstdlib>
#include <cstring>

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#define EMBER_CPU_HAS_DAZ 1
#endif

namespace ember::cpu {

// MXCSR.DAZ on the calling thread for the guard's lifetime, then the thread's previous value.
// Set where a piece of work runs on one thread whatever the thread count, so that results never
// depend on it (docs/semantics.md, Reproducibility): each batch entry of a matmul small enough to
// be split over the threads one entry each (matmul_dnnl.cpp), a single product small enough to
// run serially, and each task of fused attention. Products large enough for oneDNN's own
// parallel region keep subnormals: setting the flag on its threads took two extra OpenMP regions
// per call, which cost an MLP training step 12 % at 2 threads, and setting it on the calling
// thread alone would make the result depend on the thread count.
class SubnormalInputsAsZero {
 public:
  // `on` false: a no-op guard (the call keeps subnormal operands).
  explicit SubnormalInputsAsZero(bool on = true) {
#ifdef EMBER_CPU_HAS_DAZ
    if (!on || !enabled()) return;
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kDaz);
#else
    (void)on;
#endif
  }
  ~SubnormalInputsAsZero() {
#ifdef EMBER_CPU_HAS_DAZ
    if (saved_ != kNone) _mm_setcsr(saved_);
#endif
  }
  SubnormalInputsAsZero(const SubnormalInputsAsZero&) = delete;
  SubnormalInputsAsZero& operator=(const SubnormalInputsAsZero&) = delete;

 private:
#ifdef EMBER_CPU_HAS_DAZ
  static constexpr unsigned kDaz = 1u << 6;
  static constexpr unsigned kNone = ~0u;
  static bool enabled() {
    static const bool on = [] {
      const char* e = std::getenv("EMBER_CPU_SUBNORMALS");
      return !(e && std::strcmp(e, "keep") == 0);
    }();
    return on;
  }
  unsigned saved_ = kNone;
#endif
};

}  // namespace ember::cpu
