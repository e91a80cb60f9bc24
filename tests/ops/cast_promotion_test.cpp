// cast between every pair of dtypes, f16/bf16 rounding, and the type-promotion rules as seen
// through the ops (tensor-tensor table, weakly typed scalars, result dtypes of each rule).
#include <cmath>
#include <limits>

#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class OpCast : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

// The value a cast must produce from an exactly represented source value `v` (hand-written
// rules: nonzero -> true; float -> int truncates toward zero; integers wrap to the target width).
double cast_expect(double v, DType from, DType to) {
  if (to == DType::Bool) return v != 0 ? 1 : 0;
  if (is_floating(to)) return v;  // the inputs below are exact in every float dtype
  double t = is_floating(from) ? std::trunc(v) : v;
  auto wrap = [t](double modulus, bool is_signed) {  // t within i32 below
    double m = std::fmod(std::fmod(t, modulus) + modulus, modulus);
    return is_signed && m >= modulus / 2 ? m - modulus : m;
  };
  switch (to) {
    case DType::U8: return wrap(256, false);
    case DType::I8: return wrap(256, true);
    case DType::U16: return wrap(65536, false);
    case DType::I16: return wrap(65536, true);
    case DType::U32: return wrap(4294967296.0, false);
    case DType::U64: return t < 0 ? 18446744073709551616.0 + t : t;  // as a double: 2^64 - 1 rounds to 2^64
    default: return t;  // i32, i64
  }
}

// int8 sources: the int sources' values that int8 holds.
const std::vector<double>& u8_src_signed() {
  static const std::vector<double> v = {0, 1, -1, 2, -2, 100, 127, -128, -127, 55};
  return v;
}

TEST_P(OpCast, EveryDtypePair) {
  // Values exact in every float dtype (f16/bf16 included) and within i32.
  const std::vector<double> float_src = {0, 1, -1, 2.5, -2.5, 100, 200, 300, -0.75, 127.5};
  const std::vector<double> int_src = {0, 1, -1, 2, -2, 100, 200, 300, -129, 255};
  const std::vector<double> u8_src = {0, 1, 255, 2, 254, 100, 200, 44, 127, 128};
  const std::vector<double> u16_src = {0, 1, 65280, 2, 40960, 100, 200, 300, 32768, 128};  // exact in bf16 too
  const std::vector<double> bool_src = {0, 1, 1, 0, 1, 0, 0, 1, 1, 1};
  int pairs = 0;
  for (DType from : all_dtypes()) {
    const std::vector<double>& src = is_floating(from)                             ? float_src
                                     : from == DType::U8                           ? u8_src
                                     : from == DType::Bool                         ? bool_src
                                     : is_unsigned(from)                           ? u16_src
                                     : from == DType::I8                           ? u8_src_signed()
                                                                                   : int_src;
    Array x = make(src, {2, 5}, from, dev);
    for (DType to : all_dtypes()) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Array y = cast(x, to);
      EXPECT_EQ(y.dtype(), to);
      EXPECT_TRUE(same_shape(y, {2, 5}));
      std::vector<double> want;
      for (double v : src) want.push_back(cast_expect(v, from, to));
      EXPECT_TRUE(same(y, want));
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, 169);
}

TEST_P(OpCast, SixteenBitFloatRounding) {
  // f16: 11 significant bits, round to nearest even; max 65504; subnormals down to 2^-24.
  Array a = f64({1 + std::ldexp(1, -11), 1 + 3 * std::ldexp(1, -11), 1 + std::ldexp(1, -10), 65519, 65520, -1e6,
                 std::ldexp(1, -24), std::ldexp(1, -26), 0.1, kNaN, -kInf, 2049, 2051},
                {13}, dev);
  EXPECT_TRUE(same(cast(a, DType::F16),
                   {1, 1 + std::ldexp(1, -9), 1 + std::ldexp(1, -10), 65504, kInf, -kInf, std::ldexp(1, -24), 0,
                    0.0999755859375, kNaN, -kInf, 2048, 2052}));
  // bf16: 8 significant bits, round to nearest even, f32's range.
  Array b = f64({1 + std::ldexp(1, -8), 1 + 3 * std::ldexp(1, -8), 0.1, 3e38, 1e39, kNaN, 257, 259, -kInf},
                {9}, dev);
  EXPECT_TRUE(same(cast(b, DType::BF16),
                   {1, 1 + std::ldexp(1, -6), 0.10009765625, 3.00405527047391e+38, kInf, kNaN, 256, 260, -kInf}));
  // f64 -> f32 rounds to nearest; i64 -> f32 too (2^24 + 1 is a tie, goes to even).
  EXPECT_TRUE(same(cast(f64({0.1, 1e300}, {2}, dev), DType::F32), {double(0.1f), kInf}));
  Array big = from_vector(std::vector<int64_t>{(1 << 24) + 1, (1 << 24) + 3}, {2}, dev);
  EXPECT_TRUE(same(cast(big, DType::F32), {16777216, 16777220}));
  // f16 <-> bf16 goes through the value: 1/3 in f16 then in bf16.
  Array h = cast(f64({1.0 / 3.0}, {1}, dev), DType::F16);
  EXPECT_TRUE(same(h, {0.333251953125}));
  EXPECT_TRUE(same(cast(h, DType::BF16), {0.333984375}));
}

TEST_P(OpCast, BoolAndIntegerEdgeCases) {
  // float -> bool: nonzero is true, NaN is true, -0 is false.
  EXPECT_TRUE(same(cast(f32({0, -0.0, 0.25, kNaN, -kInf}, {5}, dev), DType::Bool), {0, 0, 1, 1, 1}));
  EXPECT_TRUE(same(cast(make({0, 0.5}, {2}, DType::F16, dev), DType::Bool), {0, 1}));
  // bool -> numbers: 0 and 1.
  Array b = make({1, 0}, {2}, DType::Bool, dev);
  for (DType t : numeric_dtypes()) EXPECT_TRUE(same(cast(b, t), {1, 0})) << dtype_name(t);
  // int -> bool: nonzero.
  EXPECT_TRUE(same(cast(i64({0, -5, 256}, {3}, dev), DType::Bool), {0, 1, 1}));
  EXPECT_TRUE(same(cast(make({0, 128}, {2}, DType::U8, dev), DType::Bool), {0, 1}));
  // u8 wraps modulo 256: 300 -> 44, -1 -> 255, 256 -> 0.
  EXPECT_TRUE(same(cast(i32({300, -1, 256, -256}, {4}, dev), DType::U8), {44, 255, 0, 0}));
  EXPECT_TRUE(same(cast(f32({300, -1, 255.9}, {3}, dev), DType::U8), {44, 255, 255}));
  // i64 -> i32 wraps modulo 2^32.
  Array w = from_vector(std::vector<int64_t>{(int64_t(1) << 32) + 5, int64_t(1) << 31, -(int64_t(1) << 31) - 1}, {3}, dev);
  EXPECT_TRUE(same(cast(w, DType::I32), {5, -2147483648.0, 2147483647.0}));
  // float -> int truncates toward zero.
  EXPECT_TRUE(same(cast(f64({2.99, -2.99, 0.5, -0.5, 1e9}, {5}, dev), DType::I32), {2, -2, 0, 0, 1e9}));
  EXPECT_TRUE(same(cast(f64({4e15 + 0.5, -4e15}, {2}, dev), DType::I64), {4e15, -4e15}));
  // Casting to the same dtype is the identity (same values).
  Array s = f32({1.5}, {1}, dev);
  EXPECT_TRUE(same(cast(s, DType::F32), {1.5}));
  // Casting non-contiguous and empty inputs.
  Array t = transpose(i32(iota_d(6), {2, 3}, dev), 0, 1);
  EXPECT_TRUE(same(cast(t, DType::F64), {0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(vals(cast(f32({}, {0}, dev), DType::U8)).empty());
  EXPECT_EQ(cast(f32({2.5}, {}, dev), DType::I64).item<int64_t>(), 2);
}

// ---- promotion --------------------------------------------------------------------------------
class OpPromotion : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

// The tensor-tensor promotion table, written out by hand: PyTorch's rules; for the unsigned
// types PyTorch leaves undefined, the smallest signed type holding both (NumPy's); ERR where no
// integer type holds both (uint64 with a signed type: an error, not a silent choice).
// Order: f32 f64 f16 bf16 i32 i64 u8 bool i8 i16 u16 u32 u64 (all_dtypes()).
constexpr DType F32 = DType::F32, F64 = DType::F64, F16 = DType::F16, B16 = DType::BF16, I32 = DType::I32,
                I64 = DType::I64, U8 = DType::U8, BOOL = DType::Bool, I8 = DType::I8, I16 = DType::I16,
                U16 = DType::U16, U32 = DType::U32, U64 = DType::U64;
constexpr DType ERR = DType(255);
const DType kTable[13][13] = {
    /*          f32  f64  f16  bf16 i32  i64  u8   bool i8   i16  u16  u32  u64 */
    /* f32  */ {F32, F64, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32, F32},
    /* f64  */ {F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64},
    /* f16  */ {F32, F64, F16, F32, F16, F16, F16, F16, F16, F16, F16, F16, F16},
    /* bf16 */ {F32, F64, F32, B16, B16, B16, B16, B16, B16, B16, B16, B16, B16},
    /* i32  */ {F32, F64, F16, B16, I32, I64, I32, I32, I32, I32, I32, I64, ERR},
    /* i64  */ {F32, F64, F16, B16, I64, I64, I64, I64, I64, I64, I64, I64, ERR},
    /* u8   */ {F32, F64, F16, B16, I32, I64, U8, U8, I16, I16, U16, U32, U64},
    /* bool */ {F32, F64, F16, B16, I32, I64, U8, BOOL, I8, I16, U16, U32, U64},
    /* i8   */ {F32, F64, F16, B16, I32, I64, I16, I8, I8, I16, I32, I64, ERR},
    /* i16  */ {F32, F64, F16, B16, I32, I64, I16, I16, I16, I16, I32, I64, ERR},
    /* u16  */ {F32, F64, F16, B16, I32, I64, U16, U16, I32, I32, U16, U32, U64},
    /* u32  */ {F32, F64, F16, B16, I64, I64, U32, U32, I64, I64, U32, U32, U64},
    /* u64  */ {F32, F64, F16, B16, ERR, ERR, U64, U64, ERR, ERR, U64, U64, U64},
};

TEST_P(OpPromotion, TensorTensorTableThroughOps) {
  ASSERT_EQ(all_dtypes().size(), 13u);
  for (int i = 0; i < 13; ++i)
    for (int j = 0; j < 13; ++j) {
      DType a = all_dtypes()[size_t(i)], b = all_dtypes()[size_t(j)], want = kTable[i][j];
      SCOPED_TRACE(std::string(dtype_name(a)) + " with " + std::string(dtype_name(b)));
      ASSERT_EQ(kTable[j][i], want);  // the table is symmetric
      Array x = make({1, 2}, {2}, a, dev), y = make({1, 1}, {2}, b, dev);
      if (want == ERR) {
        EMBER_EXPECT_ERROR(promote_types(a, b), "uint64", "cast");
        EMBER_EXPECT_ERROR(add(x, y), "uint64");
        EMBER_EXPECT_ERROR(eq(x, y), "uint64");
        continue;
      }
      EXPECT_EQ(promote_types(a, b), want);
      EXPECT_EQ(eq(x, y).dtype(), DType::Bool);
      EXPECT_EQ(where(make({1, 0}, {2}, BOOL, dev), x, y).dtype(), want);
      EXPECT_EQ(div(x, y).dtype(), is_floating(want) ? want : F32);
      if (want == BOOL) {
        EMBER_EXPECT_ERROR(add(x, y), "add", "bool");
        continue;
      }
      Array s = add(x, y);
      EXPECT_EQ(s.dtype(), want);
      EXPECT_EQ(mul(x, y).dtype(), want);
      EXPECT_EQ(maximum(x, y).dtype(), want);
      EXPECT_EQ(clamp(x, y, y).dtype(), want);
      EXPECT_EQ(cat({x, y}, 0).dtype(), want);
      std::vector<double> v = vals(s);
      EXPECT_TRUE(same(v, {2.0, a == BOOL ? 2.0 : 3.0}));
    }
}

TEST_P(OpPromotion, ScalarsAreWeaklyTyped) {
  // An int tensor with a float scalar: f32.
  Array i = i32({1, 2}, {2}, dev);
  Array r = add(i, 1.5);
  EXPECT_EQ(r.dtype(), DType::F32);
  EXPECT_TRUE(same(r, {2.5, 3.5}));
  EXPECT_EQ(add(i64({1}, {1}, dev), 0.5).dtype(), DType::F32);
  // An int scalar does not widen a narrower int tensor: u8 stays u8 and wraps.
  Array u = make({255, 254}, {2}, U8, dev);
  Array w = add(u, 1);
  EXPECT_EQ(w.dtype(), U8);
  EXPECT_TRUE(same(w, {0, 255}));
  EXPECT_EQ(add(i32({1}, {1}, dev), int64_t(1) << 40).dtype(), I32);
  // A float scalar does not widen a narrower float tensor.
  EXPECT_EQ(add(make({1}, {1}, F16, dev), 0.5).dtype(), F16);
  EXPECT_EQ(mul(make({1}, {1}, B16, dev), 2.0).dtype(), B16);
  EXPECT_EQ(add(f32({1}, {1}, dev), 1.0).dtype(), F32);  // a C++ double scalar stays weak
  // A higher-category scalar takes its category's default type.
  Array b = make({1, 0}, {2}, BOOL, dev);
  Array bi = add(b, 1);
  EXPECT_EQ(bi.dtype(), I64);
  EXPECT_TRUE(same(bi, {2, 1}));
  EXPECT_EQ(add(b, 0.5).dtype(), F32);
  EXPECT_EQ(mul(make({3}, {1}, U8, dev), 0.5).dtype(), F32);
  // bool scalar with a bool tensor is still bool, and arithmetic on that is rejected.
  EMBER_EXPECT_ERROR(add(b, true), "add", "bool");
  EXPECT_TRUE(same(logical_or(b, false), {1, 0}));
}

TEST_P(OpPromotion, ValuesAfterPromotion) {
  // i32 + i64 -> i64 with values beyond i32.
  Array a = i32({2147483647}, {1}, dev);
  Array b = from_vector(std::vector<int64_t>{1}, {1}, dev);
  Array s = add(a, b);
  EXPECT_EQ(s.dtype(), I64);
  EXPECT_EQ(s.to_vector<int64_t>(), std::vector<int64_t>{2147483648LL});
  // f16 + bf16 -> f32 with both values preserved exactly.
  Array h = make({0.1}, {1}, F16, dev), bf = make({0.1}, {1}, B16, dev);
  Array sum = add(h, bf);
  EXPECT_EQ(sum.dtype(), F32);
  EXPECT_TRUE(same(sum, {double(float(0.0999755859375 + 0.10009765625))}));
  // u8 + i32: 200 + (-100) = 100 in i32, not a u8 wrap.
  EXPECT_TRUE(same(add(make({200}, {1}, U8, dev), i32({-100}, {1}, dev)), {100}));
  // u8 - u8 wraps in u8.
  EXPECT_TRUE(same(sub(make({1}, {1}, U8, dev), make({2}, {1}, U8, dev)), {255}));
  // bool + u8 -> u8; bool + i32 -> i32.
  EXPECT_TRUE(same(add(make({1}, {1}, BOOL, dev), make({255}, {1}, U8, dev)), {0}));
  EXPECT_TRUE(same(add(make({1}, {1}, BOOL, dev), i32({-3}, {1}, dev)), {-2}));
  // int / int is true division in f32; floor_div keeps the integer type.
  EXPECT_TRUE(same(div(i32({1}, {1}, dev), i32({3}, {1}, dev)), {double(1.0f / 3.0f)}));
  EXPECT_EQ(floor_div(i32({7}, {1}, dev), i64({2}, {1}, dev)).dtype(), I64);
  // f32 with i64: f32 (values convert).
  EXPECT_TRUE(same(mul(f32({0.5}, {1}, dev), i64({3}, {1}, dev)), {1.5}));
  // f64 with anything: f64 precision.
  EXPECT_TRUE(same(add(f64({0.1}, {1}, dev), f32({0}, {1}, dev)), {0.1}));
}

TEST_P(OpPromotion, RuleOfEachOpKind) {
  Array i = i32({4}, {1}, dev), u = make({4}, {1}, U8, dev), b = make({1}, {1}, BOOL, dev);
  Array h = make({4}, {1}, F16, dev);
  // Numeric: same dtype, bool rejected.
  EXPECT_EQ(neg(i).dtype(), I32);
  EXPECT_EQ(abs(u).dtype(), U8);
  EXPECT_EQ(relu(h).dtype(), F16);
  EMBER_EXPECT_ERROR(neg(b), "neg", "bool");
  EMBER_EXPECT_ERROR(abs(b), "abs", "bool");
  EMBER_EXPECT_ERROR(relu(b), "relu", "bool");
  // Float: floats keep their dtype, everything else gives f32.
  for (auto f : {&ember::exp, &ember::log, &ember::sqrt, &ember::tanh, &ember::erf, &ember::sigmoid, &ember::gelu}) {
    EXPECT_EQ(f(i, Loc::current()).dtype(), F32);
    EXPECT_EQ(f(b, Loc::current()).dtype(), F32);
    EXPECT_EQ(f(h, Loc::current()).dtype(), F16);
    EXPECT_EQ(f(f64({1}, {1}, dev), Loc::current()).dtype(), F64);
  }
  // Logical: bool.
  EXPECT_EQ(logical_not(i).dtype(), BOOL);
  EXPECT_EQ(logical_and(h, i).dtype(), BOOL);
  // Reductions: sum/prod of integers and bool accumulate in i64; floats keep their dtype.
  EXPECT_EQ(sum(i).dtype(), I64);
  EXPECT_EQ(sum(u).dtype(), I64);
  EXPECT_EQ(sum(b).dtype(), I64);
  EXPECT_EQ(prod(i).dtype(), I64);
  EXPECT_EQ(sum(h).dtype(), F16);
  EXPECT_EQ(max(u).dtype(), U8);
  EXPECT_EQ(min(b).dtype(), BOOL);
  EXPECT_EQ(argmax(h, 0).dtype(), I64);
  EXPECT_EQ(mean(h).dtype(), F16);
  EMBER_EXPECT_ERROR(mean(i), "mean", "int32");
  // Matmul promotes.
  EXPECT_EQ(matmul(i32({1, 2}, {1, 2}, dev), f32({1, 2}, {2, 1}, dev)).dtype(), F32);
  EXPECT_EQ(matmul(i32({1, 2}, {1, 2}, dev), i64({1, 2}, {2, 1}, dev)).dtype(), I64);
  EMBER_EXPECT_ERROR(matmul(make({1}, {1, 1}, BOOL, dev), make({1}, {1, 1}, BOOL, dev)), "matmul", "bool");
}

EMBER_OP_SUITE(OpCast);
EMBER_OP_SUITE(OpPromotion);

}  // namespace
}  // namespace ember::testing
