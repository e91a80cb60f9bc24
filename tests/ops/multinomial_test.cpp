// multinomial (torch.multinomial semantics) on every device: frequencies over many draws within
// five binomial standard deviations of the exact probabilities (computed here in f64, including
// the second draw without replacement), exact results for one-hot rows and zero weights,
// distinct indices without replacement, seeding, the typed form, and every error naming the op
// and the offending value. Seeds are fixed, so the statistical checks are deterministic.
#include <algorithm>
#include <cmath>
#include <set>

#include "ember/tensor.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class Multinomial : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
  Array weights(const std::vector<double>& w, const Shape& shape, DType dt = DType::F32) const {
    return cast(from_vector(w, shape, dev), dt);
  }
};

// |count - n p| <= 5 sqrt(n p (1 - p)), and exactly 0 for p = 0.
void expect_frequencies(const std::vector<int64_t>& counts, const std::vector<double>& p, int64_t n) {
  for (size_t c = 0; c < p.size(); ++c) {
    SCOPED_TRACE("category " + std::to_string(c));
    double mean = double(n) * p[c];
    double bound = 5 * std::sqrt(double(n) * p[c] * (1 - p[c]));
    if (p[c] == 0) {
      EXPECT_EQ(counts[c], 0);
    } else {
      EXPECT_LE(std::abs(double(counts[c]) - mean), bound) << "count " << counts[c] << ", expected " << mean;
    }
  }
}

TEST_P(Multinomial, WithReplacementFrequencies) {
  const int64_t n = 20000;
  // Unnormalized rows; the second has zero weights in the middle and at the end.
  Array probs = weights({1, 2, 3, 4, 0, 5, 0, 0, 5, 0}, {2, 5});
  Array idx = multinomial(probs, n, /*replacement=*/true, /*seed=*/1234);
  EXPECT_EQ(idx.dtype(), DType::I64);
  EXPECT_EQ(idx.device(), dev);
  ASSERT_EQ(idx.shape(), Shape({2, n}));
  std::vector<int64_t> v = idx.to_vector<int64_t>();
  std::vector<std::vector<int64_t>> counts(2, std::vector<int64_t>(5, 0));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t s = 0; s < n; ++s) {
      int64_t c = v[size_t(r * n + s)];
      ASSERT_TRUE(c >= 0 && c < 5) << c;
      ++counts[size_t(r)][size_t(c)];
    }
  {
    SCOPED_TRACE("row 0");
    expect_frequencies(counts[0], {0.1, 0.2, 0.3, 0.4, 0}, n);
  }
  {
    SCOPED_TRACE("row 1");
    expect_frequencies(counts[1], {0.5, 0, 0, 0.5, 0}, n);
  }
}

TEST_P(Multinomial, WithoutReplacementFrequenciesOfFirstAndSecondDraws) {
  // 4000 rows of the same weights, two draws each: the first is category i with p_i, the second
  // j with sum_{i != j} p_i p_j / (1 - p_i) (successive sampling).
  const int64_t rows = 4000;
  std::vector<double> p{0.1, 0.2, 0.3, 0.4};
  std::vector<double> w;
  for (int64_t r = 0; r < rows; ++r)
    for (double x : p) w.push_back(x * 10);  // weights 1, 2, 3, 4
  Array idx = multinomial(weights(w, {rows, 4}), 2, /*replacement=*/false, /*seed=*/99);
  ASSERT_EQ(idx.shape(), Shape({rows, 2}));
  std::vector<int64_t> v = idx.to_vector<int64_t>();
  std::vector<int64_t> first(4, 0), second(4, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t a = v[size_t(2 * r)], b = v[size_t(2 * r + 1)];
    ASSERT_NE(a, b) << "row " << r;
    ++first[size_t(a)];
    ++second[size_t(b)];
  }
  std::vector<double> p2(4, 0);
  for (size_t j = 0; j < 4; ++j)
    for (size_t i = 0; i < 4; ++i)
      if (i != j) p2[j] += p[i] * p[j] / (1 - p[i]);
  {
    SCOPED_TRACE("first draw");
    expect_frequencies(first, p, rows);
  }
  {
    SCOPED_TRACE("second draw");
    expect_frequencies(second, p2, rows);
  }
}

TEST_P(Multinomial, DegenerateRowsAreExact) {
  // One-hot rows: every draw is the hot index, with or without replacement.
  Array one_hot_rows = weights({0, 0, 1, 0, 7, 0, 0, 0, 0, 0, 0, 0.5}, {3, 4}, DType::F64);
  EXPECT_EQ(multinomial(one_hot_rows, 6, true, 5).to_vector<int64_t>(),
            (std::vector<int64_t>{2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(multinomial(one_hot_rows, 1, false, 5).to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 3}));
  // Without replacement, as many draws as non-zero weights: exactly those indices.
  std::vector<int64_t> two = multinomial(weights({0, 3, 0, 1, 0}, {5}), 2, false, 8).to_vector<int64_t>();
  std::sort(two.begin(), two.end());
  EXPECT_EQ(two, (std::vector<int64_t>{1, 3}));
  // All categories: a permutation.
  std::vector<int64_t> perm = multinomial(weights({5, 1, 2, 0.5, 3, 9}, {6}), 6, false, 3).to_vector<int64_t>();
  EXPECT_EQ(std::set<int64_t>(perm.begin(), perm.end()).size(), 6u);
}

TEST_P(Multinomial, SeedsAndTypedForm) {
  Array probs = weights({1, 1, 1, 1, 1, 1, 1, 1}, {2, 4});
  std::vector<int64_t> a = multinomial(probs, 50, true, 7).to_vector<int64_t>();
  EXPECT_EQ(a, multinomial(probs, 50, true, 7).to_vector<int64_t>());
  EXPECT_NE(a, multinomial(probs, 50, true, 8).to_vector<int64_t>());
  manual_seed(3);
  std::vector<int64_t> g1 = multinomial(probs, 50, true).to_vector<int64_t>();
  manual_seed(3);
  EXPECT_EQ(g1, multinomial(probs, 50, true).to_vector<int64_t>());  // the global sequence

  Tensor<1> p1 = Tensor<1>::from_data({0, 0, 2}, {.device = dev});
  Tensor<1, Int> typed = multinomial(p1, 3, true, 11);
  EXPECT_EQ(typed.to_vector(), (std::vector<int64_t>{2, 2, 2}));
  Tensor<2, Int> typed2 = multinomial(Tensor<2>(probs), 4, false, 11);
  EXPECT_EQ(typed2.shape(), Shape({2, 4}));
}

TEST_P(Multinomial, ErrorsNameTheOpAndTheValues) {
  auto error = [](const std::function<void()>& f) { return error_of(f); };
  auto expect_has = [](const std::string& e, const std::vector<std::string>& parts) {
    EXPECT_NE(e.find("multinomial"), std::string::npos) << e;
    for (const std::string& p : parts) EXPECT_NE(e.find(p), std::string::npos) << "missing '" << p << "' in: " << e;
  };
  expect_has(error([&] { (void)multinomial(weights({1, 2, -0.5, 1}, {2, 2}), 1, true); }),
             {"non-negative", "row 1", "-0.5", "index 0"});
  expect_has(error([&] { (void)multinomial(weights({1, NAN, 1}, {3}), 1, true); }), {"nan", "index 1"});
  expect_has(error([&] { (void)multinomial(weights({1, 1, INFINITY}, {3}), 1, true); }), {"inf", "index 2"});
  expect_has(error([&] { (void)multinomial(weights({1, 1, 0, 0}, {2, 2}), 1, true); }), {"row 1", "sums to 0"});
  expect_has(error([&] { (void)multinomial(weights({1, 1, 1}, {3}), 4, false); }), {"4 samples", "3 categories"});
  expect_has(error([&] { (void)multinomial(weights({1, 0, 1, 1, 1, 1}, {2, 3}), 3, false); }),
             {"3 samples", "row 0", "only 2 non-zero"});
  expect_has(error([&] { (void)multinomial(weights({1, 1}, {2}), 0, true); }), {"num_samples", "0"});
  expect_has(error([&] { (void)multinomial(cast(weights({1, 1}, {2}), DType::I64), 1, true); }), {"floating", "int64"});
  expect_has(error([&] { (void)multinomial(weights({1, 1}, {1, 1, 2}), 1, true); }), {"1-D or 2-D", "[1, 1, 2]"});
  // With replacement, more draws than categories is fine.
  EXPECT_EQ(multinomial(weights({1, 1}, {2}), 5, true, 1).shape(), Shape({5}));
}

INSTANTIATE_TEST_SUITE_P(Devices, Multinomial, ::testing::ValuesIn(test_devices()), device_test_name);

}  // namespace
}  // namespace ember::testing
