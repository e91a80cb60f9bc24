// The CPU backend's vectorized bf16/f16 <-> f32 conversions (src/backend/cpu/convert.cpp), seen
// through the library ops that use them (pooling, matmul, convolution on 16-bit operands): every
// 16-bit pattern widens and narrows back to the bits ember's scalar functions give, and f32
// results round to nearest even (ties, subnormals, overflow, NaN) exactly as float_to_bf16 /
// float_to_half do. Contiguous operands take the vector path, transposed ones the row loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "ember/ember.h"

namespace ember {
namespace {

float widen(DType dt, uint16_t h) { return dt == DType::BF16 ? bf16_to_float(h) : half_to_float(h); }
uint16_t narrow(DType dt, float f) { return dt == DType::BF16 ? float_to_bf16(f) : float_to_half(f); }

// Every 16-bit pattern, as a [1, 1, 256, 256] tensor of dtype dt on the CPU.
Array all_patterns(DType dt) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t(i);
  return from_buffer(bits.data(), {1, 1, 256, 256}, dt, Device::cpu());
}

std::vector<uint16_t> bits_of(const Array& a) {
  Array c = contiguous(a);
  std::vector<uint16_t> out(size_t(c.numel()));
  if (c.dtype() == DType::BF16) {
    auto v = c.to_vector<BFloat16>();
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].bits;
  } else {
    auto v = c.to_vector<Half>();
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].bits;
  }
  return out;
}

TEST(CpuConvert, EveryBitPatternWidensAndNarrowsLikeTheScalarFunctions) {
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array x = all_patterns(dt);
    // A 1x1 max pool is the identity in f32: the output is narrow(widen(h)) for every pattern,
    // NaNs (quiet and signalling, every payload) included.
    std::vector<uint16_t> got = bits_of(max_pool2d(x, {.kernel = 1}));
    for (uint32_t h = 0; h < 65536; ++h)
      ASSERT_EQ(got[h], narrow(dt, widen(dt, uint16_t(h)))) << "pattern 0x" << std::hex << h;
    // The same through a transposed view (the strided row loop, not the vector path).
    std::vector<uint16_t> got_t = bits_of(max_pool2d(transpose(x, 2, 3), {.kernel = 1}));
    for (uint32_t r = 0; r < 256; ++r)
      for (uint32_t c = 0; c < 256; ++c) {
        const uint16_t h = uint16_t(c * 256 + r);
        ASSERT_EQ(got_t[r * 256 + c], narrow(dt, widen(dt, h))) << "pattern 0x" << std::hex << h;
      }
  }
}

// The first maximum of four values, a NaN winning (max_pool2d's rule), as 0..3.
int first_max(const float v[4]) {
  int k = 0;
  for (int e = 1; e < 4; ++e)
    if (v[e] > v[k] || (std::isnan(v[e]) && !std::isnan(v[k]))) k = e;
  return k;
}

TEST(CpuConvert, TwoByTwoMaxPoolOn16BitBitsPicksTheFirstMaximum) {
  // The 2x2 stride-2 forward and gradient run on the 16-bit bits (pool_max.cpp): every pattern,
  // shuffled so that windows mix signs, zeros of both signs, infinities and NaNs, against the rule
  // computed here (and a picked NaN as narrow(widen(h)) gives it).
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = uint16_t((i * 40503u + 12345u) & 0xffff);  // a permutation
  std::vector<uint16_t> gbits(16384);
  for (size_t i = 0; i < gbits.size(); ++i) gbits[i] = uint16_t((i * 7919u + 3u) & 0xffff);
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array x = from_buffer(bits.data(), {2, 2, 128, 128}, dt, Device::cpu());
    Array dy = from_buffer(gbits.data(), {2, 2, 64, 64}, dt, Device::cpu());
    std::vector<uint16_t> y = bits_of(max_pool2d(x, {.kernel = 2}));
    std::vector<uint16_t> dx = bits_of(max_pool2d_backward(dy, x, {.kernel = 2}));
    for (int64_t p = 0; p < 4; ++p)
      for (int64_t oh = 0; oh < 64; ++oh)
        for (int64_t ow = 0; ow < 64; ++ow) {
          const int64_t at[4] = {p * 16384 + 2 * oh * 128 + 2 * ow, p * 16384 + 2 * oh * 128 + 2 * ow + 1,
                                 p * 16384 + (2 * oh + 1) * 128 + 2 * ow, p * 16384 + (2 * oh + 1) * 128 + 2 * ow + 1};
          float v[4];
          for (int e = 0; e < 4; ++e) v[e] = widen(dt, bits[size_t(at[e])]);
          const int k = first_max(v);
          const int64_t o = p * 4096 + oh * 64 + ow;
          ASSERT_EQ(y[size_t(o)], narrow(dt, v[k])) << "window " << o;
          for (int e = 0; e < 4; ++e) {
            // The winner gets dy + 0 (a -0 gradient arrives as +0, as the reference's sum into
            // zeros gives it), every other entry +0.
            const uint16_t want = e == k ? narrow(dt, widen(dt, gbits[size_t(o)]) + 0.0f) : uint16_t(0);
            ASSERT_EQ(dx[size_t(at[e])], want) << "window " << o << " entry " << e;
          }
        }
  }
}

TEST(CpuConvert, ProductsRoundToNearestEvenLikeTheScalarFunctions) {
  // a [65536, 1] (every pattern) times b [1, 4]: each output is one product, exact in f32 (at most
  // 22 significant bits), so its rounding back to 16 bits is the conversion under test: ties to
  // even, results that become f16 subnormals, overflow to infinity, NaN and infinities.
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    const std::vector<float> scale = dt == DType::BF16 ? std::vector<float>{1.0f + 0x1p-7f, 0.75f, 3.0f, -1.5f}
                                                       : std::vector<float>{1.0f + 0x1p-10f, 0.75f, 3.0f, -1.5f};
    std::vector<uint16_t> bbits;
    for (float s : scale) bbits.push_back(narrow(dt, s));
    Array a = reshape(all_patterns(dt), {65536, 1});
    Array b = from_buffer(bbits.data(), {1, 4}, dt, Device::cpu());
    std::vector<uint16_t> got = bits_of(matmul(a, b));
    int64_t inexact = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      const float av = widen(dt, uint16_t(h));
      if (av == 0) continue;  // the sign of a zero product depends on the accumulator's start
      for (size_t j = 0; j < scale.size(); ++j) {
        const float p = av * widen(dt, bbits[j]);
        const uint16_t want = narrow(dt, p);
        if (std::isfinite(p) && widen(dt, want) != p) ++inexact;  // this product needs rounding
        const uint16_t g = got[h * 4 + j];
        // oneDNN's bf16 kernels (CPUs with bf16 units, dnnl_bf16.h) flush subnormal bf16 inputs and
        // results to zero, as the hardware's dot-product instructions do.
        const bool subnormal = dt == DType::BF16 && (std::fabs(av) < 0x1p-126f || std::fabs(p) < 0x1p-126f);
        if (std::isnan(p)) ASSERT_TRUE(std::isnan(widen(dt, g))) << "pattern 0x" << std::hex << h;
        else if (subnormal && widen(dt, g) == 0) continue;
        else ASSERT_EQ(g, want) << "pattern 0x" << std::hex << h << " times " << scale[j] << " = " << p;
      }
    }
    EXPECT_GT(inexact, 10000);  // the products really needed rounding
  }
}

TEST(CpuConvert, ConvolutionOn16BitOperandsMatchesF32ThenOneRounding) {
  // conv2d on f16 operands computes in f32 and rounds once: the f32 convolution of the widened
  // operands, rounded by the scalar function, bit for bit. bf16 on CPUs with bf16 units runs
  // oneDNN's bf16 kernels (f32 accumulation in another order, one rounding): within a bf16 step.
  for (DType dt : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_name(dt));
    Array x = cast(uniform({4, 3, 33, 35}, -2, 2, {.seed = 7}), dt);
    Array w = cast(uniform({8, 3, 3, 3}, -1, 1, {.seed = 8}), dt);
    std::vector<uint16_t> got = bits_of(conv2d(x, w, {.padding = 1}));
    std::vector<float> ref = contiguous(conv2d(cast(x, DType::F32), cast(w, DType::F32), {.padding = 1})).to_vector<float>();
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      if (dt == DType::F16) ASSERT_EQ(got[i], narrow(dt, ref[i])) << "element " << i;
      else ASSERT_NEAR(widen(dt, got[i]), ref[i], 1e-2 * std::fabs(ref[i]) + 1e-4) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace ember
