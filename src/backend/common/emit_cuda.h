// The CUDA target of the C-like KIR emitter (emit_c.h): the CUDA C expression table and the two
// kernel loop structures (elementwise; reductions and multi-phase programs), rendered as CUDA C
// for NVRTC (src/backend/cuda/nvrtc.h compiles it for the device's architecture).
//
// The kernel every program becomes:
//   extern "C" __global__ void ember_kernel(const ember_kernel_launch L, unsigned int* E, T0* g0, T1* g1, ...)
// - L: the launch words, passed by value as a kernel argument (`long long P[]`, the layout of
//   GpuLaunchWords in emit_gpu.h, shared by both GPU targets): point count, rank, outer rank,
//   launch id, reduction mode, shape, and per argument its offset, strides and gather stride/size;
// - E: the error word (uint[kErrWords], the codes of emit_gpu.h), written by the first failing
//   point (a gather index out of range, an integer division by zero);
// - g<i>: argument i's buffer, typed by its storage dtype.
// One kernel serves every shape; the launch may have as many blocks as the plugin likes (points
// are taken in a grid-stride loop). Values are held as emit_c.h says (f16/bf16 in f32, small
// integers in int32), with the interpreter's formulas for everything C leaves undefined (integer
// division by zero, out-of-range float-to-int casts, NaN in max/min), so results agree with the
// reference backend within the rounding of CUDA's math library (exp, log, tanh, erf, sin, cos:
// at most 2 ulp in f32 per the CUDA programming guide; sqrt and division correctly rounded).
// Compile with --fmad=false: a contracted a * b + c rounds once where the reference rounds twice.
// Self-contained (no libember, no CUDA headers).
#pragma once

#include <cstdint>
#include <string>

#include "backend/abi.h"

namespace ember::emit {

struct CudaTarget {
  int block = 256;       // threads per block: a power of two, at least 32 (one warp)
  bool index32 = false;  // index arithmetic in int (every offset of the launch below 2^31)
};

// The kernel's entry point name (extern "C", so it is not mangled).
inline constexpr const char* kCudaKernelName = "ember_kernel";

// How a kernel's source is written out: its entry point's name (its launch struct is named
// <name>_launch), and whether the prelude comes first. Several kernels may share one translation
// unit (one prelude, distinct names): one NVRTC call compiles them all.
struct CudaSourceOptions {
  std::string name = kCudaKernelName;
  bool prelude = true;
};

// The CUDA C source of `prog`; false and *why if it uses what the table cannot spell.
// *can_fail is set when the program can write the error word (gathers, integer division).
bool emit_cuda_kernel(const ember_kir_program& prog, const CudaTarget& target, std::string& src, bool* can_fail,
                      std::string* why, const CudaSourceOptions& options = {});

// The helper text every kernel starts with (cuda_prelude.cpp); hand-written kernels may use it too.
std::string cuda_prelude(const CudaTarget& target);

}  // namespace ember::emit
