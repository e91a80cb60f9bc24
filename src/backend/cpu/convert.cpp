// Vectorized f32 <-> bf16 / f16 array conversions (convert.h). Highway compiles this file once per
// enabled target (foreach_target) and dispatches at run time; OpenMP splits large arrays into
// blocks. bf16 is integer arithmetic on the bits (the same rounding as ember::float_to_bf16). f16
// uses the F16C instructions on x86 targets (round to nearest even, subnormals exact); other
// targets, and any vector holding a NaN (F16C would keep a different payload or quiet a signalling
// one), take the scalar functions, so every path gives the same bits.
#include <omp.h>

#include <cstdint>
#include <cstring>

#include "backend/abi.h"
#include "backend/cpu/convert.h"
#include "backend/cpu/parallel_for.h"
#include "ember/dtype.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/convert.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace ember::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// F16C: Highway's f16 promote/demote are the hardware instructions on AVX2 and AVX-512; elsewhere
// they are an emulation that truncates, so those targets use the scalar functions.
#undef EMBER_CONVERT_F16C
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define EMBER_CONVERT_F16C 1
#else
#define EMBER_CONVERT_F16C 0
#endif

void WidenBf16(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(di, hn::LoadU(du16, src + i)))), df, dst + i);
  for (; i < n; ++i) dst[i] = ember::bf16_to_float(src[i]);
}

void NarrowBf16(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const size_t N = hn::Lanes(df);
  const auto k1 = hn::Set(di, 1), k7fff = hn::Set(di, 0x7fff), kffff = hn::Set(di, 0xffff);
  const auto kabs = hn::Set(di, 0x7fffffff), kinf = hn::Set(di, 0x7f800000), kquiet = hn::Set(di, 0x40);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto x = hn::BitCast(di, hn::LoadU(df, src + i));
    const auto high = hn::ShiftRight<16>(x);  // arithmetic: only the low 16 bits are kept below
    const auto rounded = hn::ShiftRight<16>(hn::Add(x, hn::Add(k7fff, hn::And(high, k1))));
    const auto is_nan = hn::Gt(hn::And(x, kabs), kinf);
    const auto bits = hn::And(hn::IfThenElse(is_nan, hn::Or(high, kquiet), rounded), kffff);
    hn::StoreU(hn::DemoteTo(du16, bits), du16, dst + i);  // in [0, 0xffff]: the saturation never acts
  }
  for (; i < n; ++i) dst[i] = ember::float_to_bf16(src[i]);
}

void WidenF16(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  size_t i = 0;
#if EMBER_CONVERT_F16C
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t N = hn::Lanes(df);
  for (; i + N <= n; i += N) {
    const auto v = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(src + i)));
    if (HWY_UNLIKELY(!hn::AllFalse(df, hn::IsNaN(v)))) {
      for (size_t j = i; j < i + N; ++j) dst[j] = ember::half_to_float(src[j]);
    } else {
      hn::StoreU(v, df, dst + i);
    }
  }
#endif
  for (; i < n; ++i) dst[i] = ember::half_to_float(src[i]);
}

void NarrowF16(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n) {
  size_t i = 0;
#if EMBER_CONVERT_F16C
  const hn::ScalableTag<float> df;
  const hn::Rebind<hwy::float16_t, decltype(df)> dh;
  const size_t N = hn::Lanes(df);
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(df, src + i);
    if (HWY_UNLIKELY(!hn::AllFalse(df, hn::IsNaN(v)))) {
      for (size_t j = i; j < i + N; ++j) dst[j] = ember::float_to_half(src[j]);
    } else {
      hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(dst + i));
    }
  }
#endif
  for (; i < n; ++i) dst[i] = ember::float_to_half(src[i]);
}

// True if no element is an infinity or a NaN: the exponent field of every element is below its
// all-ones value. `mask` is that field (0x7f800000 for f32 bits, 0x7f80 for bf16, 0x7c00 for f16).
template <class T>
bool AllFiniteBits(const T* HWY_RESTRICT bits, size_t n, T mask) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  const auto m = hn::Set(d, mask);
  auto bad = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto e = hn::And(hn::LoadU(d, bits + i), m);
    bad = hn::Or(bad, hn::VecFromMask(d, hn::Eq(e, m)));
  }
  if (!hn::AllTrue(d, hn::Eq(bad, hn::Zero(d)))) return false;
  for (; i < n; ++i)
    if ((bits[i] & mask) == mask) return false;
  return true;
}
bool AllFinite32(const uint32_t* HWY_RESTRICT bits, size_t n) { return AllFiniteBits<uint32_t>(bits, n, 0x7f800000u); }
bool AllFinite16(const uint16_t* HWY_RESTRICT bits, size_t n, uint16_t mask) { return AllFiniteBits<uint16_t>(bits, n, mask); }

}  // namespace ember::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ember::cpu {

HWY_EXPORT(WidenBf16);
HWY_EXPORT(NarrowBf16);
HWY_EXPORT(WidenF16);
HWY_EXPORT(NarrowF16);
HWY_EXPORT(AllFinite32);
HWY_EXPORT(AllFinite16);

namespace {
// Blocks of this many elements per OpenMP iteration; arrays below two blocks stay on one thread.
constexpr int64_t kBlock = int64_t(1) << 15;
[[maybe_unused]] bool threads_worth(int64_t n) { return n >= 2 * kBlock && !omp_in_parallel(); }
}  // namespace

void widen_to_f32(int32_t dtype, const uint16_t* src, float* dst, int64_t n) {
  const bool bf16 = dtype == EMBER_BF16;
  parallel_for(threads_worth(n), (n + kBlock - 1) / kBlock, [&](int64_t blk) {
    const int64_t b = blk * kBlock;
    const size_t m = size_t(n - b < kBlock ? n - b : kBlock);
    if (bf16) HWY_DYNAMIC_DISPATCH(WidenBf16)(src + b, dst + b, m);
    else HWY_DYNAMIC_DISPATCH(WidenF16)(src + b, dst + b, m);
  });
}

void narrow_from_f32(int32_t dtype, const float* src, uint16_t* dst, int64_t n) {
  const bool bf16 = dtype == EMBER_BF16;
  parallel_for(threads_worth(n), (n + kBlock - 1) / kBlock, [&](int64_t blk) {
    const int64_t b = blk * kBlock;
    const size_t m = size_t(n - b < kBlock ? n - b : kBlock);
    if (bf16) HWY_DYNAMIC_DISPATCH(NarrowBf16)(src + b, dst + b, m);
    else HWY_DYNAMIC_DISPATCH(NarrowF16)(src + b, dst + b, m);
  });
}

bool all_finite(int32_t dtype, const void* data, int64_t n) {
  if (dtype == EMBER_F32) return HWY_DYNAMIC_DISPATCH(AllFinite32)(static_cast<const uint32_t*>(data), size_t(n));
  const uint16_t mask = dtype == EMBER_BF16 ? 0x7f80 : 0x7c00;
  return HWY_DYNAMIC_DISPATCH(AllFinite16)(static_cast<const uint16_t*>(data), size_t(n), mask);
}

}  // namespace ember::cpu
#endif
