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

// Operand of one EMBER_POST_ADD or MUL over a 2-D block: element (i, j) at p[i * rs + j * cs].
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

// y[j] = f(y[j], arg[j * arg_cs]) over a row, with loops the compiler vectorizes for a broadcast
// (arg_cs 0) and a contiguous operand.
template <class T, class F>
inline void operand_row(T* y, int64_t n, const T* arg, int64_t arg_cs, F f) {
  if (arg_cs == 0) {
    const T v = arg[0];
    for (int64_t j = 0; j < n; ++j) y[j] = f(y[j], v);
  } else if (arg_cs == 1) {
    for (int64_t j = 0; j < n; ++j) y[j] = f(y[j], arg[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = f(y[j], arg[j * arg_cs]);
  }
}

// One post-op over a row of n values (`arg` the operand row for EMBER_POST_ADD / MUL).
template <class T>
inline void post_op_row(const ember_post_op& op, T* y, int64_t n, const T* arg, int64_t arg_cs, PostScratch<T>& s) {
  switch (op.kind) {
    case EMBER_POST_ADD:
      operand_row(y, n, arg, arg_cs, [](T a, T b) { return a + b; });
      break;
    case EMBER_POST_MUL:
      operand_row(y, n, arg, arg_cs, [](T a, T b) { return a * b; });
      break;
    case EMBER_POST_LINEAR: {
      // x * c comes as (c, -0) and x + c as (1, c) (scheduler/epilogue.cpp): alpha * y + beta is
      // then each op exactly, zeros' signs included (x * c + -0 is x * c, also when it is -0).
      const T alpha = T(op.alpha), beta = T(op.beta);
      if (alpha == T(1)) {
        for (int64_t j = 0; j < n; ++j) y[j] = y[j] + beta;
      } else {
        for (int64_t j = 0; j < n; ++j) y[j] = alpha * y[j] + beta;
      }
      break;
    }
    case EMBER_POST_RELU:  // max(y, 0) as KIR MAX: NaN stays NaN, -0 becomes +0
      for (int64_t j = 0; j < n; ++j) y[j] = y[j] > T(0) || y[j] != y[j] ? y[j] : T(0);
      break;
    case EMBER_POST_TANH:
      for (int64_t j = 0; j < n; ++j) y[j] = std::tanh(y[j]);
      break;
    case EMBER_POST_SIGMOID:
      for (int64_t j = 0; j < n; ++j) y[j] = T(1) / (T(1) + std::exp(-y[j]));
      break;
    case EMBER_POST_GELU_ERF:  // 0.5 * x * (1 + erf(x * 0.7071...)), as ops.def's gelu
      s.t.resize(size_t(n));
      s.e.resize(size_t(n));
      for (int64_t j = 0; j < n; ++j) s.t[size_t(j)] = y[j] * T(0.70710678118654752440);
      erf_array(s.t.data(), s.e.data(), size_t(n));
      for (int64_t j = 0; j < n; ++j) y[j] = T(0.5) * y[j] * (T(1) + s.e[size_t(j)]);
      break;
    case EMBER_POST_GELU_TANH:
      for (int64_t j = 0; j < n; ++j) {
        const T x = y[j];
        y[j] = T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
      }
      break;
    default: break;
  }
}

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
