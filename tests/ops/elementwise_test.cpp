// Elementwise ops: arithmetic, integer division/remainder, pow, maximum/minimum, unary math,
// comparisons, logical ops, where, clamp; broadcasting, non-contiguous inputs, empty tensors,
// rank 0 and sizes that cross SIMD-tile and thread thresholds. Expected values are computed
// here in double precision (<cmath>) or written out by hand.
#include <cmath>
#include <limits>

#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double round_f32(double x) { return double(float(x)); }

class OpElementwise : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

// IEEE +, -, *, / are correctly rounded, so f32 results must equal the f64 result rounded to f32.
TEST_P(OpElementwise, ArithmeticF32IsCorrectlyRounded) {
  const int64_t n = 1000;
  std::vector<double> a = rand_f32(n, -100, 100, 1), b = rand_f32(n, -100, 100, 2);
  Array x = f32(a, {n}, dev), y = f32(b, {n}, dev);
  EXPECT_TRUE(same(add(x, y), map_d(zip_d(a, b, std::plus<>()), round_f32)));
  EXPECT_TRUE(same(sub(x, y), map_d(zip_d(a, b, std::minus<>()), round_f32)));
  EXPECT_TRUE(same(mul(x, y), map_d(zip_d(a, b, std::multiplies<>()), round_f32)));
  EXPECT_TRUE(same(div(x, y), map_d(zip_d(a, b, std::divides<>()), round_f32)));
  EXPECT_EQ(add(x, y).dtype(), DType::F32);
  // f64 keeps full precision.
  Array p = f64({0.1, 1e16}, {2}, dev), q = f64({0.2, 1}, {2}, dev);
  EXPECT_TRUE(same(add(p, q), {0.1 + 0.2, 1e16 + 1}));
  EXPECT_TRUE(same(div(f64({1}, {1}, dev), f64({3}, {1}, dev)), {1.0 / 3.0}));
}

TEST_P(OpElementwise, ArithmeticEachNumericDtype) {
  // Small integers are exact in every numeric dtype.
  std::vector<double> a = {0, 1, 2, 5, 7, 10}, b = {3, 1, 4, 2, 7, 6};
  for (DType t : numeric_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array x = make(a, {2, 3}, t, dev), y = make(b, {2, 3}, t, dev);
    EXPECT_EQ(add(x, y).dtype(), t);
    EXPECT_TRUE(same(add(x, y), {3, 2, 6, 7, 14, 16}));
    EXPECT_TRUE(same(mul(x, y), {0, 1, 8, 10, 49, 60}));
    EXPECT_TRUE(same(maximum(x, y), {3, 1, 4, 5, 7, 10}));
    EXPECT_TRUE(same(minimum(x, y), {0, 1, 2, 2, 7, 6}));
    EXPECT_TRUE(same(floor_div(x, y), {0, 1, 0, 2, 1, 1}));
    EXPECT_TRUE(same(rem(x, y), {0, 0, 2, 1, 0, 4}));
    if (t == DType::F32 || t == DType::F64 || t == DType::I32 || t == DType::I64 || t == DType::U32 ||
        t == DType::U64) {
      EXPECT_TRUE(same(pow(x, y), {0, 1, 16, 25, 823543, 1000000}));
    }
    if (!is_unsigned(t)) {
      EXPECT_TRUE(same(sub(x, y), {-3, 0, -2, 3, 0, 4}));
      EXPECT_TRUE(same(neg(x), {0, -1, -2, -5, -7, -10}));
      EXPECT_TRUE(same(abs(neg(x)), a));
      EXPECT_TRUE(same(relu(sub(x, y)), {0, 0, 0, 3, 0, 4}));
    } else {
      // Unsigned: a - b wraps modulo 2^bits (the double of 2^64 - 3 is 2^64).
      auto wrapped = [t](int64_t v) {
        return t == DType::U64 ? double(uint64_t(v)) : double(uint64_t(v) & ((uint64_t(1) << (8 * dtype_size(t))) - 1));
      };
      EXPECT_TRUE(same(relu(sub(x, y)), {wrapped(-3), 0, wrapped(-2), 3, 0, 4}));
      EXPECT_TRUE(same(neg(x), {0, wrapped(-1), wrapped(-2), wrapped(-5), wrapped(-7), wrapped(-10)}));
    }
  }
}

TEST_P(OpElementwise, IntegerWrapAround) {
  // u8 wraps modulo 256; i32 modulo 2^32; i64 modulo 2^64.
  Array u = make({255, 0, 200}, {3}, DType::U8, dev);
  EXPECT_TRUE(same(add(u, 1), {0, 1, 201}));
  EXPECT_TRUE(same(sub(u, 1), {254, 255, 199}));
  EXPECT_TRUE(same(mul(u, 2), {254, 0, 144}));
  EXPECT_TRUE(same(neg(u), {1, 0, 56}));
  Array i = i32({2147483647, -2147483648.0}, {2}, dev);
  EXPECT_TRUE(same(add(i, 1), {-2147483648.0, -2147483647.0}));
  EXPECT_TRUE(same(neg(i), {-2147483647.0, -2147483648.0}));
  EXPECT_TRUE(same(abs(i), {2147483647.0, -2147483648.0}));
  EXPECT_TRUE(same(pow(i32({2}, {1}, dev), 31), {-2147483648.0}));
  Array l = from_vector(std::vector<int64_t>{INT64_MAX}, {1}, dev);
  EXPECT_EQ(add(l, 1).to_vector<int64_t>(), std::vector<int64_t>{INT64_MIN});
  EXPECT_EQ(pow(from_vector(std::vector<int64_t>{2}, {1}, dev), 62).to_vector<int64_t>(),
            std::vector<int64_t>{int64_t(1) << 62});
  EXPECT_EQ(pow(from_vector(std::vector<int64_t>{3}, {1}, dev), 39).to_vector<int64_t>(),
            std::vector<int64_t>{4052555153018976267LL});  // 3^39 < 2^63
}

// floor_div rounds toward -inf; rem has the sign of the divisor (Python's // and %).
TEST_P(OpElementwise, IntegerFloorDivRemNegativeOperands) {
  std::vector<double> a = {-7, 7, -7, 7, -8, 0, 5, -1, 1, -6};
  std::vector<double> b = {2, 2, -2, -2, 2, 3, -1, 3, -3, 3};
  std::vector<double> q = {-4, 3, 3, -4, -4, 0, -5, -1, -1, -2};
  std::vector<double> r = {1, 1, -1, -1, 0, 0, 0, 2, -2, 0};
  for (DType t : {DType::I32, DType::I64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array x = make(a, {10}, t, dev), y = make(b, {10}, t, dev);
    EXPECT_EQ(floor_div(x, y).dtype(), t);
    EXPECT_EQ(rem(x, y).dtype(), t);
    EXPECT_TRUE(same(floor_div(x, y), q));
    EXPECT_TRUE(same(rem(x, y), r));
    // x == floor_div(x, y) * y + rem(x, y)
    EXPECT_TRUE(same(add(mul(floor_div(x, y), y), rem(x, y)), a));
  }
  // Scalar operands on either side.
  EXPECT_TRUE(same(floor_div(i32({-7}, {1}, dev), 2), {-4}));
  EXPECT_TRUE(same(rem(7, i32({-2}, {1}, dev)), {-1}));
  // The most negative value divided by -1 wraps (two's complement), its remainder is 0.
  Array m = i32({-2147483648.0}, {1}, dev);
  EXPECT_TRUE(same(floor_div(m, -1), {-2147483648.0}));
  EXPECT_TRUE(same(rem(m, -1), {0}));
  Array m64 = from_vector(std::vector<int64_t>{INT64_MIN}, {1}, dev);
  EXPECT_EQ(floor_div(m64, int64_t(-1)).to_vector<int64_t>(), std::vector<int64_t>{INT64_MIN});
  EXPECT_EQ(rem(m64, int64_t(-1)).to_vector<int64_t>(), std::vector<int64_t>{0});
}

TEST_P(OpElementwise, FloatFloorDivRem) {
  std::vector<double> a = {-7.5, 7.5, -7.5, 7.5, 5, -0.5, 1, 1, 3};
  std::vector<double> b = {2, 2, -2, -2, 2.5, 4, 0, -0.0, kInf};
  std::vector<double> q = {-4, 3, 3, -4, 2, -1, kInf, -kInf, 0};
  std::vector<double> r = {0.5, 1.5, -1.5, -0.5, 0, 3.5, kNaN, kNaN};
  for (DType t : {DType::F32, DType::F64}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array x = make(a, {9}, t, dev), y = make(b, {9}, t, dev);
    EXPECT_TRUE(same(floor_div(x, y), q));
    std::vector<double> got = vals(rem(x, y));
    got.pop_back();  // 3 rem inf: 3 (C fmod); not pinned down here
    EXPECT_TRUE(same(got, r));
  }
  EXPECT_TRUE(same(rem(f32({-7.5}, {1}, dev), 2), {0.5}));
  EXPECT_TRUE(same(rem(make({-7.5}, {1}, DType::F16, dev), 2), {0.5}));
  EXPECT_TRUE(same(floor_div(make({-7.5}, {1}, DType::BF16, dev), 2), {-4}));
}

TEST_P(OpElementwise, TrueDivisionOfIntegersGivesF32) {
  Array x = i32({7, -7, 1, 0, -1}, {5}, dev), y = i32({2, 2, 0, 0, 0}, {5}, dev);
  Array d = div(x, y);
  EXPECT_EQ(d.dtype(), DType::F32);
  EXPECT_TRUE(same(d, {3.5, -3.5, kInf, kNaN, -kInf}));
  EXPECT_EQ(div(make({1}, {1}, DType::U8, dev), make({4}, {1}, DType::U8, dev)).dtype(), DType::F32);
  EXPECT_EQ(div(make({1}, {1}, DType::Bool, dev), make({1}, {1}, DType::Bool, dev)).dtype(), DType::F32);
  EXPECT_EQ(div(i64({1}, {1}, dev), 2).dtype(), DType::F32);
  EXPECT_EQ(div(f64({1}, {1}, dev), 2).dtype(), DType::F64);
  EXPECT_EQ(div(make({1}, {1}, DType::F16, dev), 2).dtype(), DType::F16);
}

TEST_P(OpElementwise, IntegerDivisionByZeroErrorsAtRead) {
  Array x = i32({1, 2, 3}, {3}, dev), z = i32({1, 0, 1}, {3}, dev);
  Array q = floor_div(x, z);  // construction succeeds: the values are not known yet
  EMBER_EXPECT_ERROR(q.to_vector<int32_t>(), "floor_div", "division by zero", "elementwise_test.cpp:");
  Array r = rem(x, z);
  EMBER_EXPECT_ERROR(r.to_vector<int32_t>(), "rem", "by zero", "elementwise_test.cpp:");
  EMBER_EXPECT_ERROR(floor_div(i64({5}, {1}, dev), 0).item<int64_t>(), "floor_div", "zero");
  EMBER_EXPECT_ERROR(rem(make({5}, {1}, DType::U8, dev), 0).item<int64_t>(), "rem", "zero");
  // Integer pow with a negative exponent has no integer result.
  EMBER_EXPECT_ERROR(pow(i32({2, 2}, {2}, dev), i32({1, -1}, {2}, dev)).to_vector<int32_t>(), "pow", "negative");
  // The library is usable after the error.
  EXPECT_TRUE(same(floor_div(x, 2), {0, 1, 1}));
}

TEST_P(OpElementwise, PowFloat) {
  std::vector<double> a = {2, 2, 9, 0, -8, -2, 1.5, 4};
  std::vector<double> b = {10, -1, 0.5, 0, 1.0 / 3.0, 3, 2, -0.5};
  for (DType t : {DType::F32, DType::F64}) {
    std::vector<double> a2 = a, b2 = b;
    if (t == DType::F32) b2 = map_d(b, round_f32);
    std::vector<double> want = zip_d(a2, b2, [](double x, double y) { return std::pow(x, y); });
    if (t == DType::F32) want = map_d(want, round_f32);
    EXPECT_TRUE(all_close(pow(make(a2, {8}, t, dev), make(b2, {8}, t, dev)), want, rtol_for(t), 0));
  }
  EXPECT_TRUE(same(pow(f32({3}, {1}, dev), 2), {9}));
  EXPECT_TRUE(same(pow(2, f32({3, -2}, {2}, dev)), {8, 0.25}));
  EXPECT_TRUE(same(pow(i32({2, -3, 5}, {3}, dev), 0.5), {round_f32(std::sqrt(2.0)), kNaN, round_f32(std::sqrt(5.0))}));
  EXPECT_TRUE(same(pow(i32({-2, -2, 0, 1}, {4}, dev), i32({3, 0, 0, 100}, {4}, dev)), {-8, 1, 1, 1}));
}

TEST_P(OpElementwise, MaxMinReluPropagateNaN) {
  Array x = f32({kNaN, 1, kNaN, -kInf, 3}, {5}, dev), y = f32({1, kNaN, kNaN, 0, kInf}, {5}, dev);
  EXPECT_TRUE(same(maximum(x, y), {kNaN, kNaN, kNaN, 0, kInf}));
  EXPECT_TRUE(same(minimum(x, y), {kNaN, kNaN, kNaN, -kInf, 3}));
  EXPECT_TRUE(same(relu(x), {kNaN, 1, kNaN, 0, 3}));
  EXPECT_TRUE(same(maximum(f64({kNaN}, {1}, dev), 0), {kNaN}));
  EXPECT_TRUE(same(minimum(0, f64({kNaN}, {1}, dev)), {kNaN}));
  EXPECT_TRUE(same(relu(make({kNaN, -1, 2}, {3}, DType::F16, dev)), {kNaN, 0, 2}));
  EXPECT_TRUE(same(relu(make({kNaN, -1, 2}, {3}, DType::BF16, dev)), {kNaN, 0, 2}));
  EXPECT_TRUE(same(relu(i32({-5, 0, 5}, {3}, dev)), {0, 0, 5}));
  EXPECT_EQ(relu(i32({1}, {1}, dev)).dtype(), DType::I32);
}

struct UnaryCase {
  const char* name;
  Array (*op)(const Array&, Loc);
  double (*ref)(double);
  double lo, hi;
};

double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double ref_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double ref_relu(double x) { return x > 0 ? x : 0; }
double ref_neg(double x) { return -x; }
double ref_exp(double x) { return std::exp(x); }
double ref_log(double x) { return std::log(x); }
double ref_sqrt(double x) { return std::sqrt(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_erf(double x) { return std::erf(x); }
double ref_abs(double x) { return std::fabs(x); }

const UnaryCase kUnary[] = {
    {"neg", &ember::neg, &ref_neg, -10, 10},       {"abs", &ember::abs, &ref_abs, -10, 10},
    {"exp", &ember::exp, &ref_exp, -20, 20},       {"log", &ember::log, &ref_log, 1e-3, 1e3},
    {"sqrt", &ember::sqrt, &ref_sqrt, 0, 1e4},     {"tanh", &ember::tanh, &ref_tanh, -6, 6},
    {"erf", &ember::erf, &ref_erf, -4, 4},         {"sigmoid", &ember::sigmoid, &ref_sigmoid, -20, 20},
    {"relu", &ember::relu, &ref_relu, -5, 5},      {"gelu", &ember::gelu, &ref_gelu, -6, 6},
};

// Unary math against <cmath> in f64, on inputs exactly representable in each dtype.
TEST_P(OpElementwise, UnaryMathAgainstCmath) {
  const int64_t n = 777;  // not a multiple of any tile width
  for (const UnaryCase& c : kUnary) {
    for (DType t : float_dtypes()) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(t)));
      std::vector<double> in = vals(make(rand_d(n, c.lo, c.hi, 11), {n}, t, dev));  // rounded to t
      Array y = c.op(make(in, {n}, t, dev), Loc::current());
      EXPECT_EQ(y.dtype(), t);
      // Each result may be off by its dtype's rounding; the absolute floor covers values near 0
      // where the relative error of the function's argument dominates (tanh, erf, gelu).
      double atol = t == DType::F64 ? 1e-15 : (t == DType::F32 ? 1e-7 : (t == DType::F16 ? 1e-3 : 8e-3));
      std::vector<double> want = map_d(in, c.ref);
      if (t == DType::F16)  // beyond f16's range (exp of large inputs): infinity
        want = map_d(want, [](double w) { return std::fabs(w) >= 65520 ? std::copysign(kInf, w) : w; });
      EXPECT_TRUE(all_close(y, want, rtol_for(t), atol));
    }
  }
}

TEST_P(OpElementwise, UnaryMathSpecialValues) {
  Array x = f32({0, -0.0, kInf, -kInf, kNaN, -1}, {6}, dev);
  EXPECT_TRUE(same(exp(x), {1, 1, kInf, 0, kNaN, round_f32(std::exp(-1.0))}));
  EXPECT_TRUE(same(log(x), {-kInf, -kInf, kInf, kNaN, kNaN, kNaN}));
  EXPECT_TRUE(same(sqrt(x), {0, -0.0, kInf, kNaN, kNaN, kNaN}));
  EXPECT_TRUE(same(tanh(x), {0, 0, 1, -1, kNaN, round_f32(std::tanh(-1.0))}));
  EXPECT_TRUE(same(erf(x), {0, 0, 1, -1, kNaN, round_f32(std::erf(-1.0))}));
  EXPECT_TRUE(all_close(sigmoid(x), {0.5, 0.5, 1, 0, kNaN, ref_sigmoid(-1)}, 1e-6, 0));
  EXPECT_TRUE(same(abs(x), {0, 0, kInf, kInf, kNaN, 1}));
  EXPECT_TRUE(same(neg(x), {-0.0, 0, -kInf, kInf, kNaN, 1}));
  EXPECT_TRUE(all_close(gelu(f32({0, kInf, kNaN, 1}, {4}, dev)), {0, kInf, kNaN, ref_gelu(1)}, 1e-6, 0));
  // Large arguments saturate instead of overflowing to NaN.
  EXPECT_TRUE(same(sigmoid(f32({-200, 200}, {2}, dev)), {0, 1}));
  EXPECT_TRUE(same(tanh(f32({-200, 200}, {2}, dev)), {-1, 1}));
  // Float ops on integer or bool inputs compute in f32.
  Array e = exp(i32({0, 1, 2}, {3}, dev));
  EXPECT_EQ(e.dtype(), DType::F32);
  EXPECT_TRUE(all_close(e, {1, std::exp(1.0), std::exp(2.0)}, 2e-7, 0));
  EXPECT_EQ(sqrt(make({4}, {1}, DType::U8, dev)).dtype(), DType::F32);
  EXPECT_TRUE(same(sqrt(make({1, 0}, {2}, DType::Bool, dev)), {1, 0}));
  EXPECT_EQ(sigmoid(i64({0}, {1}, dev)).item<float>(), 0.5f);
}

TEST_P(OpElementwise, Comparisons) {
  Array x = f32({1, 2, 3, kNaN, -0.0}, {5}, dev), y = f32({2, 2, 2, kNaN, 0}, {5}, dev);
  EXPECT_EQ(eq(x, y).dtype(), DType::Bool);
  EXPECT_TRUE(same(eq(x, y), {0, 1, 0, 0, 1}));
  EXPECT_TRUE(same(ne(x, y), {1, 0, 1, 1, 0}));
  EXPECT_TRUE(same(lt(x, y), {1, 0, 0, 0, 0}));
  EXPECT_TRUE(same(le(x, y), {1, 1, 0, 0, 1}));
  EXPECT_TRUE(same(gt(x, y), {0, 0, 1, 0, 0}));
  EXPECT_TRUE(same(ge(x, y), {0, 1, 1, 0, 1}));
  for (DType t : all_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array a = make({0, 1, 1}, {3}, t, dev), b = make({1, 1, 0}, {3}, t, dev);
    EXPECT_TRUE(same(lt(a, b), {1, 0, 0}));
    EXPECT_TRUE(same(ge(a, b), {0, 1, 1}));
    EXPECT_TRUE(same(eq(a, b), {0, 1, 0}));
  }
  // Operands are promoted before comparing: 3 (i32) < 3.5 (f32); u8 200 > i32 -1.
  EXPECT_TRUE(same(lt(i32({3, 4}, {2}, dev), f32({3.5, 3.5}, {2}, dev)), {1, 0}));
  EXPECT_TRUE(same(gt(make({200}, {1}, DType::U8, dev), i32({-1}, {1}, dev)), {1}));
  EXPECT_TRUE(same(eq(i32({3}, {1}, dev), 3.5), {0}));
  EXPECT_TRUE(same(lt(i32({3}, {1}, dev), 3.5), {1}));
  EXPECT_TRUE(same(gt(2, f32({1, 3}, {2}, dev)), {1, 0}));
  // Large i64 values compare exactly (not through a double).
  Array big = from_vector(std::vector<int64_t>{(int64_t(1) << 53) + 1}, {1}, dev);
  EXPECT_TRUE(same(eq(big, int64_t(1) << 53), {0}));
}

TEST_P(OpElementwise, LogicalOps) {
  Array a = make({0, 0, 1, 1}, {4}, DType::Bool, dev), b = make({0, 1, 0, 1}, {4}, DType::Bool, dev);
  EXPECT_EQ(logical_and(a, b).dtype(), DType::Bool);
  EXPECT_TRUE(same(logical_and(a, b), {0, 0, 0, 1}));
  EXPECT_TRUE(same(logical_or(a, b), {0, 1, 1, 1}));
  EXPECT_TRUE(same(logical_not(a), {1, 1, 0, 0}));
  // Non-bool operands count as true when nonzero (NaN is nonzero).
  Array f = f32({0, -0.0, 2, kNaN}, {4}, dev);
  EXPECT_TRUE(same(logical_not(f), {1, 1, 0, 0}));
  EXPECT_TRUE(same(logical_and(f, i32({5, 5, 5, 5}, {4}, dev)), {0, 0, 1, 1}));
  EXPECT_TRUE(same(logical_or(i32({0, 3}, {2}, dev), 0), {0, 1}));
  EXPECT_TRUE(same(logical_and(true, a), {0, 0, 1, 1}));
  EXPECT_EQ(logical_not(make({0, 7}, {2}, DType::U8, dev)).dtype(), DType::Bool);
}

TEST_P(OpElementwise, Where) {
  Array c = make({1, 0, 1, 0}, {4}, DType::Bool, dev);
  Array a = f32({1, 2, 3, 4}, {4}, dev), b = f32({-1, -2, -3, -4}, {4}, dev);
  EXPECT_TRUE(same(where(c, a, b), {1, -2, 3, -4}));
  EXPECT_TRUE(same(where(c, a, 0), {1, 0, 3, 0}));
  EXPECT_TRUE(same(where(c, 9, b), {9, -2, 9, -4}));
  // Values are promoted: i32 and f32 give f32; the condition may be any dtype (nonzero = true).
  Array w = where(f32({0.5, 0, kNaN}, {3}, dev), i32({1, 2, 3}, {3}, dev), f32({0.25, 0.25, 0.25}, {3}, dev));
  EXPECT_EQ(w.dtype(), DType::F32);
  EXPECT_TRUE(same(w, {1, 0.25, 3}));
  EXPECT_EQ(where(c, i32({1}, {1}, dev), i64({1}, {1}, dev)).dtype(), DType::I64);
  // Broadcasting across all three operands: [2,1] cond, [1,3] a, scalar b.
  Array wc = where(make({1, 0}, {2, 1}, DType::Bool, dev), f32({1, 2, 3}, {1, 3}, dev), full({}, -1.0, {.device = dev}));
  EXPECT_TRUE(same_shape(wc, {2, 3}));
  EXPECT_TRUE(same(wc, {1, 2, 3, -1, -1, -1}));
  // where keeps NaN from the chosen side only.
  EXPECT_TRUE(same(where(c, f32({kNaN, kNaN, 1, 1}, {4}, dev), b), {kNaN, -2, 1, -4}));
}

TEST_P(OpElementwise, Clamp) {
  Array x = f32({-5, -1, 0, 1, 5, kNaN}, {6}, dev);
  EXPECT_TRUE(same(clamp(x, -1.5, 2), {-1.5, -1, 0, 1, 2, kNaN}));
  EXPECT_TRUE(same(clamp(x, 0, std::nullopt), {0, 0, 0, 1, 5, kNaN}));
  EXPECT_TRUE(same(clamp(x, std::nullopt, 0), {-5, -1, 0, 0, 0, kNaN}));
  Array i = i32({-5, 3, 10}, {3}, dev);
  EXPECT_EQ(clamp(i, 0, 5).dtype(), DType::I32);
  EXPECT_TRUE(same(clamp(i, 0, 5), {0, 3, 5}));
  EXPECT_TRUE(same(clamp(i, std::nullopt, 4), {-5, 3, 4}));
  EXPECT_TRUE(same(clamp(make({0, 100, 255}, {3}, DType::U8, dev), 10, std::nullopt), {10, 100, 255}));
  // A float bound promotes an integer tensor to f32.
  Array fc = clamp(i, 0.5, 2.5);
  EXPECT_EQ(fc.dtype(), DType::F32);
  EXPECT_TRUE(same(fc, {0.5, 2.5, 2.5}));
  // Tensor bounds broadcast.
  Array lo = f32({0, 1}, {2, 1}, dev), hi = f32({2, 3, 4}, {1, 3}, dev);
  Array t = clamp(f32({-1, 2.5, 5}, {3}, dev), lo, hi);
  EXPECT_TRUE(same_shape(t, {2, 3}));
  EXPECT_TRUE(same(t, {0, 2.5, 4, 1, 2.5, 4}));
  EXPECT_TRUE(same(clamp(make({-70000, 0.5}, {2}, DType::F16, dev), -1, 1), {-1, 0.5}));
}

TEST_P(OpElementwise, Broadcasting) {
  // scalar tensor with a matrix
  Array s = f32({10}, {}, dev), m = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  Array r = add(s, m);
  EXPECT_TRUE(same_shape(r, {2, 3}));
  EXPECT_TRUE(same(r, {11, 12, 13, 14, 15, 16}));
  EXPECT_TRUE(same(sub(m, s), {-9, -8, -7, -6, -5, -4}));
  // [3,1] x [1,4] -> [3,4]
  Array c = f32({1, 2, 3}, {3, 1}, dev), row = f32({10, 20, 30, 40}, {1, 4}, dev);
  Array o = mul(c, row);
  EXPECT_TRUE(same_shape(o, {3, 4}));
  std::vector<double> want;
  for (int i = 1; i <= 3; ++i)
    for (int j = 1; j <= 4; ++j) want.push_back(i * j * 10.0);
  EXPECT_TRUE(same(o, want));
  // rank difference: [4] with [2,3,4]; [4,1] with [2,1,3]
  Array v = f32({1, 2, 3, 4}, {4}, dev);
  Array big = f32(iota_d(24), {2, 3, 4}, dev);
  std::vector<double> w2;
  for (int i = 0; i < 24; ++i) w2.push_back(i + (i % 4) + 1);
  EXPECT_TRUE(same(add(big, v), w2));
  EXPECT_TRUE(same(add(v, big), w2));
  Array p = sub(f32({1, 2, 3, 4}, {4, 1}, dev), f32(iota_d(6), {2, 1, 3}, dev));
  EXPECT_TRUE(same_shape(p, {2, 4, 3}));
  std::vector<double> w3;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) w3.push_back((i + 1) - (b * 3 + j));
  EXPECT_TRUE(same(p, w3));
  // size-1 dims on both sides, and a comparison that broadcasts
  EXPECT_TRUE(same(gt(c, f32({1.5, 2.5}, {1, 1, 2}, dev)), {0, 0, 1, 0, 1, 1}));
}

TEST_P(OpElementwise, NonContiguousInputs) {
  std::vector<double> d = iota_d(12);
  Array m = f32(d, {3, 4}, dev);
  // transposed [4,3] + contiguous [4,3]
  Array t = transpose(m, 0, 1);
  Array c = f32(iota_d(12, 100), {4, 3}, dev);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(d[size_t(j * 4 + i)] + 100 + i * 3 + j);
  EXPECT_TRUE(same(add(t, c), want));
  EXPECT_TRUE(same(add(c, t), want));
  // sliced with a step (every other column, reversed rows not supported: step > 0)
  Array sl = slice(m, 1, 0, 4, 2);  // [3,2]: columns 0 and 2
  EXPECT_TRUE(same(mul(sl, 2), {0, 4, 8, 12, 16, 20}));
  EXPECT_TRUE(same(exp(slice(f32({0, 9, 1, 9, 2}, {5}, dev), 0, 0, 5, 2)), {1, round_f32(std::exp(1.0)), round_f32(std::exp(2.0))}));
  // expanded (stride-0) input
  Array e = expand(f32({1, 2, 3}, {3, 1}, dev), {3, 4});
  EXPECT_TRUE(same(add(e, m), {1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14}));
  // two non-contiguous operands with different layouts
  Array a = permute(f32(iota_d(24), {2, 3, 4}, dev), {2, 0, 1});  // [4,2,3]
  Array b = slice(f32(iota_d(48), {4, 2, 6}, dev), 2, 1, 6, 2);   // [4,2,3]
  std::vector<double> w;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) w.push_back((j * 12 + k * 4 + i) - (i * 12 + j * 6 + 1 + 2 * k));
  EXPECT_TRUE(same(sub(a, b), w));
  EXPECT_TRUE(same(where(gt(a, 10), a, b), [&] {
    std::vector<double> ww;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 3; ++k) {
          double av = j * 12 + k * 4 + i, bv = i * 12 + j * 6 + 1 + 2 * k;
          ww.push_back(av > 10 ? av : bv);
        }
    return ww;
  }()));
}

TEST_P(OpElementwise, EmptyTensors) {
  Array e = f32({}, {0}, dev);
  EXPECT_TRUE(same_shape(add(e, e), {0}));
  EXPECT_TRUE(vals(add(e, 1)).empty());
  EXPECT_TRUE(vals(exp(e)).empty());
  Array e2 = zeros({2, 0}, {.device = dev});
  EXPECT_TRUE(same_shape(add(e2, f32({1, 2}, {2, 1}, dev)), {2, 0}));
  EXPECT_TRUE(same_shape(mul(e2, zeros({1, 0}, {.device = dev})), {2, 0}));
  EXPECT_TRUE(same_shape(where(lt(e2, 0), e2, 1.0), {2, 0}));
  EXPECT_TRUE(same_shape(cast(e2, DType::I32), {2, 0}));
  // [0] broadcasts with [1] and with a scalar, but not with [2].
  EXPECT_TRUE(same_shape(add(e, f32({1}, {1}, dev)), {0}));
  EMBER_EXPECT_ERROR(add(e, f32({1, 2}, {2}, dev)), "add", "[0]", "[2]");
  EXPECT_TRUE(vals(floor_div(i32({}, {0}, dev), 0)).empty());  // no element divides by zero
}

TEST_P(OpElementwise, RankZero) {
  Array a = f32({3}, {}, dev), b = f32({4}, {}, dev);
  Array c = mul(a, b);
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.item<float>(), 12.0f);
  EXPECT_EQ(neg(a).item<double>(), -3.0);
  EXPECT_EQ(lt(a, b).item<bool>(), true);
  EXPECT_EQ(where(lt(a, b), a, b).item<float>(), 3.0f);
  EXPECT_EQ(add(i32({2}, {}, dev), 3).item<int32_t>(), 5);
  EXPECT_EQ(clamp(a, 0, 1).item<float>(), 1.0f);
}

// Sizes around SIMD tile widths and thread-split thresholds: every element must be computed
// once, including the tail after the last full tile.
TEST_P(OpElementwise, SizesAcrossTileAndThreadBoundaries) {
  const bool slow = dev.kind == DeviceKind::Reference;
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(255), int64_t(256), int64_t(257), int64_t(1023),
                    int64_t(70001), int64_t(1) << 20}) {
    SCOPED_TRACE(n);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) a[size_t(i)] = float(i % 1000), b[size_t(i)] = float(i / 1000);
    Array x = from_vector(a, {n}, dev), y = from_vector(b, {n}, dev);
    std::vector<float> s = add(x, y).to_vector<float>();
    ASSERT_EQ(int64_t(s.size()), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(s[size_t(i)], float(i % 1000 + i / 1000)) << "element " << i;
    if (slow && n > 70001) continue;  // the scalar reference interpreter: one op at 2^20 is enough
    std::vector<float> m = maximum(mul(x, -1.0f), sub(y, 500.0f)).to_vector<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(m[size_t(i)], std::max(-float(i % 1000), float(i / 1000) - 500.0f)) << "element " << i;
    std::vector<double> e = vals(tanh(div(x, 500.0f)));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(e[size_t(i)], std::tanh(double(float(float(i % 1000) / 500.0f))), 3e-7) << "element " << i;
    std::vector<int64_t> q = ivals(rem(cast(x, DType::I32), 7));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(q[size_t(i)], (i % 1000) % 7) << "element " << i;
  }
}

TEST_P(OpElementwise, ScalarOperandsBothSides) {
  Array x = f32({1, 2, 4}, {3}, dev);
  EXPECT_TRUE(same(sub(10, x), {9, 8, 6}));
  EXPECT_TRUE(same(sub(x, 10), {-9, -8, -6}));
  EXPECT_TRUE(same(div(1, x), {1, 0.5, 0.25}));
  EXPECT_TRUE(same(div(x, 4), {0.25, 0.5, 1}));
  EXPECT_TRUE(same(pow(x, 2), {1, 4, 16}));
  EXPECT_TRUE(same(pow(2, x), {2, 4, 16}));
  EXPECT_TRUE(same(maximum(x, 2), {2, 2, 4}));
  EXPECT_TRUE(same(minimum(2.5, x), {1, 2, 2.5}));
  EXPECT_TRUE(same(add(true, x), {2, 3, 5}));
}

EMBER_OP_SUITE(OpElementwise);

}  // namespace
}  // namespace ember::testing
