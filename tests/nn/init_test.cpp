// Initializers: statistics (mean, standard deviation, bounds) of large draws against the
// formulas of PyTorch's torch.nn.init, fans, gains and seeding.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;

struct Stats {
  double mean = 0, std = 0, min = 1e300, max = -1e300;
};
Stats stats(const Array& a) {
  auto v = a.to_vector<double>();
  Stats s;
  for (double x : v) s.mean += x, s.min = std::min(s.min, x), s.max = std::max(s.max, x);
  s.mean /= double(v.size());
  for (double x : v) s.std += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(s.std / double(v.size()));
  return s;
}

TEST(InitTest, FansAndGains) {
  EXPECT_EQ(init::fans({64, 32, 3, 3}), (std::pair<int64_t, int64_t>{32 * 9, 64 * 9}));
  EXPECT_EQ(init::fans({10, 20}), (std::pair<int64_t, int64_t>{20, 10}));
  EXPECT_DOUBLE_EQ(init::gain(init::Nonlinearity::ReLU), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::gain(init::Nonlinearity::Tanh), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::gain(init::Nonlinearity::LeakyReLU, std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
}

TEST(InitTest, Statistics) {
  const Shape shape{256, 128, 3, 3};  // fan_in 1152, fan_out 2304; 294912 draws
  init::InitOptions o{.seed = 11};
  double fan_in = 1152, fan_out = 2304;
  Stats c = stats(init::constant({4, 4}, 0.5, o));
  EXPECT_EQ(c.min, 0.5);
  EXPECT_EQ(c.max, 0.5);

  Stats u = stats(init::uniform(shape, -2, 3, o));
  EXPECT_NEAR(u.mean, 0.5, 0.01);
  EXPECT_NEAR(u.std, 5 / std::sqrt(12.0), 0.01);
  EXPECT_GE(u.min, -2);
  EXPECT_LT(u.max, 3);

  Stats n = stats(init::normal(shape, 1, 2, o));
  EXPECT_NEAR(n.mean, 1, 0.01);
  EXPECT_NEAR(n.std, 2, 0.01);

  double xb = std::sqrt(6.0 / (fan_in + fan_out));
  Stats xu = stats(init::xavier_uniform(shape, 1.0, o));
  EXPECT_NEAR(xu.std, xb / std::sqrt(3.0), 0.01 * xb);
  EXPECT_GE(xu.min, -xb);
  EXPECT_LE(xu.max, xb);
  Stats xn = stats(init::xavier_normal(shape, 2.0, o));
  EXPECT_NEAR(xn.std, 2 * std::sqrt(2.0 / (fan_in + fan_out)), 0.01 * xn.std);

  double kstd = std::sqrt(2.0) / std::sqrt(fan_in);
  Stats ku = stats(init::kaiming_uniform(shape, 0, init::FanMode::FanIn, init::Nonlinearity::ReLU, o));
  EXPECT_NEAR(ku.std, kstd, 0.01 * kstd);
  EXPECT_LE(ku.max, std::sqrt(3.0) * kstd);
  Stats kn = stats(init::kaiming_normal(shape, 0, init::FanMode::FanOut, init::Nonlinearity::ReLU, o));
  EXPECT_NEAR(kn.std, std::sqrt(2.0 / fan_out), 0.01 * kn.std);
  EXPECT_NEAR(kn.mean, 0, 0.01 * kn.std);
}

TEST(InitTest, SeededAndTyped) {
  Array a = init::normal({100}, 0, 1, {.seed = 3, .dtype = DType::F64});
  Array b = init::normal({100}, 0, 1, {.seed = 3, .dtype = DType::F64});
  EXPECT_EQ(a.dtype(), DType::F64);
  EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>());
  manual_seed(42);
  Array c = init::xavier_uniform({10, 10});
  manual_seed(42);
  Array d = init::xavier_uniform({10, 10});
  EXPECT_EQ(c.to_vector<float>(), d.to_vector<float>());
  EXPECT_THROW(init::kaiming_normal({0, 0}), Error);
}

}  // namespace
}  // namespace ember
