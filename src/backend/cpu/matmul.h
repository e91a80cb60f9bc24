// EMBER_LIB_MATMUL for the CPU backend (matmul_dnnl.cpp): oneDNN for f32 (and f16/bf16 through
// f32), a blocked loop for f64 and the integer dtypes.
#pragma once

#include "backend/abi.h"

namespace ember::cpu {

int32_t matmul(const ember_tensor_desc* inputs, int32_t n_inputs, const ember_tensor_desc* outputs,
               int32_t n_outputs, ember_status* st);
// EMBER_LIB_MATMUL_EPILOGUE: the product, then the post-ops of attrs (ember_epilogue_attrs).
int32_t matmul_epilogue(const ember_tensor_desc* inputs, int32_t n_inputs, const ember_tensor_desc* outputs,
                        int32_t n_outputs, const void* attrs, ember_status* st);

}  // namespace ember::cpu
