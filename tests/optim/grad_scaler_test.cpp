// optim::GradScaler: option checks, the scaled loss, unscaling, the skip of steps with inf/NaN
// gradients, backoff and growth (every value worked out by hand below), its state dict, and the
// underflow of small f16 gradients that loss scaling prevents.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ember/autocast.h"
#include "ember/nn/linear.h"
#include "ember/ops.h"
#include "ember/optim/grad_scaler.h"
#include "ember/optim/sgd.h"

namespace ember {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// w = [[1, 2]] (no bias); loss = sum(x w^T), so dloss/dw = x exactly.
struct Tiny {
  nn::Linear fc{{.in = 2, .out = 1, .bias = false}};
  Tiny() { fc.weight.set(from_vector<float>({1, 2}, {1, 2})); }
  Array loss(float x0, float x1) { return sum(fc.forward(from_vector<float>({x0, x1}, {1, 2}))); }
  std::vector<float> w() { return fc.weight.array().to_vector<float>(); }
};

TEST(GradScaler, RejectsBadOptions) {
  auto message = [](optim::GradScalerOptions o) {
    try {
      optim::GradScaler s(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.init_scale = 0}), "GradScaler: init_scale must be positive and finite, got 0");
  EXPECT_EQ(message({.init_scale = kInf}), "GradScaler: init_scale must be positive and finite, got inf");
  EXPECT_EQ(message({.growth_factor = 1}), "GradScaler: growth_factor must be > 1, got 1");
  EXPECT_EQ(message({.backoff_factor = 1}), "GradScaler: backoff_factor must be in (0, 1), got 1");
  EXPECT_EQ(message({.growth_interval = 0}), "GradScaler: growth_interval must be >= 1, got 0");
}

TEST(GradScaler, ScalesUnscalesSkipsBacksOffAndGrows) {
  Tiny m;
  optim::Sgd opt(m.fc, {.lr = 0.25});
  optim::GradScaler scaler({.init_scale = 8, .growth_factor = 2, .backoff_factor = 0.5, .growth_interval = 2});
  auto params = m.fc.parameters();

  // The scaled loss: loss(1, 1) = 1 + 2 = 3, times 8.
  EXPECT_DOUBLE_EQ(scaler.scale(m.loss(1, 1)).item<double>(), 24.0);

  // Step 1: gradients 8 * [1, 1] unscale to [1, 1]; w = [1, 2] - 0.25 = [0.75, 1.75].
  Gradients g = scaler.scale(m.loss(1, 1)).backward();
  EXPECT_EQ(m.fc.weight.array().grad(g).to_vector<float>(), (std::vector<float>{8, 8}));
  EXPECT_TRUE(scaler.unscale(g, params));
  EXPECT_EQ(m.fc.weight.array().grad(g).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_THROW(scaler.unscale(g, params), Error);  // once per step
  EXPECT_TRUE(scaler.step(opt, g, params));
  EXPECT_EQ(m.w(), (std::vector<float>{0.75f, 1.75f}));
  EXPECT_EQ(scaler.scale_value(), 8);
  EXPECT_EQ(scaler.growth_tracker(), 1);

  // Step 2 (step() unscales itself): w -= 0.25 * [1, 1]; the second finite step in a row grows the scale to 16.
  g = scaler.scale(m.loss(1, 1)).backward();
  EXPECT_TRUE(scaler.step(opt, g, params));
  EXPECT_EQ(m.w(), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(scaler.scale_value(), 16);
  EXPECT_EQ(scaler.growth_tracker(), 0);

  // Step 3: an injected inf gradient (x0 = inf): skipped, w unchanged, scale backs off to 8.
  g = scaler.scale(m.loss(float(kInf), 1)).backward();
  EXPECT_FALSE(scaler.step(opt, g, params));
  EXPECT_EQ(m.w(), (std::vector<float>{0.5f, 1.5f}));
  EXPECT_EQ(scaler.scale_value(), 8);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  EXPECT_EQ(opt.steps(), 2);

  // Step 4: a NaN gradient: skipped again, scale 4.
  g = scaler.scale(m.loss(std::nanf(""), 1)).backward();
  EXPECT_FALSE(scaler.unscale(g, params));
  EXPECT_FALSE(scaler.step(opt, g, params));
  EXPECT_EQ(scaler.scale_value(), 4);
  EXPECT_EQ(scaler.skipped_steps(), 2);

  // Step 5: finite again; gradient [2, -1] (scaled by 4 and back): w = [0.5 - 0.5, 1.5 + 0.25].
  g = scaler.scale(m.loss(2, -1)).backward();
  EXPECT_EQ(m.fc.weight.array().grad(g).to_vector<float>(), (std::vector<float>{8, -4}));
  EXPECT_TRUE(scaler.step(opt, g, params));
  EXPECT_EQ(m.w(), (std::vector<float>{0.0f, 1.75f}));
  EXPECT_EQ(scaler.scale_value(), 4);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  EXPECT_EQ(opt.steps(), 3);
}

TEST(GradScaler, StateDictRoundTripsAndIsChecked) {
  Tiny m;
  optim::Sgd opt(m.fc, {.lr = 0.1});
  optim::GradScaler a({.init_scale = 1024, .growth_interval = 3});
  Gradients g = a.scale(m.loss(float(kInf), 1)).backward();
  a.step(opt, g, m.fc.parameters());  // skipped: scale 512
  g = a.scale(m.loss(1, 1)).backward();
  a.step(opt, g, m.fc.parameters());  // tracker 1
  nn::StateDict s = a.state_dict();
  EXPECT_EQ(s.at("scale").item<double>(), 512);
  optim::GradScaler b;
  b.load_state_dict(s);
  EXPECT_EQ(b.scale_value(), 512);
  EXPECT_EQ(b.growth_tracker(), 1);
  EXPECT_EQ(b.skipped_steps(), 1);
  s.erase("growth_tracker");
  try {
    b.load_state_dict(s);
    FAIL() << "missing entry accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "GradScaler::load_state_dict: missing entry \"growth_tracker\"");
  }
  s["growth_tracker"] = full({}, 0.0, {DType::F64});
  s["scale"] = full({}, -1.0, {DType::F64});
  EXPECT_THROW(b.load_state_dict(s), Error);
}

TEST(GradScaler, DisabledIsTheIdentity) {
  Tiny m;
  optim::Sgd opt(m.fc, {.lr = 0.5});
  optim::GradScaler s({.enabled = false});
  EXPECT_DOUBLE_EQ(s.scale(m.loss(1, 1)).item<double>(), 3.0);
  Gradients g = s.scale(m.loss(1, 1)).backward();
  EXPECT_TRUE(s.step(opt, g, m.fc.parameters()));
  EXPECT_EQ(m.w(), (std::vector<float>{0.5f, 1.5f}));
}

// Why f16 needs the scaler: a gradient of 2^-26 flowing through an f16 activation is below f16's
// smallest subnormal (2^-24) and becomes 0; scaled by 2^16 it survives and unscales to 2^-26.
TEST(GradScaler, PreventsF16GradientUnderflow) {
  auto weight_grad = [](bool scaled) {
    Tiny m;
    optim::GradScaler scaler({.init_scale = 65536});
    Array loss;
    {
      auto scope = autocast({.dtype = DType::F16});
      loss = mul(m.loss(1, 1), std::ldexp(1.0, -26));
    }
    Gradients g = (scaled ? scaler.scale(loss) : loss).backward();
    if (scaled) {
      EXPECT_TRUE(scaler.unscale(g, m.fc.parameters()));
    }
    return m.fc.weight.array().grad(g);
  };
  Array plain = weight_grad(false), scaled = weight_grad(true);
  EXPECT_EQ(plain.dtype(), DType::F32);  // master weights get f32 gradients either way
  EXPECT_EQ(plain.to_vector<double>(), (std::vector<double>{0, 0}));
  EXPECT_EQ(scaled.to_vector<double>(), (std::vector<double>{std::ldexp(1.0, -26), std::ldexp(1.0, -26)}));
}

}  // namespace
}  // namespace ember
