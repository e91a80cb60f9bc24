// Small-M f32 products for the CPU backend (batch-1 inference, matrix-vector): y = a·B for a few
// rows of a, written as dot products (B transposed, Linear's x·Wᵀ) or row updates (B row-major).
// oneDNN's matmul costs tens of microseconds of setup per call at M = 1; these loops run at the
// speed of reading B. Compiled for AVX-512, AVX2 and baseline x86-64, picked at load time.
#pragma once

#include <cstdint>

namespace ember::cpu {

// c[i * c_rs + j] = sum_k a[i * a_rs + k * a_cs] * b[k * b_rs + j * b_cs] for i < M, j < N.
// Requires b to be row-major (b_cs == 1) or column-major (b_rs == 1); returns false otherwise.
bool small_m_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                      int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs);

// A product with at most 16 columns (attention's per-head products of short sequences): B is
// copied into 16-wide zero-padded rows and each row of c is one 16-lane accumulator, updated once
// per k (c[i * c_rs + j] for j < N). Any strides.
void narrow_gemm_f32(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                     int64_t b_rs, int64_t b_cs, float* c, int64_t c_rs);
constexpr int64_t kNarrowGemmMaxN = 16;

// Matrix-vector c[i * c_rs] = sum_k a[i * a_rs + k] * b[k * b_rs] (N = 1): four rows of a per
// pass over b. Requires contiguous rows of a (a_cs == 1) and b_rs == 1; returns false otherwise.
bool gemv_n1_f32(int64_t M, int64_t K, const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t b_rs,
                 float* c, int64_t c_rs);

}  // namespace ember::cpu
