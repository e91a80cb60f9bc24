// Whether the CPU backend hands bf16 operands to oneDNN as bf16 (conv_dnnl.cpp, matmul_dnnl.cpp).
// On CPUs with bf16 dot-product instructions (AVX512-BF16, AMX-BF16) oneDNN multiplies bf16
// operands with f32 accumulation and rounds the result to bf16 once: the same semantics as
// Ember's f32 path (widen, f32 product, one rounding), only the summation order differs, at half
// the memory traffic and the bf16 units' speed. Elsewhere oneDNN would emulate bf16 slower than
// f32, so the operands are widened to f32 (convert.h). EMBER_CPU_BF16=0 forces the f32 path (for
// comparisons); =1 asks for oneDNN's bf16 kernels on any CPU.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdlib>
#include <cstring>

namespace ember::cpu {

inline bool dnnl_native_bf16() {
  static const bool on = [] {
    if (const char* e = std::getenv("EMBER_CPU_BF16")) return std::strcmp(e, "0") != 0;
    const unsigned isa = unsigned(dnnl::get_effective_cpu_isa());
    const unsigned bf16 = unsigned(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;  // oneDNN's ISA values are feature bit sets: AMX includes AVX512-BF16
  }();
  return on;
}

}  // namespace ember::cpu
