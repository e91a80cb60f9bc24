// Creation ops: zeros, ones, full, arange, from_vector/from_buffer, uniform, normal.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class OpCreation : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
  TensorOptions opt(DType t) const { return {.dtype = t, .device = dev}; }
};

TEST_P(OpCreation, ZerosOnesFullEachDtype) {
  for (DType t : all_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array z = zeros({2, 3}, opt(t)), o = ones({2, 3}, opt(t));
    EXPECT_EQ(z.dtype(), t);
    EXPECT_EQ(o.dtype(), t);
    EXPECT_EQ(z.device(), dev);
    EXPECT_TRUE(same_shape(z, {2, 3}));
    EXPECT_TRUE(same(z, std::vector<double>(6, 0.0)));
    EXPECT_TRUE(same(o, std::vector<double>(6, 1.0)));
    double v = t == DType::Bool ? 1 : 5;
    EXPECT_TRUE(same(full({4}, 5, opt(t)), std::vector<double>(4, v)));
  }
  // Default dtype is f32.
  EXPECT_EQ(zeros({1}, {.device = dev}).dtype(), DType::F32);
  // A float value into an integer dtype truncates; a value into f16/bf16 rounds.
  EXPECT_TRUE(same(full({2}, 2.75, opt(DType::I32)), {2, 2}));
  EXPECT_TRUE(same(full({2}, -2.75, opt(DType::I64)), {-2, -2}));
  EXPECT_TRUE(same(full({1}, 0.1, opt(DType::F16)), {0.0999755859375}));  // nearest f16 to 0.1
  EXPECT_TRUE(same(full({1}, 0.1, opt(DType::BF16)), {0.10009765625}));   // nearest bf16 to 0.1
  EXPECT_TRUE(same(full({1}, 0.1, opt(DType::F64)), {0.1}));
  EXPECT_TRUE(same(full({1}, 0.1, opt(DType::F32)), {double(0.1f)}));
  EXPECT_TRUE(same(full({1}, int64_t(1) << 40, opt(DType::I64)), {1099511627776.0}));
}

TEST_P(OpCreation, RankZeroAndEmpty) {
  Array s = full({}, 3.5, opt(DType::F32));
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item<float>(), 3.5f);
  EXPECT_EQ(s.item<double>(), 3.5);
  for (const Shape& sh : {Shape{0}, Shape{2, 0}, Shape{0, 3, 1}}) {
    Array z = zeros(sh, opt(DType::F32));
    EXPECT_EQ(z.numel(), 0);
    EXPECT_TRUE(same_shape(z, sh));
    EXPECT_TRUE(vals(z).empty());
    EXPECT_TRUE(vals(ones(sh, opt(DType::I64))).empty());
  }
}

TEST_P(OpCreation, Arange) {
  Array a = arange(0, 5, 1, std::nullopt, dev);
  EXPECT_EQ(a.dtype(), DType::I64);  // all-integer arguments give i64
  EXPECT_TRUE(same(a, {0, 1, 2, 3, 4}));
  Array f = arange(0, 1, 0.25, std::nullopt, dev);
  EXPECT_EQ(f.dtype(), DType::F32);
  EXPECT_TRUE(same(f, {0, 0.25, 0.5, 0.75}));
  EXPECT_TRUE(same(arange(5, 0, -2, std::nullopt, dev), {5, 3, 1}));
  EXPECT_TRUE(same(arange(-3, 3, 2, std::nullopt, dev), {-3, -1, 1}));
  EXPECT_TRUE(same(arange(0, 7, 3, std::nullopt, dev), {0, 3, 6}));
  EXPECT_TRUE(same(arange(1.0, 2.0, 0.5, DType::F64, dev), {1.0, 1.5}));
  EXPECT_TRUE(same(arange(0, 4, 1, DType::I32, dev), {0, 1, 2, 3}));
  EXPECT_TRUE(same(arange(0, 4, 1, DType::U8, dev), {0, 1, 2, 3}));
  EXPECT_EQ(arange(0, 4, 1, DType::F16, dev).dtype(), DType::F16);
  EXPECT_TRUE(same(arange(0, 4, 1, DType::BF16, dev), {0, 1, 2, 3}));
  Array e = arange(3, 3, 1, std::nullopt, dev);
  EXPECT_TRUE(same_shape(e, {0}));
  // Large enough to cross tiles: exact integers.
  Array big = arange(0, 70001, 1, std::nullopt, dev);
  EXPECT_TRUE(same(big, iota_d(70001)));
}

TEST_P(OpCreation, FromVectorEachDtype) {
  EXPECT_TRUE(same(from_vector(std::vector<float>{1.5f, -2.25f, 1e30f}, {3}, dev), {1.5, -2.25, double(1e30f)}));
  EXPECT_TRUE(same(from_vector(std::vector<double>{0.1, -1e300}, {2}, dev), {0.1, -1e300}));
  EXPECT_TRUE(same(from_vector(std::vector<Half>{Half(1.5f), Half(-65504.f)}, {2}, dev), {1.5, -65504}));
  EXPECT_TRUE(same(from_vector(std::vector<BFloat16>{BFloat16(3.0f), BFloat16(-0.5f)}, {2}, dev), {3, -0.5}));
  EXPECT_TRUE(same(from_vector(std::vector<int32_t>{INT32_MIN, INT32_MAX}, {2}, dev), {-2147483648.0, 2147483647.0}));
  Array big = from_vector(std::vector<int64_t>{(int64_t(1) << 53) + 1, -5}, {2}, dev);
  EXPECT_EQ(big.to_vector<int64_t>(), (std::vector<int64_t>{(int64_t(1) << 53) + 1, -5}));
  EXPECT_TRUE(same(from_vector(std::vector<uint8_t>{0, 200, 255}, {3}, dev), {0, 200, 255}));
  Array b = from_vector(std::vector<bool>{true, false, true}, {3}, dev);
  EXPECT_EQ(b.dtype(), DType::Bool);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  Array m = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  EXPECT_TRUE(same_shape(m, {2, 3}));
  EXPECT_EQ(m.size(-1), 3);
  EXPECT_EQ(m.str().find("tensor([[1., 2., 3.]"), 0u) << m.str();
  // from_buffer
  const int32_t raw[4] = {4, 3, 2, 1};
  EXPECT_TRUE(same(from_buffer(raw, {2, 2}, DType::I32, dev), {4, 3, 2, 1}));
  EXPECT_TRUE(vals(from_vector(std::vector<float>{}, {0}, dev)).empty());
}

// ---- random -----------------------------------------------------------------------------------
// Philox4x32-10 written from the paper's description (Salmon et al., SC'11), independently of
// src/backend/common/philox.h, so that the generator's output is checked against the spec.
struct Philox {
  static void round(uint32_t c[4], const uint32_t k[2]) {
    const uint64_t m0 = 0xD2511F53u, m1 = 0xCD9E8D57u;
    uint64_t p0 = m0 * c[0], p1 = m1 * c[2];
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0), hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    uint32_t out[4] = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    std::memcpy(c, out, sizeof out);
  }
  // Word `word` of the block of `counter` (counter in words 0-1 of the input, words 2-3 zero):
  // stream s of an f32 draw is word s.
  static uint32_t word(uint64_t counter, uint32_t word, uint64_t seed) {
    uint32_t c[4] = {uint32_t(counter), uint32_t(counter >> 32), 0, 0};
    uint32_t k[2] = {uint32_t(seed), uint32_t(seed >> 32)};
    for (int r = 0; r < 10; ++r) {
      round(c, k);
      k[0] += 0x9E3779B9u;  // golden ratio
      k[1] += 0xBB67AE85u;  // sqrt(3) - 1
    }
    return c[word];
  }
  // Uniform f32 in [0, 1) from the top 24 bits of the stream's word (the documented construction).
  static double u32(uint64_t counter, uint32_t stream, uint64_t seed) {
    return double(word(counter, stream, seed) >> 8) / 16777216.0;
  }
};

TEST(OpRandomSpec, PhiloxKnownAnswer) {
  // Known-answer vectors of Philox4x32-10 from the Random123 distribution (kat_vectors):
  // counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8.
  EXPECT_EQ(Philox::word(0, 0, 0), 0x6627e8d5u);
  EXPECT_EQ(Philox::word(0, 1, 0), 0xe169c58du);
  EXPECT_EQ(Philox::word(0, 2, 0), 0xbc57ac4cu);
  EXPECT_EQ(Philox::word(0, 3, 0), 0x9b00dbd8u);
}

TEST_P(OpCreation, UniformMatchesCounterBasedSpec) {
  const uint64_t seed = 1234;
  Array u = uniform({1000}, 0, 1, {.seed = seed, .device = dev});
  EXPECT_EQ(u.dtype(), DType::F32);
  std::vector<double> got = vals(u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(got[size_t(i)], Philox::u32(uint64_t(i), 0, seed)) << "element " << i;
  // Scaled: low + (high - low) * u in f32, within one ulp.
  std::vector<double> g2 = vals(uniform({1000}, -2, 3, {.seed = seed, .device = dev}));
  for (int i = 0; i < 1000; ++i) {
    double want = -2.0 + 5.0 * Philox::u32(uint64_t(i), 0, seed);
    ASSERT_NEAR(g2[size_t(i)], want, 4.8e-7) << "element " << i;
  }
  // Element i depends on (seed, i) only: the shape does not matter.
  std::vector<double> g3 = vals(uniform({10, 100}, 0, 1, {.seed = seed, .device = dev}));
  EXPECT_TRUE(same(g3, got));
}

TEST_P(OpCreation, UniformStatistics) {
  const int64_t n = 100000;
  for (DType t : float_dtypes()) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<double> v = vals(uniform({n}, -1, 3, {.seed = 99, .dtype = t, .device = dev}));
    double s = 0, s2 = 0, lo = 1e9, hi = -1e9;
    for (double x : v) s += x, s2 += x * x, lo = std::min(lo, x), hi = std::max(hi, x);
    double m = s / double(n), var = s2 / double(n) - m * m;
    // U(-1, 3): mean 1, variance 16/12; standard error of the mean ~ 0.0037.
    EXPECT_NEAR(m, 1.0, 0.02);
    EXPECT_NEAR(var, 16.0 / 12.0, 0.03);
    EXPECT_GE(lo, -1.0);
    EXPECT_LE(hi, 3.0);  // 16-bit types may round up to the bound itself
    if (t == DType::F32 || t == DType::F64) {
      EXPECT_LT(hi, 3.0);
    }
    EXPECT_LT(lo, -0.99);
    EXPECT_GT(hi, 2.99);
  }
}

TEST_P(OpCreation, NormalStatistics) {
  const int64_t n = 100000;
  for (DType t : {DType::F32, DType::F64}) {
    std::vector<double> v = vals(normal({n}, 2, 3, {.seed = 5, .dtype = t, .device = dev}));
    double s = 0, s2 = 0, s4 = 0;
    int64_t within1 = 0;
    for (double x : v) {
      s += x, s2 += x * x;
      double z = (x - 2) / 3;
      s4 += z * z * z * z;
      within1 += std::fabs(z) < 1;
      ASSERT_TRUE(std::isfinite(x));
    }
    double m = s / double(n), sd = std::sqrt(s2 / double(n) - m * m);
    EXPECT_NEAR(m, 2.0, 0.04);  // standard error 0.0095
    EXPECT_NEAR(sd, 3.0, 0.04);
    EXPECT_NEAR(s4 / double(n), 3.0, 0.1);                   // kurtosis of a normal
    EXPECT_NEAR(double(within1) / double(n), 0.6827, 0.01);  // P(|z| < 1)
  }
}

TEST_P(OpCreation, NormalMatchesBoxMuller) {
  // normal = mean + std * sqrt(-2 log(1 - u0)) * cos(2 pi u1), u0/u1 from streams 0 and 1
  // (words 0 and 1 of the element's block).
  const uint64_t seed = 77;
  std::vector<double> v = vals(normal({500}, 1, 2, {.seed = seed, .device = dev}));
  for (int i = 0; i < 500; ++i) {
    double u0 = Philox::u32(uint64_t(i), 0, seed), u1 = Philox::u32(uint64_t(i), 1, seed);
    double want = 1 + 2 * std::sqrt(-2 * std::log(1 - u0)) * std::cos(2 * M_PI * u1);
    ASSERT_NEAR(v[size_t(i)], want, 2e-5 * (1 + std::fabs(want))) << "element " << i;
  }
}

TEST_P(OpCreation, SeedsAndDraws) {
  auto u = [&](std::optional<uint64_t> seed) { return vals(uniform({64}, 0, 1, {.seed = seed, .device = dev})); };
  EXPECT_EQ(u(1), u(1));
  EXPECT_NE(u(1), u(2));
  EXPECT_NE(u(std::nullopt), u(std::nullopt));  // no seed: each draw takes a fresh one
  auto nrm = [&](std::optional<uint64_t> seed) { return vals(normal({64}, 0, 1, {.seed = seed, .device = dev})); };
  EXPECT_EQ(nrm(3), nrm(3));
  EXPECT_NE(nrm(3), nrm(4));
  EXPECT_NE(nrm(std::nullopt), nrm(std::nullopt));
  // manual_seed makes unseeded draws reproducible.
  manual_seed(42);
  auto a = u(std::nullopt);
  auto b = u(std::nullopt);
  manual_seed(42);
  EXPECT_EQ(u(std::nullopt), a);
  EXPECT_EQ(u(std::nullopt), b);
  EXPECT_NE(a, b);
  // low == high is a constant.
  EXPECT_TRUE(same(uniform({3}, 2, 2, {.seed = 1, .device = dev}), {2, 2, 2}));
  EXPECT_TRUE(vals(uniform({0}, 0, 1, {.seed = 1, .device = dev})).empty());
  EXPECT_EQ(uniform({}, 0, 1, {.seed = 1, .device = dev}).numel(), 1);
}

TEST_P(OpCreation, Errors) {
  EMBER_EXPECT_ERROR(zeros({2, -1}, opt(DType::F32)), "full", "[2, -1]", "creation_test.cpp:");
  EMBER_EXPECT_ERROR(arange(0, 5, 0, std::nullopt, dev), "arange", "step");
  EMBER_EXPECT_ERROR(arange(0, 5, -1, std::nullopt, dev), "arange", "-1");
  EMBER_EXPECT_ERROR(uniform({2}, 3, 1, {.seed = 1, .device = dev}), "uniform", "3", "1");
  EMBER_EXPECT_ERROR(uniform({2}, 0, 1, {.seed = 1, .dtype = DType::I32, .device = dev}), "uniform", "int32");
  EMBER_EXPECT_ERROR(normal({2}, 0, -1, {.seed = 1, .device = dev}), "normal", "-1");
  EMBER_EXPECT_ERROR(normal({2}, 0, 1, {.seed = 1, .dtype = DType::Bool, .device = dev}), "normal", "bool");
  EMBER_EXPECT_ERROR(full({2}, NAN, opt(DType::I32)), "full", "nan", "int32");
  EMBER_EXPECT_ERROR(from_buffer(nullptr, {-1}, DType::F32, dev), "from_data", "[-1]");
  // A vector whose length does not match the shape is rejected (not read out of bounds).
  EMBER_EXPECT_ERROR(from_vector(std::vector<float>{1, 2}, {3}, dev), "from_data", "2 values", "[3]", "creation_test.cpp:");
  EMBER_EXPECT_ERROR(from_vector(std::vector<bool>{true}, {2, 2}, dev), "from_data", "1 values", "[2, 2]");
}

EMBER_OP_SUITE(OpCreation);

}  // namespace
}  // namespace ember::testing
