// Contraction epilogues on the CPU (abi.h EMBER_LIB_*_EPILOGUE): the post-ops applied in place to
// a 2-D block of a product's output, one row at a time (the row is in cache right after the
// product). Used where oneDNN's post-ops are not: the small-M loops, f64, layouts oneDNN refuses,
// and chains oneDNN would compute differently (dnnl_post_ops.h: erf-gelu, repeated algorithms).
// Each post-op is the unfused op's formula in the output's dtype, the same operations in the same
// order, so results match the separate kernels' bit for bit in the sign of zeros and NaN: relu is
// max(y, 0) with NaN kept (relu(-0) = +0), gelu takes its erf from the SIMD kernels' erf
// (tile_kernels.cpp, as the unfused gelu kernel does).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/abi.h"
#include "backend/cpu/program.h"

namespace ember::cpu {

// Operand of one EMBER_POST_ADD, MUL or MASK_POSITIVE over a 2-D block: element (i, j) at
// p[i * rs + j * cs].
template <class T>
struct PostArg {
  const T* p = nullptr;
  int64_t rs = 0, cs = 0;
};

// Scratch of one thread's rows: the copy of a strided row, gelu's erf arguments and values.
template <class T>
struct PostScratch {
  std::vector<T> row, t, e;
};

// One post-op over a row of n values (`arg` the operand row of a post-op with an operand, element j
// at arg[j * arg_cs]). post_ops.cpp, compiled for AVX-512 and AVX2 too.
void post_op_row(const ember_post_op& op, float* y, int64_t n, const float* arg, int64_t arg_cs,
                 PostScratch<float>& s);
void post_op_row(const ember_post_op& op, double* y, int64_t n, const double* arg, int64_t arg_cs,
                 PostScratch<double>& s);

// Applies attrs' post-ops to the M x N block c (element (i, j) at c[i * crs + j * ccs]); args[k]
// is the operand of post-op k over the same block (unused for other kinds). The rows of a large
// block are split over the OpenMP threads (run_tasks, program.h; one thread inside a parallel
// region).
template <class T>
void apply_post_ops(const ember_epilogue_attrs& attrs, const PostArg<T>* args, T* c, int64_t crs, int64_t ccs,
                    int64_t M, int64_t N) {
  run_tasks(M, M * N, [&](int64_t i0, int64_t i1) {
    PostScratch<T> s;
    if (ccs != 1) s.row.resize(size_t(N));
    for (int64_t i = i0; i < i1; ++i) {
      T* y = c + i * crs;
      if (ccs != 1) {
        for (int64_t j = 0; j < N; ++j) s.row[size_t(j)] = y[j * ccs];
        y = s.row.data();
      }
      for (int k = 0; k < attrs.n_ops; ++k) {
        const PostArg<T>& a = args[k];
        post_op_row(attrs.ops[k], y, N, a.p ? a.p + i * a.rs : nullptr, a.cs, s);
      }
      if (ccs != 1)
        for (int64_t j = 0; j < N; ++j) c[i * crs + j * ccs] = s.row[size_t(j)];
    }
  });
}

// Checks an epilogue call's attrs and operands against the output; nullptr or a reason.
inline const char* check_epilogue(const ember_epilogue_attrs* a, const ember_tensor_desc* in, int32_t n_in,
                                  const ember_tensor_desc& out) {
  if (!a || a->n_ops < 1 || a->n_ops > EMBER_MAX_POST_OPS) return "bad post-op count";
  if (out.dtype != EMBER_F32 && out.dtype != EMBER_F64) return "epilogues take f32 or f64";
  for (int k = 0; k < a->n_ops; ++k) {
    const ember_post_op& op = a->ops[k];
    if (op.kind < 0 || op.kind >= EMBER_POST_NUM_KINDS) return "unknown post-op";
    if (!ember_post_has_operand(op.kind)) continue;
    if (op.input < 0 || op.input >= n_in) return "post-op operand index out of range";
    const ember_tensor_desc& t = in[op.input];
    if (t.rank != out.rank || t.dtype != out.dtype || !t.buffer) return "post-op operand rank or dtype";
    for (int d = 0; d < t.rank; ++d)
      if (t.shape[d] != out.shape[d]) return "post-op operand shape differs from the output's";
  }
  return nullptr;
}

}  // namespace ember::cpu
