// Internal declarations of the library-call shaders (emit_glsl_library.cpp and the files it
// dispatches to: emit_glsl_conv.cpp for convolution and pooling, emit_glsl_sort_scan.cpp for
// sorting and scans, emit_glsl_index_add.cpp for index_add, emit_glsl_attention.cpp for fused
// attention): the helpers every such shader
// uses to lay out its launch words and spell its bindings and loops.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/abi.h"
#include "backend/common/emit_c.h"
#include "backend/common/emit_glsl.h"

namespace ember::emit::lib {

// lavapipe (llvmpipe) ends a shader invocation silently once it has run 65535 loop iterations,
// all its loops together (one counter per invocation, gallivm's loop limiter), so chunking a
// loop does not help: every pass states an upper bound of the iterations one invocation runs
// (GlslPass::loop_iterations; the plugin refuses a pass over the driver's budget), long inner
// loops are unrolled in the generated text (`unrolled`), and long reductions with few outputs
// run a workgroup per output (`tree` passes) where the op allows it.
constexpr int kUnroll = 16;  // copies of an unrolled loop body

inline std::string S(int64_t v) { return std::to_string(v); }
inline bool is_half(int32_t dt) { return dt == EMBER_F16 || dt == EMBER_BF16; }
inline bool is_floating(int32_t dt) { return dt == EMBER_F32 || dt == EMBER_F64 || is_half(dt); }
// The GLSL type a floating dtype computes in: f16/bf16 as f32, rounded at the store.
inline const char* compute_type(int32_t dt) { return dt == EMBER_F64 ? "double" : "float"; }
// The register dtype of that type (the value dtype of a store).
inline uint8_t compute_dtype(int32_t dt) { return dt == EMBER_F64 ? uint8_t(EMBER_F64) : uint8_t(EMBER_F32); }

// Sets *why, returns false.
bool fail(std::string* why, const std::string& msg);

// Launch words and the GLSL statements that read them. Words 0..kZero are the shared header
// (GlslLaunchWords: kPoints = the outputs, word kLaunchId the launch id the plugin writes, kMode
// unused here (0), kZero always 0, read into e_opaque); each call below appends words from kZero + 1
// on and a declaration `int64_t name = P[i];` (or a float / double reinterpreted from the word)
// to `decl`. The layout depends only on the order of calls, never on the values, so one shader
// serves every shape.
struct Params {
  std::vector<int64_t> words = std::vector<int64_t>(GlslLaunchWords::kZero + 1, 0);
  std::string decl;
  int i64(const std::string& name, int64_t v);
  // The word read as `uint name` (sizes, and offsets and strides used in 32-bit index arithmetic:
  // GLSL indexes arrays with 32 bits anyway, and a negative stride wraps to the same index) or
  // `int name` (loop bounds below 2^31).
  int u32(const std::string& name, int64_t v);
  int i32(const std::string& name, int64_t v);
  // A double (its bits) read as `double name` (f64 targets) or `float name` (others).
  void real(const std::string& name, double v, bool as_double);
  // A tensor's offset and its first `rank` strides: name_o, name_s0, name_s1, ...
  void tensor(const std::string& name, const ember_tensor_desc& t, int rank);
  // n words without declarations (read as P[base + d]); returns base.
  int array(const int64_t* v, int n);
};

// One pass over `outputs` output points: `body` (statements of main after the point `id` and its
// bound check) with the bindings of `dtypes` (the call's inputs then outputs) and the declarations
// of `params`; `functions` (GLSL functions, shared arrays) go before main. A `tree` pass runs a
// workgroup per point (id = the workgroup, `uint lid` its invocation; the body must reach every
// barrier in all of them); `loop_iterations` bounds the loop iterations of one invocation.
GlslPass make_pass(const std::string& what, const GlslTarget& target, const std::vector<uint8_t>& dtypes,
                   const Params& params, int64_t outputs, int64_t loop_iterations, const std::string& body,
                   const std::string& functions = "", bool tree = false);

// Loop headers: `for_up("k", "lo", "hi")` runs int64_t k over [lo, hi) ascending, `for_down` over
// the same range descending. Follow with a statement or a braced block.
std::string for_up(const std::string& v, const std::string& lo, const std::string& hi);
std::string for_down(const std::string& v, const std::string& lo, const std::string& hi);
// v (of `type`) over [lo, hi) ascending: kUnroll copies of `body` (which uses v) per loop
// iteration, then the last (hi - lo) % kUnroll guarded by v < hi outside the loop: floor((hi - lo)
// / kUnroll) loop iterations. Indented by `ind`.
std::string unrolled(const std::string& v, const std::string& lo, const std::string& hi, const std::string& body,
                     const std::string& ind, const std::string& type = "int64_t");
inline int64_t unrolled_iterations(int64_t n) { return n / kUnroll + 1; }

// Tree passes: the sum over the workgroup of `A value` into `A total` (every invocation gets
// it), through `shared A <array>[workgroup]` declared by tree_shared; log2(workgroup) iterations.
std::string tree_shared(const std::string& A, const std::string& array, const GlslTarget& target);
std::string tree_sum(const std::string& A, const std::string& array, const std::string& value, const std::string& total,
                     const GlslTarget& target);
int64_t tree_iterations(const GlslTarget& target);

// `g<arg>.d[uint(off)]` loaded as its register value, and the statement storing value `v` (of
// register dtype value_dt) there.
std::string load(const ExprTable& t, uint8_t dt, int arg, const std::string& off);
std::string store(const ExprTable& t, uint8_t dt, int arg, const std::string& off, uint8_t value_dt,
                  const std::string& v);

// The families (each checks its operands; false and *why when it has no shader for them).
bool conv_pool(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why);
bool sort_scan(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why);
bool index_add(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why);
bool attention(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               const void* attrs, const GlslTarget& target, std::vector<GlslPass>& passes, std::string* why);

// Statements (indented by `ind`) applying a contraction epilogue's post-ops (abi.h EMBER_POST_*)
// to the value `y` (a declared `precise` variable of dtype dt's compute type): each post-op is
// spelled as the KIR instructions of the elementwise op it replaces
// (include/ember/elementwise_ops.def), through the target's expression table, so a fused result
// has the bits the unfused kernels give on the same device. `operand(k)` is the load expression of
// post-op operand k (the call's input k) at the element.
std::string post_ops(const ExprTable& t, uint8_t dt, const ember_epilogue_attrs& e,
                     const std::function<std::string(int)>& operand, const std::string& ind);
// Whether every post-op kind can be spelled for dt on this target.
bool post_ops_supported(const ExprTable& t, uint8_t dt);

// Whether the target has the f64 exp and log the f64 attention shaders call (glsl_f64_math.h).
bool has_f64_exp_log(const GlslTarget& target);

}  // namespace ember::emit::lib
