// The oneDNN eltwise algorithm of each epilogue post-op kind (abi.h EMBER_POST_*), shared by the
// matmul and convolution primitives that run contraction epilogues (matmul_dnnl.cpp,
// conv_dnnl.cpp). Binary adds and multiplies are set up by callers; append_eltwise_post_op adds every other kind.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <vector>

#include "backend/abi.h"

namespace ember::cpu {

inline dnnl::algorithm eltwise_alg(int32_t kind) {
  switch (kind) {
    case EMBER_POST_TANH: return dnnl::algorithm::eltwise_tanh;
    case EMBER_POST_SIGMOID: return dnnl::algorithm::eltwise_logistic;
    case EMBER_POST_GELU_ERF: return dnnl::algorithm::eltwise_gelu_erf;
    case EMBER_POST_GELU_TANH: return dnnl::algorithm::eltwise_gelu_tanh;
    default: return dnnl::algorithm::eltwise_linear;
  }
}

// Appends post-op `op` (not EMBER_POST_ADD / MUL) to `po`.
// relu: oneDNN's eltwise_relu (alpha 0) is max(y, 0) in its JIT kernels, which turns NaN into 0
// (measured: relu(conv2d(x, w with NaN)) gave no NaN in 200,704 outputs), while Ember's relu keeps
// NaN. elu with alpha 0 is y > 0 ? y : 0 * (exp(y) - 1): y for y > 0, NaN for NaN, -0 for y <= 0
// (0 * a negative number); abs then turns -0 into +0, as max(y, 0) gives, and changes nothing else
// (every other value is >= 0 or NaN).
inline void append_eltwise_post_op(dnnl::post_ops& po, const ember_post_op& op) {
  if (op.kind == EMBER_POST_RELU) {
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_elu, 0.0f, 0.0f);
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_abs, 0.0f, 0.0f);
    return;
  }
  po.append_eltwise(1.0f, eltwise_alg(op.kind), float(op.alpha), float(op.beta));
}

// Whether oneDNN computes these post-ops as Ember does, down to the sign of zeros and NaN; if not,
// the whole chain runs in Ember's loops (post_ops.h) after the product. Measured on oneDNN 2.6.3
// (every post-op kind on +-0, denormals, +-1e30, +-inf, NaN and gelu's tail, as an eltwise
// primitive and as a matmul post-op; tests/scheduler/epilogue_nonfinite_test.cpp):
//  - erf-gelu gives +0 where Ember's 0.5 x (1 + erf(x / sqrt 2)) gives -0 (inputs below about
//    -5.5 and -1e30: 1 + erf rounds to 0), and keeps tail values Ember rounds to -0: not taken.
//  - linear (x * c as (c, -0), x + c as (1, c)) is alpha * y + beta exactly, -0 included, except
//    that alpha 1 turns -0 into +0 whatever beta's sign: x * 1 and x - 0 (beta -0) are not taken.
//    (With beta +0, x * c gave +0 for a -0 product; hence -0, scheduler/epilogue.cpp.)
//  - relu (elu + abs, above), tanh, logistic, gelu-tanh and binary add agree.
//  - oneDNN 2.6's JIT convolutions apply the parameters of an eltwise algorithm's first
//    occurrence to its later ones (measured: conv2d, then x * 2, then x * 0.5 gave 4x the
//    convolution), so a chain that repeats an algorithm (two scales or shifts, relu twice) is
//    not taken either.
inline bool dnnl_post_ops_faithful(const ember_epilogue_attrs& attrs) {
  std::vector<dnnl::algorithm> seen;
  for (int k = 0; k < attrs.n_ops; ++k) {
    const ember_post_op& op = attrs.ops[k];
    if (op.kind == EMBER_POST_MASK_POSITIVE) return false;  // a select: no oneDNN post-op computes it
    if (ember_post_has_operand(op.kind)) continue;
    if (op.kind == EMBER_POST_GELU_ERF) return false;
    if (op.kind == EMBER_POST_LINEAR && op.alpha == 1 && op.beta == 0 && std::signbit(op.beta)) return false;
    std::vector<dnnl::algorithm> algs;
    if (op.kind == EMBER_POST_RELU) algs = {dnnl::algorithm::eltwise_elu, dnnl::algorithm::eltwise_abs};
    else algs = {eltwise_alg(op.kind)};
    for (dnnl::algorithm a : algs) {
      for (dnnl::algorithm b : seen)
        if (a == b) return false;
      seen.push_back(a);
    }
  }
  return true;
}

// The position in oneDNN's post-op list of Ember's post-op k (relu takes two entries), for
// DNNL_ARG_ATTR_MULTIPLE_POST_OP.
inline int dnnl_post_op_index(const ember_epilogue_attrs& attrs, int k) {
  int at = 0;
  for (int j = 0; j < k; ++j) at += attrs.ops[j].kind == EMBER_POST_RELU ? 2 : 1;
  return at;
}

}  // namespace ember::cpu
