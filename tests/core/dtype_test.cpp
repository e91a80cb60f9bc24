// Type promotion (the table in docs/semantics.md), scalar promotion and f16/bf16 rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "ember/dtype.h"

namespace ember {
namespace {

constexpr DType F32 = DType::F32, F64 = DType::F64, F16 = DType::F16, BF16 = DType::BF16, I32 = DType::I32,
                I64 = DType::I64, U8 = DType::U8, B = DType::Bool;

TEST(DTypeTest, PromotionTableMatchesPyTorch) {
  // Rows/columns in the order F32, F64, F16, BF16, I32, I64, U8, Bool; each entry was checked
  // against torch.promote_types (python3-torch 1.13).
  const DType all[] = {F32, F64, F16, BF16, I32, I64, U8, B};
  const DType expected[8][8] = {
      /*F32 */ {F32, F64, F32, F32, F32, F32, F32, F32},
      /*F64 */ {F64, F64, F64, F64, F64, F64, F64, F64},
      /*F16 */ {F32, F64, F16, F32, F16, F16, F16, F16},
      /*BF16*/ {F32, F64, F32, BF16, BF16, BF16, BF16, BF16},
      /*I32 */ {F32, F64, F16, BF16, I32, I64, I32, I32},
      /*I64 */ {F32, F64, F16, BF16, I64, I64, I64, I64},
      /*U8  */ {F32, F64, F16, BF16, I32, I64, U8, U8},
      /*Bool*/ {F32, F64, F16, BF16, I32, I64, U8, B},
  };
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(promote_types(all[i], all[j]), expected[i][j])
          << dtype_name(all[i]) << " with " << dtype_name(all[j]);
}

TEST(DTypeTest, WeakScalarsKeepTheTensorTypeWithinACategory) {
  EXPECT_EQ(promote_with_scalar(I32, DTypeCategory::Integral), I32);   // int32 + 1 -> int32
  EXPECT_EQ(promote_with_scalar(U8, DTypeCategory::Integral), U8);
  EXPECT_EQ(promote_with_scalar(I32, DTypeCategory::Floating), F32);   // int32 + 1.5 -> float32
  EXPECT_EQ(promote_with_scalar(F16, DTypeCategory::Floating), F16);   // half * 2.0 stays half
  EXPECT_EQ(promote_with_scalar(B, DTypeCategory::Integral), I64);     // bool + 1 -> int64
  EXPECT_EQ(promote_with_scalar(B, DTypeCategory::Bool), B);
  EXPECT_EQ(promote_with_scalar(F64, DTypeCategory::Integral), F64);
}

TEST(DTypeTest, HalfRoundsToNearestEven) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);                 // largest half
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);                 // rounds up to inf
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);       // tie: rounds to even (down)
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);       // tie: rounds to even (up)
  EXPECT_EQ(float_to_half(5.9604645e-08f), 0x0001);           // smallest subnormal 2^-24
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  for (uint32_t h = 0; h < 0x7c00; ++h) EXPECT_EQ(float_to_half(half_to_float(uint16_t(h))), h);
}

TEST(DTypeTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256), 0x3f80);        // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST(DTypeTest, Sizes) {
  EXPECT_EQ(dtype_size(F64), 8u);
  EXPECT_EQ(dtype_size(BF16), 2u);
  EXPECT_EQ(dtype_size(B), 1u);
  EXPECT_EQ(dtype_name(BF16), "bfloat16");
}

}  // namespace
}  // namespace ember
