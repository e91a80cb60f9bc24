// The oneDNN eltwise algorithm of each epilogue post-op kind (abi.h EMBER_POST_*), shared by the
// matmul and convolution primitives that run contraction epilogues (matmul_dnnl.cpp,
// conv_dnnl.cpp). Binary adds and the constant scale/shift (eltwise_linear) are set up by callers.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "backend/abi.h"

namespace ember::cpu {

inline dnnl::algorithm eltwise_alg(int32_t kind) {
  switch (kind) {
    case EMBER_POST_RELU: return dnnl::algorithm::eltwise_relu;
    case EMBER_POST_TANH: return dnnl::algorithm::eltwise_tanh;
    case EMBER_POST_SIGMOID: return dnnl::algorithm::eltwise_logistic;
    case EMBER_POST_GELU_ERF: return dnnl::algorithm::eltwise_gelu_erf;
    case EMBER_POST_GELU_TANH: return dnnl::algorithm::eltwise_gelu_tanh;
    default: return dnnl::algorithm::eltwise_linear;
  }
}

}  // namespace ember::cpu
