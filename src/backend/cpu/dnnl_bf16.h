// Whether the CPU backend hands bf16 operands to oneDNN as bf16 (conv_dnnl.cpp, matmul_dnnl.cpp).
// On CPUs with AMX tiles oneDNN multiplies bf16 operands with f32 accumulation and rounds the
// result to bf16 once: the same semantics as Ember's f32 path (widen, f32 product, one rounding),
// only the summation order differs, at half the memory traffic and the bf16 units' speed. With
// AVX512-BF16 alone (no AMX) Debian's oneDNN (2.6/2.7) ran them slower than widening: on an Intel
// Xeon with avx512_bf16 and no amx, its bf16 brgemm took 12.9 ms for a 2048x1024x256 product
// that f32 did in 7.5 ms, a transformer encoder training step under bf16 autocast took 178 ms
// against 152 ms widened at 1 thread (103 against 100 ms at 2), and a CNN epoch ran at
// 1,000-1,800 images/s against 2,000-2,100 (docs/performance.md, 2026-12-05). Elsewhere oneDNN would emulate bf16, slower still. So the
// operands are widened to f32 (convert.h) unless the CPU has AMX-BF16. EMBER_CPU_BF16=0 forces
// the f32 path (for comparisons); =1 asks for oneDNN's bf16 kernels on any CPU.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>

namespace ember::cpu {

inline bool dnnl_native_bf16() {
  static const bool on = [] {
    if (const char* e = std::getenv("EMBER_CPU_BF16")) return std::strcmp(e, "0") != 0;
    const unsigned isa = unsigned(dnnl::get_effective_cpu_isa());
    const unsigned amx = unsigned(dnnl::cpu_isa::avx512_core_amx);
    return (isa & amx) == amx;  // oneDNN's ISA values are feature bit sets
  }();
  return on;
}

}  // namespace ember::cpu
