// The elementwise math, activation, rounding, predicate and bit ops added to the op table: values
// against <cmath> in double precision (or C++ integer operators for the bit ops) on every device,
// each floating dtype, integer inputs, special values, broadcasting, non-contiguous inputs, rank 0
// and empty tensors.
#include <cmath>
#include <limits>

#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class OpMath : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

struct UnaryCase {
  const char* name;
  Array (*op)(const Array&, Loc);
  double (*ref)(double);
  double lo, hi;
};

double softplus_ref(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

const UnaryCase kUnary[] = {
    {"expm1", expm1, [](double x) { return std::expm1(x); }, -5, 5},
    {"log1p", log1p, [](double x) { return std::log1p(x); }, -0.9, 5},
    {"log2", log2, [](double x) { return std::log2(x); }, 0.01, 100},
    {"log10", log10, [](double x) { return std::log10(x); }, 0.01, 100},
    {"rsqrt", rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.01, 100},
    {"recip", recip, [](double x) { return 1 / x; }, 0.5, 4},
    {"square", square, [](double x) { return x * x; }, -4, 4},
    {"sin", sin, [](double x) { return std::sin(x); }, -6, 6},
    {"cos", cos, [](double x) { return std::cos(x); }, -6, 6},
    {"tan", tan, [](double x) { return std::tan(x); }, -1.4, 1.4},
    {"asin", asin, [](double x) { return std::asin(x); }, -1, 1},
    {"acos", acos, [](double x) { return std::acos(x); }, -1, 1},
    {"atan", atan, [](double x) { return std::atan(x); }, -20, 20},
    {"sinh", sinh, [](double x) { return std::sinh(x); }, -5, 5},
    {"cosh", cosh, [](double x) { return std::cosh(x); }, -5, 5},
    {"asinh", asinh, [](double x) { return std::asinh(x); }, -50, 50},
    {"acosh", acosh, [](double x) { return std::acosh(x); }, 1, 50},
    {"atanh", atanh, [](double x) { return std::atanh(x); }, -0.99, 0.99},
    {"deg2rad", deg2rad, [](double x) { return x * M_PI / 180; }, -360, 360},
    {"rad2deg", rad2deg, [](double x) { return x * 180 / M_PI; }, -7, 7},
    {"gelu_tanh", gelu_tanh, gelu_tanh_ref, -5, 5},
    {"silu", silu, [](double x) { return x / (1 + std::exp(-x)); }, -8, 8},
    {"mish", mish, [](double x) { return x * std::tanh(softplus_ref(x)); }, -8, 8},
    {"hard_sigmoid", hard_sigmoid, [](double x) { return std::min(std::max(x + 3, 0.0), 6.0) / 6; }, -5, 5},
    {"hard_swish", hard_swish, [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }, -5, 5},
};

TEST_P(OpMath, UnaryAgainstCmathEachFloatDtype) {
  const int64_t n = 257;  // crosses SIMD tiles
  for (const UnaryCase& c : kUnary) {
    for (DType t : float_dtypes()) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(t)));
      std::vector<double> v = rand_d(n, c.lo, c.hi, 7);
      // Values the dtype holds exactly, so the expected value is computed from the same input.
      Array x = cast(f64(v, {n}, dev), t);
      std::vector<double> held = vals(x);
      Array y = c.op(x, Loc::current());
      EXPECT_EQ(y.dtype(), t);
      std::vector<double> want = map_d(held, c.ref);
      double rtol = t == DType::F64 ? 1e-13 : t == DType::F32 ? 4e-6 : rtol_for(t) * 2;
      double atol = t == DType::F64 ? 1e-15 : t == DType::F32 ? 1e-6 : 1e-2;
      EXPECT_TRUE(all_close(y, want, rtol, atol));
    }
  }
}

TEST_P(OpMath, TinyArgumentsKeepRelativeAccuracy) {
  // Where naive formulas cancel (exp(x) - 1, log(1 + x), sinh, asinh, atanh, atan near 0).
  std::vector<double> v = {1e-12, -3e-9, 2.5e-6, -1e-4, 1e-300, 0.0};
  Array x = f64(v, {6}, dev);
  EXPECT_TRUE(all_close(expm1(x), map_d(v, [](double a) { return std::expm1(a); }), 1e-14, 0));
  EXPECT_TRUE(all_close(log1p(x), map_d(v, [](double a) { return std::log1p(a); }), 1e-14, 0));
  EXPECT_TRUE(all_close(sinh(x), map_d(v, [](double a) { return std::sinh(a); }), 1e-14, 0));
  EXPECT_TRUE(all_close(asinh(x), map_d(v, [](double a) { return std::asinh(a); }), 1e-14, 0));
  EXPECT_TRUE(all_close(atanh(x), map_d(v, [](double a) { return std::atanh(a); }), 1e-14, 0));
  EXPECT_TRUE(all_close(atan(x), map_d(v, [](double a) { return std::atan(a); }), 1e-14, 0));
  EXPECT_TRUE(all_close(asin(x), map_d(v, [](double a) { return std::asin(a); }), 1e-14, 0));
  Array big = f64({1e10, -1e10, 1e300}, {3}, dev);
  EXPECT_TRUE(all_close(asinh(big), {std::asinh(1e10), std::asinh(-1e10), std::asinh(1e300)}, 1e-14, 0));
  EXPECT_TRUE(all_close(acosh(f64({1e10, 1 + 1e-10}, {2}, dev)), {std::acosh(1e10), std::acosh(1 + 1e-10)}, 1e-9, 0));
}

TEST_P(OpMath, SpecialValues) {
  Array x = f64({kNaN, kInf, -kInf, 0.0, -0.0}, {5}, dev);
  EXPECT_TRUE(same(expm1(x), {kNaN, kInf, -1, 0, 0}));
  EXPECT_TRUE(same(log1p(f64({kNaN, kInf, -1, -2, 0}, {5}, dev)), {kNaN, kInf, -kInf, kNaN, 0}));
  EXPECT_TRUE(same(atan(x), {kNaN, M_PI / 2, -M_PI / 2, 0, 0}));
  EXPECT_TRUE(same(sinh(x), {kNaN, kInf, -kInf, 0, 0}));
  EXPECT_TRUE(same(cosh(x), {kNaN, kInf, kInf, 1, 1}));
  EXPECT_TRUE(same(asin(f64({2, -1.5, 1, -1}, {4}, dev)), {kNaN, kNaN, M_PI / 2, -M_PI / 2}));
  EXPECT_TRUE(same(acos(f64({2, 1, -1}, {3}, dev)), {kNaN, 0, M_PI}));
  EXPECT_TRUE(same(atanh(f64({1, -1, 2}, {3}, dev)), {kInf, -kInf, kNaN}));
  EXPECT_TRUE(same(acosh(f64({0.5, 1}, {2}, dev)), {kNaN, 0}));
  EXPECT_TRUE(same(rsqrt(f64({0, -1, kInf}, {3}, dev)), {kInf, kNaN, 0}));
  EXPECT_TRUE(same(recip(f64({0, -0.0, kInf}, {3}, dev)), {kInf, -kInf, 0}));
  EXPECT_TRUE(same(silu(f64({-kInf, kInf}, {2}, dev)), {kNaN, kInf}));  // -inf * 0 as x * sigmoid(x)
  EXPECT_TRUE(same(softplus(f64({kNaN, kInf, -kInf, 100}, {4}, dev)), {kNaN, kInf, 0, 100}));
}

TEST_P(OpMath, Atan2AllQuadrantsAndSignedZeros) {
  std::vector<double> y = {1, 1, -1, -1, 0, -0.0, 0, -0.0, 3, kInf, kInf, -kInf, 1, kNaN, 2e-300, 5};
  std::vector<double> x = {1, -1, 1, -1, 1, 1, -1, -1, 0, 1, kInf, -kInf, -kInf, 1, 3e300, -1e-300};
  std::vector<double> want = zip_d(y, x, [](double a, double b) { return std::atan2(a, b); });
  EXPECT_TRUE(all_close(atan2(f64(y, {16}, dev), f64(x, {16}, dev)), want, 1e-15, 0));
  // Sign of zero results.
  std::vector<double> got = vals(atan2(f64({-0.0, 0.0}, {2}, dev), f64({1, 1}, {2}, dev)));
  EXPECT_TRUE(std::signbit(got[0]));
  EXPECT_FALSE(std::signbit(got[1]));
  // Random points, f32 and f64, broadcast over a column.
  std::vector<double> a = rand_f32(40, -10, 10, 3), b = rand_f32(8, -10, 10, 4);
  for (DType t : {DType::F32, DType::F64}) {
    Array r = atan2(make(a, {5, 8}, t, dev), make(b, {8}, t, dev));
    std::vector<double> w(40);
    for (int i = 0; i < 40; ++i) w[size_t(i)] = std::atan2(a[size_t(i)], b[size_t(i % 8)]);
    EXPECT_TRUE(all_close(r, w, t == DType::F64 ? 1e-14 : 4e-6, 1e-7));
  }
  // Integer operands give f32.
  Array ri = atan2(i32({1, -1}, {2}, dev), i32({0, 0}, {2}, dev));
  EXPECT_EQ(ri.dtype(), DType::F32);
  EXPECT_TRUE(all_close(ri, {M_PI / 2, -M_PI / 2}, 1e-6, 0));
}

TEST_P(OpMath, IntegerInputsGiveF32AndShapesWork) {
  Array i = i64({0, 1, 4}, {3}, dev);
  EXPECT_EQ(sin(i).dtype(), DType::F32);
  EXPECT_TRUE(all_close(sin(i), {0, std::sin(1.0), std::sin(4.0)}, 1e-6, 1e-7));
  EXPECT_EQ(square(i).dtype(), DType::I64);
  EXPECT_TRUE(same(square(i), {0, 1, 16}));
  // Rank 0, empty, non-contiguous.
  EXPECT_TRUE(same_shape(expm1(f32({0.5}, {}, dev)), {}));
  EXPECT_TRUE(same_shape(atan(zeros({0, 3}, {DType::F32, dev})), {0, 3}));
  Array m = f64(iota_d(6, -1, 0.3), {2, 3}, dev);
  std::vector<double> tv = {-1, -0.1, -0.7, 0.2, -0.4, 0.5};  // transposed order
  EXPECT_TRUE(all_close(atan(transpose(m, 0, 1)), map_d(tv, [](double a) { return std::atan(a); }), 1e-14, 1e-15));
}

TEST_P(OpMath, ParameterizedActivations) {
  std::vector<double> v = {-3, -0.5, 0, 0.5, 3, 12};
  Array x = f64(v, {6}, dev);
  EXPECT_TRUE(all_close(leaky_relu(x, 0.2), map_d(v, [](double a) { return a > 0 ? a : 0.2 * a; }), 1e-15, 0));
  EXPECT_TRUE(all_close(elu(x, 1.5), map_d(v, [](double a) { return a > 0 ? a : 1.5 * std::expm1(a); }), 1e-14, 0));
  auto sp = [](double beta, double thr) {
    return [=](double a) { return beta * a > thr ? a : std::log1p(std::exp(beta * a)) / beta; };
  };
  EXPECT_TRUE(all_close(softplus(x, 2, 5), map_d(v, sp(2, 5)), 1e-14, 0));
  EXPECT_TRUE(all_close(softplus(x), map_d(v, sp(1, 20)), 1e-14, 0));
  EXPECT_EQ(leaky_relu(i32({-2, 2}, {2}, dev)).dtype(), DType::F32);
  EMBER_EXPECT_ERROR(softplus(x, 0), "softplus", "beta", "0", "elementwise_math_test.cpp");
  EMBER_EXPECT_ERROR(leaky_relu(x, kNaN), "leaky_relu", "slope", "elementwise_math_test.cpp");
}

TEST_P(OpMath, RoundingHalfToEvenAndIntegers) {
  std::vector<double> v = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4999, -0.3, 0.7, 4503599627370497.0, kInf, kNaN};
  for (DType t : {DType::F64, DType::F32}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<double> h = vals(cast(f64(v, {12}, dev), t));
    Array x = make(h, {12}, t, dev);
    EXPECT_TRUE(same(round(x), map_d(h, [](double a) { return std::nearbyint(a); })));
    EXPECT_TRUE(same(floor(x), map_d(h, [](double a) { return std::floor(a); })));
    EXPECT_TRUE(same(ceil(x), map_d(h, [](double a) { return std::ceil(a); })));
    EXPECT_TRUE(same(trunc(x), map_d(h, [](double a) { return std::trunc(a); })));
  }
  EXPECT_TRUE(std::signbit(vals(round(f64({-0.3}, {1}, dev)))[0]));
  Array i = i32({-3, 7}, {2}, dev);
  EXPECT_EQ(round(i).dtype(), DType::I32);
  EXPECT_TRUE(same(floor(i), {-3, 7}));
  EMBER_EXPECT_ERROR(round(make({1}, {1}, DType::Bool, dev)), "round", "bool");
}

TEST_P(OpMath, Predicates) {
  Array x = f32({kNaN, kInf, -kInf, 0, -2.5}, {5}, dev);
  EXPECT_EQ(is_nan(x).dtype(), DType::Bool);
  EXPECT_TRUE(same(is_nan(x), {1, 0, 0, 0, 0}));
  EXPECT_TRUE(same(is_inf(x), {0, 1, 1, 0, 0}));
  EXPECT_TRUE(same(is_finite(x), {0, 0, 0, 1, 1}));
  for (DType t : {DType::F16, DType::BF16, DType::F64}) {
    Array y = cast(x, t);
    EXPECT_TRUE(same(is_finite(y), {0, 0, 0, 1, 1}));
  }
  Array i = i64({1e15, -1}, {2}, dev);
  EXPECT_TRUE(same(is_inf(i), {0, 0}));
  EXPECT_TRUE(same(is_finite(i), {1, 1}));
  EXPECT_TRUE(same(is_nan(make({1, 0}, {2}, DType::Bool, dev)), {0, 0}));
}

TEST_P(OpMath, LogicalXorAndMaskFill) {
  Array a = make({0, 1, 0, 1}, {4}, DType::Bool, dev);
  Array b = f32({0, 0, 2, kNaN}, {4}, dev);
  EXPECT_TRUE(same(logical_xor(a, b), {0, 1, 1, 0}));
  Array x = f32(iota_d(6), {2, 3}, dev);
  Array m = make({1, 0, 1}, {3}, DType::Bool, dev);
  EXPECT_TRUE(same(mask_fill(x, m, -1), {-1, 1, -1, -1, 4, -1}));
  EXPECT_TRUE(same(mask_fill(i32(iota_d(3), {3}, dev), m, 9), {9, 1, 9}));
  EMBER_EXPECT_ERROR(mask_fill(x, f32({1, 0, 1}, {3}, dev), 0), "mask_fill", "bool", "float32");
  EMBER_EXPECT_ERROR(mask_fill(x, make({1, 0}, {2}, DType::Bool, dev), 0), "mask_fill", "[2]", "[2, 3]");
}

// Bit operations against C++ operators on the same values.
TEST_P(OpMath, BitwiseOpsEachIntegerDtype) {
  std::vector<int64_t> a = {0, 1, -1, 5, -6, 123456, -98765, 0x7f, 255, int64_t(INT32_MIN), int64_t(INT32_MAX)};
  std::vector<int64_t> b = {3, -1, 7, 12, -3, 654321, 1111, 0x80, 15, -1, 0x5555};
  for (DType t : {DType::I32, DType::I64, DType::U8}) {
    SCOPED_TRACE(dtype_name(t));
    auto wrap = [&](int64_t v) -> double {
      if (t == DType::U8) return double(uint8_t(v));
      if (t == DType::I32) return double(int32_t(v));
      return double(v);
    };
    std::vector<double> da, db, wand, wor, wxor, wnot;
    for (size_t i = 0; i < a.size(); ++i) {
      int64_t x = int64_t(wrap(a[i])), y = int64_t(wrap(b[i]));
      da.push_back(double(x));
      db.push_back(double(y));
      wand.push_back(wrap(x & y));
      wor.push_back(wrap(x | y));
      wxor.push_back(wrap(x ^ y));
      wnot.push_back(wrap(~x));
    }
    int64_t n = int64_t(a.size());
    Array x = make(da, {n}, t, dev), y = make(db, {n}, t, dev);
    EXPECT_EQ(bitwise_and(x, y).dtype(), t);
    EXPECT_TRUE(same(bitwise_and(x, y), wand));
    EXPECT_TRUE(same(bitwise_or(x, y), wor));
    EXPECT_TRUE(same(bitwise_xor(x, y), wxor));
    EXPECT_TRUE(same(bitwise_not(x), wnot));
  }
  Array l = from_vector(std::vector<int64_t>{INT64_MIN, INT64_MAX, -1}, {3}, dev);
  Array m = from_vector(std::vector<int64_t>{-1, INT64_MIN + 5, 0x0f0f0f0f0f0f0f0fLL}, {3}, dev);
  EXPECT_EQ(bitwise_and(l, m).to_vector<int64_t>(), (std::vector<int64_t>{INT64_MIN, 5, 0x0f0f0f0f0f0f0f0fLL}));
  EXPECT_EQ(bitwise_xor(l, m).to_vector<int64_t>(),
            (std::vector<int64_t>{INT64_MIN ^ -1LL, INT64_MAX ^ (INT64_MIN + 5), -1 ^ 0x0f0f0f0f0f0f0f0fLL}));
  // Bool operands are the logical ops; scalars and broadcasting.
  Array p = make({0, 1, 1}, {3}, DType::Bool, dev), q = make({1, 1, 0}, {3}, DType::Bool, dev);
  EXPECT_EQ(bitwise_and(p, q).dtype(), DType::Bool);
  EXPECT_TRUE(same(bitwise_and(p, q), {0, 1, 0}));
  EXPECT_TRUE(same(bitwise_or(p, q), {1, 1, 1}));
  EXPECT_TRUE(same(bitwise_xor(p, q), {1, 0, 1}));
  EXPECT_TRUE(same(bitwise_not(p), {1, 0, 0}));
  EXPECT_TRUE(same(bitwise_and(i32({6, 7, 12, 13}, {2, 2}, dev), i32({5, 3}, {2}, dev)), {4, 3, 4, 1}));
  EXPECT_TRUE(same(bitwise_or(i32({8}, {1}, dev), 3), {11}));
  EMBER_EXPECT_ERROR(bitwise_and(f32({1}, {1}, dev), i32({1}, {1}, dev)), "bitwise_and", "integer", "float32");
}

TEST_P(OpMath, Shifts) {
  std::vector<double> x = {1, -8, 5, -1, 100, 7, 3, -3};
  std::vector<double> n = {3, 1, 0, 4, 2, 40, -1, 63};
  std::vector<double> wl, wr;
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t v = int64_t(x[i]), k = int64_t(n[i]);
    bool ok = k >= 0 && k < 64;
    wl.push_back(ok ? double(int64_t(uint64_t(v) << k)) : 0);
    wr.push_back(ok ? double(v >> k) : (v < 0 ? -1 : 0));
  }
  Array a = i64(x, {8}, dev), b = i64(n, {8}, dev);
  EXPECT_TRUE(same(shift_left(a, b), wl));
  EXPECT_TRUE(same(shift_right(a, b), wr));
  // i32 wraps at 32 bits; u8 is unsigned (logical right shift).
  EXPECT_TRUE(same(shift_left(i32({1, 3}, {2}, dev), 31), {double(INT32_MIN), double(INT32_MIN)}));
  EXPECT_TRUE(same(shift_right(i32({INT32_MIN, -5}, {2}, dev), 31), {-1, -1}));
  EXPECT_TRUE(same(shift_left(make({200, 1}, {2}, DType::U8, dev), 1), {144, 2}));
  EXPECT_TRUE(same(shift_right(make({200, 255}, {2}, DType::U8, dev), make({7, 8}, {2}, DType::U8, dev)), {1, 0}));
  Array bl = make({1}, {1}, DType::Bool, dev);
  EMBER_EXPECT_ERROR(shift_left(bl, bl), "shift_left", "integer", "bool");
  EMBER_EXPECT_ERROR(shift_right(f32({1}, {1}, dev), 1), "shift_right", "integer", "float32");
}

EMBER_OP_SUITE(OpMath);

}  // namespace
}  // namespace ember::testing
