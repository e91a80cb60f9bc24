// EMBER_LIB_MATMUL for the CPU backend (matmul_dnnl.cpp): oneDNN for f32 (and f16/bf16 through
// f32), a blocked loop for f64 and the integer dtypes.
#pragma once

#include <cstdint>

#include "backend/abi.h"

namespace ember::cpu {

int32_t matmul(const ember_tensor_desc* inputs, int32_t n_inputs, const ember_tensor_desc* outputs,
               int32_t n_outputs, ember_status* st);
// EMBER_LIB_MATMUL_EPILOGUE: the product, then the post-ops of attrs (ember_epilogue_attrs).
int32_t matmul_epilogue(const ember_tensor_desc* inputs, int32_t n_inputs, const ember_tensor_desc* outputs,
                        int32_t n_outputs, const void* attrs, ember_status* st);

// One 2-D product c = a b on raw pointers (element (i, j) of a at a[i * a_rs + j * a_cs], c
// row-major with row stride c_rs), with the dispatch MATMUL uses for each batch entry: loops for
// tiny or few-row f32 products, oneDNN for the rest, blocked loops for f64. For library calls
// built from products (the LSTM recurrence, recurrence.cpp).
void gemm_2d(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
             int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs);
void gemm_2d(int64_t M, int64_t N, int64_t K, const double* a, int64_t a_rs, int64_t a_cs, const double* b,
             int64_t b_rs, int64_t b_cs, double* c, int64_t c_rs);

}  // namespace ember::cpu
