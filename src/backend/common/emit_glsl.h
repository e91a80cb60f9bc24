// The GLSL target of the C-like KIR emitter (emit_c.h): the GLSL expression table and the two
// compute-shader loop structures (elementwise; reductions and multi-phase programs), rendered as
// GLSL 4.50 compute shaders for Vulkan (compiled to SPIR-V by the plugin).
//
// The shader interface every Ember compute shader shares (the Vulkan plugin binds it):
//   binding 0: launch parameters, int64 words (GlslLaunchWords below), read only;
//   binding 1: an error word (uint[8], see kErr*), written by the first failing point: the
//              launch's own for a checked kernel, the queue's shared one otherwise;
//   binding 2 + i: argument i, an array of its storage type.
// One pipeline serves every shape: sizes, strides and offsets are launch parameters.
// Self-contained (no libember, no Vulkan): compiled into the plugins that use it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "backend/common/emit_gpu.h"

namespace ember::emit {

// What the device's shaders may use (Vulkan features); the emitter refuses what it lacks.
struct GlslTarget {
  bool float64 = true;    // shaderFloat64: f64 values (and f32 floor division / remainder via f64)
  bool storage8 = true;   // 8-bit storage and int8 types: u8 and bool arguments
  bool storage16 = true;  // 16-bit storage and int16 types: f16 and bf16 arguments (as bits)
  // shaderInt64: i64 values, 64-bit index arithmetic, gathers and random numbers (their indices
  // and counters are i64) and the library shaders other than matmul. Without it (SwiftShader)
  // shaders use int only, launch words are read as their low halves, and what needs i64 is
  // refused by supports_op (so the core runs it on the CPU: scheduler/host_fallback.h).
  bool int64 = true;
  uint32_t workgroup = 256;  // a power of two
  // Bytes of shared memory a workgroup may use (maxComputeSharedMemorySize; Vulkan guarantees
  // 16 KiB, GPUs have 32 to 64): the convolution GEMMs pick their blocks by it.
  uint32_t shared_bytes = 16384;
  // Compute shaders have subgroupShuffleXor (GL_KHR_shader_subgroup_shuffle) and power-of-two
  // subgroups: a reduction's workgroup tree starts with a butterfly inside each subgroup, so that
  // only the per-subgroup partials go through shared memory (fewer barriers).
  bool subgroup_shuffle = false;
  // Float controls (SPV_KHR_float_controls): without SignedZeroInfNanPreserve a driver may fold
  // x - x to 0 or drop isnan() (Mesa's NIR does), which breaks NaN/inf/-0 semantics.
  bool preserve_inf_nan32 = false, preserve_inf_nan64 = false;
  // f32 exp, log, sin, cos, tanh and erf computed in f64 and rounded (correctly rounded but for
  // rare double roundings, as the CPU's): for devices with fast f64 (CPU drivers); otherwise the
  // f32 forms (GLSL's exp/log/sin/cos within a few ulp, Ember's tanh and erf).
  bool f32_math_via_f64 = false;
  // Index arithmetic in int (every element offset, point count and stride product of a launch
  // below 2^31) instead of int64_t; a per-launch choice, so the plugin builds both variants.
  bool index32 = false;
};

// The launch words (binding 0) and the error word (binding 1): emit_gpu.h, shared with CUDA.
using GlslLaunchWords = GpuLaunchWords;
inline const char* glsl_error_text(uint32_t code) { return gpu_error_text(code); }

// Whether instruction `op` with result dtype `dtype` has a GLSL expression on `target`.
bool glsl_supports(const GlslTarget& target, uint16_t op, uint8_t dtype);

// The compute shader of `prog`; false and *why if it uses what the target cannot spell.
// *can_fail is set when the program can write the error word (gathers, integer division).
bool emit_glsl_kernel(const ember_kir_program& prog, const GlslTarget& target, std::string& src, bool* can_fail,
                      std::string* why);

// ---- Building blocks for hand-written shaders (library calls, emit_glsl_library.cpp) ----------
class ExprTable;
// The GLSL expression table of `target` (loads, stores, casts of every storage dtype).
std::unique_ptr<ExprTable> make_glsl_table(const GlslTarget& target);
// A shader's first lines: version, extensions (8/16-bit storage when asked), the workgroup
// size, bindings 0 and 1 and the helper functions of the KIR shaders (e_maxf, e_f2h, e_fail...).
std::string glsl_header(const std::string& what, const GlslTarget& target, bool need8, bool need16);

// One dispatch of a library call: its shader, launch words (binding 0; word kLaunchId is filled in
// by the plugin) and number of invocations. Every pass binds the call's inputs then its outputs
// (whole buffers) at bindings 2, 3, ...; offsets and strides travel in the words.
struct GlslPass {
  std::string glsl;
  std::vector<int64_t> words;
  int64_t points = 0;
  // Loop iterations one invocation runs, all loops together (an upper bound): lavapipe stops a
  // shader after 65535, so the plugin refuses a pass that needs more on such a driver.
  int64_t loop_iterations = 0;
  // The shader loops over its points (a grid-stride loop, as the KIR shaders do), so the plugin
  // may launch fewer invocations than points; else one invocation per point.
  bool grid_stride = false;
  // Set for a pass that reports kernel errors (an index out of range): the name its errors start
  // with. The plugin gives the pass an error word of its own and files its errors under the
  // call's tag, as for a checked KIR launch.
  std::string check_name;
};
// The passes of library call `op` (abi.h EMBER_LIB_*), run in order on one queue; false and
// *why when the op, its dtype or its attributes have no shader on this target.
bool emit_glsl_library(int32_t op, const ember_tensor_desc* inputs, int32_t n_inputs,
                       const ember_tensor_desc* outputs, int32_t n_outputs, const void* attrs,
                       const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why);
// Whether emit_glsl_library has op on dtype (the first input's dtype) for `target`.
bool glsl_library_supports(int32_t op, uint8_t dtype, const GlslTarget& target);

// The matmul shader (EMBER_LIB_MATMUL) for one dtype: one invocation per output element, the
// K loop in the row-major order of the reference backend. Launch words: kPoints = batch * M * N,
// kRank = r, word 2 = K, kShape = the output's shape, then a, b, c (offset and strides each).
bool emit_glsl_matmul(uint8_t dtype, const GlslTarget& target, std::string& src, std::string* why);

}  // namespace ember::emit
