// softmax, log_softmax and logsumexp against f64 formulas, including large inputs (stability),
// -inf entries, and their gradients against central differences.
#include <gtest/gtest.h>

#include <cmath>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

class OpComposite : public ::testing::TestWithParam<Device> {};

TEST_P(OpComposite, SoftmaxFamilyMatchesFormulas) {
  Device d = GetParam();
  std::vector<double> v = {1, 2, 3, -1, 0, 1000};  // the 1000 would overflow a naive exp
  Array x = from_vector(v, {2, 3}, d);
  std::vector<double> lse_want, sm_want, lsm_want;
  for (int r = 0; r < 2; ++r) {
    double m = std::max({v[size_t(3 * r)], v[size_t(3 * r + 1)], v[size_t(3 * r + 2)]});
    double s = 0;
    for (int c = 0; c < 3; ++c) s += std::exp(v[size_t(3 * r + c)] - m);
    lse_want.push_back(m + std::log(s));
    for (int c = 0; c < 3; ++c) {
      sm_want.push_back(std::exp(v[size_t(3 * r + c)] - m) / s);
      lsm_want.push_back(v[size_t(3 * r + c)] - m - std::log(s));
    }
  }
  EXPECT_TRUE(all_close(logsumexp(x, {1}), lse_want, 1e-12));
  EXPECT_TRUE(all_close(softmax(x, 1), sm_want, 1e-12));
  EXPECT_TRUE(all_close(log_softmax(x, -1), lsm_want, 1e-12));
  EXPECT_EQ(logsumexp(x, {1}, true).shape(), (Shape{2, 1}));
  // f32 as well, and a row of -inf stays -inf in logsumexp.
  Array f = from_vector<float>({-INFINITY, -INFINITY, 0, 0}, {2, 2}, d);
  std::vector<double> got = logsumexp(f, {1}).to_vector<double>();
  EXPECT_TRUE(std::isinf(got[0]) && got[0] < 0);
  EXPECT_NEAR(got[1], std::log(2.0), 1e-6);
  EXPECT_THROW(softmax(from_vector<int64_t>({1, 2}, {2}, d), 0), Error);
  EXPECT_THROW(softmax(x, 2), Error);
}

TEST_P(OpComposite, GradientsMatchCentralDifferences) {
  Device d = GetParam();
  std::vector<double> v = {0.3, -1.2, 2.0, 0.7, 0.1, -0.4};
  std::vector<double> w = {1, 2, 3, 4, 5, 6};
  auto f = [&](const Array& x) {
    return sum(mul(add(softmax(x, 1), add(log_softmax(x, 0), logsumexp(x, {1}, true))), from_vector(w, {2, 3}, d)));
  };
  Array x = from_vector(v, {2, 3}, d).require_grad();
  std::vector<double> g = x.grad(f(x).backward()).to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) {
    auto at = [&](double delta) {
      std::vector<double> u = v;
      u[i] += delta;
      return f(from_vector(u, {2, 3}, d)).item<double>();
    };
    double numeric = (at(1e-6) - at(-1e-6)) / 2e-6;
    EXPECT_NEAR(g[i], numeric, 1e-6 * (1 + std::fabs(numeric))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, OpComposite, ::testing::ValuesIn(ember::testing::test_devices()),
                         ember::testing::device_test_name);

}  // namespace
}  // namespace ember
