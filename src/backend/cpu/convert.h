// Dense conversions between f32 and the 16-bit float storage dtypes (bf16, f16): the copies the CPU
// backend makes around oneDNN's f32 convolution, pooling and matmul when an operand is stored in 16
// bits (autocast's bf16/f16 training). Vectorized per SIMD target (Highway dynamic dispatch, F16C
// for f16 on AVX2/AVX-512) and split over OpenMP threads for large arrays. Results are bit-identical
// to ember::bf16_to_float / float_to_bf16 / half_to_float / float_to_half: round to nearest even,
// overflow to infinity, a NaN stays a NaN with the scalar functions' bits. Also a vectorized scan
// for non-finite values (the convolutions' guard, conv_dnnl.cpp).
#pragma once

#include <cstdint>

namespace ember::cpu {

// dst[i] = float(src[i]) for i < n; dtype is EMBER_BF16 or EMBER_F16 (abi.h).
void widen_to_f32(int32_t dtype, const uint16_t* src, float* dst, int64_t n);
// dst[i] = src[i] rounded to dtype (EMBER_BF16 or EMBER_F16) for i < n.
void narrow_from_f32(int32_t dtype, const float* src, uint16_t* dst, int64_t n);

// True if none of the n elements (dtype EMBER_F32, EMBER_BF16 or EMBER_F16) is an infinity or NaN.
bool all_finite(int32_t dtype, const void* data, int64_t n);

}  // namespace ember::cpu
