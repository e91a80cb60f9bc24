// fmod: the truncated remainder (C's fmod, torch.fmod), whose result has the sign of the dividend,
// on every backend. Expected values: the special cases as PyTorch gives them (torch 2.15:
// `torch.fmod(a, b)` and `torch.autograd.grad(torch.fmod(a, b).sum(), [a, b])` on the inputs
// below), random operands against std::fmod in f64 (fmod is exact, so the result of two values of
// any float dtype is representable in that dtype: results must be bit-identical), integers
// against C's `%`.
#include <cmath>
#include <cstdint>
#include <limits>

#include "ember/tensor.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class OpFmod : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

// Signs of the zeros in `got` where `want` is a zero (all_close treats 0 and -0 as equal).
::testing::AssertionResult zero_signs(const std::vector<double>& got, const std::vector<double>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] == 0 && std::signbit(got[i]) != std::signbit(want[i]))
      return ::testing::AssertionFailure() << "element " << i << " is " << got[i] << ", expected " << want[i];
  return ::testing::AssertionSuccess();
}

TEST_P(OpFmod, SpecialValuesMatchPyTorch) {
  const std::vector<double> a = {5, -5, 5, -5, 0, -0.0, kInf, 1, kNaN, 3, -4, 4, 5.5, -5.5, -kInf, 2.5};
  const std::vector<double> b = {3, 3, -3, -3, 2, 2, 2, kInf, 1, 0, 2, -2, 2, 2, 1, -kInf};
  const std::vector<double> want = {2, -2, 2, -2, 0, -0.0, kNaN, 1, kNaN, kNaN, -0.0, 0, 1.5, -1.5, kNaN, 2.5};
  for (DType t : float_dtypes()) {
    SCOPED_TRACE(dtype_name(t));
    Array r = fmod(make(a, {16}, t, dev), make(b, {16}, t, dev));
    EXPECT_EQ(r.dtype(), t);
    std::vector<double> got = vals(r);
    EXPECT_TRUE(same(got, want));
    EXPECT_TRUE(zero_signs(got, want));
  }
  // rem, by contrast, takes the divisor's sign.
  EXPECT_TRUE(same(rem(f32({-5, 5}, {2}, dev), f32({3, -3}, {2}, dev)), {1, -1}));
}

TEST_P(OpFmod, RandomOperandsAgainstCmathEachFloatDtype) {
  const int64_t n = 3000;
  std::vector<double> a = rand_d(n, -200, 200, 31), b = rand_d(n, 0.25, 40, 32);
  for (int64_t i = 0; i < n; i += 2) b[size_t(i)] = -b[size_t(i)];  // both signs of the divisor
  for (DType t : float_dtypes()) {
    SCOPED_TRACE(dtype_name(t));
    Array x = make(a, {n}, t, dev), y = make(b, {n}, t, dev);
    // The operands as the dtype holds them, then fmod in f64: exact, so no rounding is needed.
    std::vector<double> want = zip_d(vals(x), vals(y), [](double p, double q) { return std::fmod(p, q); });
    std::vector<double> got = vals(fmod(x, y));
    EXPECT_TRUE(same(got, want));
    EXPECT_TRUE(zero_signs(got, want));
  }
}

TEST_P(OpFmod, IntegersTruncate) {
  // C's %: -7 fmod 2 = -1 (rem gives 1), 7 fmod -2 = 1 (rem gives -1).
  const std::vector<double> a = {7, -7, 7, -7, 0, 6, -6, 13, -2147483648.0, 5};
  const std::vector<double> b = {2, 2, -2, -2, 3, 3, -4, 5, -1, 7};
  const std::vector<double> want = {1, -1, 1, -1, 0, 0, -2, 3, 0, 5};
  for (DType t : {DType::I32, DType::I64}) {
    Array r = fmod(make(a, {10}, t, dev), make(b, {10}, t, dev));
    EXPECT_EQ(r.dtype(), t);
    EXPECT_TRUE(same(r, want)) << dtype_name(t);
  }
  EXPECT_TRUE(same(fmod(make({250, 7, 0}, {3}, DType::U8, dev), make({7, 250, 9}, {3}, DType::U8, dev)), {5, 7, 0}));
  // A random run against C's % in i64.
  const int64_t n = 2000;
  std::vector<double> p = rand_int(n, -100000, 100000, 33), q = rand_int(n, 1, 500, 34);
  for (int64_t i = 1; i < n; i += 2) q[size_t(i)] = -q[size_t(i)];
  std::vector<double> c_rem = zip_d(p, q, [](double u, double v) { return double(int64_t(u) % int64_t(v)); });
  EXPECT_TRUE(same(fmod(i64(p, {n}, dev), i64(q, {n}, dev)), c_rem));
  EXPECT_TRUE(same(fmod(i32(p, {n}, dev), i32(q, {n}, dev)), c_rem));
}

// As rem and floor_div: an integer divisor of zero is an error when the value is read.
TEST_P(OpFmod, IntegerByZeroErrorsAtRead) {
  Array r = fmod(i32({1, 2, 3}, {3}, dev), i32({1, 0, 1}, {3}, dev));
  EMBER_EXPECT_ERROR(r.to_vector<int32_t>(), "fmod", "by zero", "fmod_test.cpp:");
  EMBER_EXPECT_ERROR(fmod(i64({5}, {1}, dev), 0).item<int64_t>(), "fmod", "zero");
  EMBER_EXPECT_ERROR(fmod(make({5}, {1}, DType::U8, dev), 0).item<int64_t>(), "fmod", "zero");
  EXPECT_TRUE(same(fmod(i32({-7}, {1}, dev), 4), {-3}));  // usable after the error
}

TEST_P(OpFmod, ScalarsBroadcastingAndPromotion) {
  Array x = f64({-7.5, 7.5, -1, 2}, {2, 2}, dev);
  EXPECT_TRUE(same(fmod(x, 2), {-1.5, 1.5, -1, 0}));
  EXPECT_TRUE(same(fmod(10, f64({3, -3, 4, 6}, {4}, dev)), {1, 1, 2, 4}));
  EXPECT_TRUE(same(fmod(x, f64({2, -4}, {2}, dev)), {-1.5, 3.5, -1, 2}));  // [2] broadcast over rows
  Array ints = i32({-7, 9}, {2}, dev);
  EXPECT_EQ(fmod(ints, 2.5).dtype(), DType::F32);  // a float scalar promotes the integers
  EXPECT_TRUE(same(fmod(ints, 2.5), {-2, 1.5}));
  EXPECT_EQ(fmod(ints, f64({4, 4}, {2}, dev)).dtype(), DType::F64);
  EXPECT_THROW(fmod(make({1}, {1}, DType::Bool, dev), make({1}, {1}, DType::Bool, dev)), Error);
}

TEST_P(OpFmod, TypedFacade) {
  auto t = Tensor<2>::from_data({{-7.5, 7.5}, {3, -3}}, {.device = dev});
  auto d = Tensor<1>::from_data({2, -2}, {.device = dev});
  Tensor<2> m = t.fmod(d);
  EXPECT_TRUE(same(m.array(), {-1.5, 1.5, 1, -1}));
  EXPECT_TRUE(same(fmod(t, 4).array(), {-3.5, 3.5, 3, -3}));
  EXPECT_TRUE(same(fmod(9, d).array(), {1, 1}));
  auto k = Tensor<1, Int>::from_data({-7, 7}, {.device = dev});
  EXPECT_TRUE(same(k.fmod(3).array(), {-1, 1}));
}

// Gradients as torch.autograd.grad gives them: d/da = 1, d/db = -trunc(a / b).
TEST_P(OpFmod, GradientsMatchPyTorch) {
  Array a = f64({5, -5, 5, -5, 0, -0.0, kInf, 1, kNaN, 3}, {10}, dev).require_grad();
  Array b = f64({3, 3, -3, -3, 2, 2, 2, kInf, 1, 0}, {10}, dev).require_grad();
  std::vector<Array> g = grad(sum(fmod(a, b)), {a, b});
  EXPECT_TRUE(same(g[0], std::vector<double>(10, 1.0)));
  const std::vector<double> want_b = {-1, 1, 1, -1, -0.0, 0, -kInf, -0.0, kNaN, -kInf};
  std::vector<double> got_b = vals(g[1]);
  EXPECT_TRUE(same(got_b, want_b));
  EXPECT_TRUE(zero_signs(got_b, want_b));
}

EMBER_OP_SUITE(OpFmod);

}  // namespace
}  // namespace ember::testing
