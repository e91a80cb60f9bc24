// The post-op row loops of post_ops.h, compiled for AVX-512 and AVX2 besides the baseline
// (target_clones, as gemv.cpp): the loops are simple enough to vectorize, and at batch 1 the
// convolutions' scale, shift and ReLU over whole output planes were 8 % of a CNN forward in SSE.
// Built with -ffp-contract=off (CMakeLists.txt): each post-op rounds as its unfused op does, so
// alpha * y + beta must not become an FMA.
#include "backend/cpu/post_ops.h"

namespace ember::cpu {

namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define EMBER_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define EMBER_CLONES
#endif

// y[j] = f(y[j], arg[j * arg_cs]) over a row, with loops the compiler vectorizes for a broadcast
// (arg_cs 0) and a contiguous operand.
template <class T, class F>
inline __attribute__((always_inline)) void operand_row(T* y, int64_t n, const T* arg, int64_t arg_cs, F f) {
  if (arg_cs == 0) {
    const T v = arg[0];
    for (int64_t j = 0; j < n; ++j) y[j] = f(y[j], v);
  } else if (arg_cs == 1) {
    for (int64_t j = 0; j < n; ++j) y[j] = f(y[j], arg[j]);
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = f(y[j], arg[j * arg_cs]);
  }
}

template <class T>
inline __attribute__((always_inline)) void post_op_row_in(const ember_post_op& op, T* y, int64_t n, const T* arg, int64_t arg_cs, PostScratch<T>& s) {
  switch (op.kind) {
    case EMBER_POST_ADD:
      operand_row(y, n, arg, arg_cs, [](T a, T b) { return a + b; });
      break;
    case EMBER_POST_MUL:
      operand_row(y, n, arg, arg_cs, [](T a, T b) { return a * b; });
      break;
    case EMBER_POST_MASK_POSITIVE:  // where(gt(o, 0), y, +0): a NaN o gives +0
      operand_row(y, n, arg, arg_cs, [](T a, T o) { return o > T(0) ? a : T(0); });
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

// The clones have internal linkage, as gemv.cpp's: their IFUNC resolvers then run through
// IRELATIVE relocations. An exported clone was resolved through its symbol while the plugin was
// being loaded, and under ThreadSanitizer that instrumented resolver crashed the process.
EMBER_CLONES void row_f32(const ember_post_op& op, float* y, int64_t n, const float* arg, int64_t arg_cs,
                          PostScratch<float>& s) {
  post_op_row_in(op, y, n, arg, arg_cs, s);
}

EMBER_CLONES void row_f64(const ember_post_op& op, double* y, int64_t n, const double* arg, int64_t arg_cs,
                          PostScratch<double>& s) {
  post_op_row_in(op, y, n, arg, arg_cs, s);
}

}  // namespace

void post_op_row(const ember_post_op& op, float* y, int64_t n, const float* arg, int64_t arg_cs,
                 PostScratch<float>& s) {
  row_f32(op, y, n, arg, arg_cs, s);
}

void post_op_row(const ember_post_op& op, double* y, int64_t n, const double* arg, int64_t arg_cs,
                 PostScratch<double>& s) {
  row_f64(op, y, n, arg, arg_cs, s);
}

}  // namespace ember::cpu
