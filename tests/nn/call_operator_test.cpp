// The module call operator: model(x) as model.forward(x) for user modules written with
// EMBER_MODULE (typed and Array forward, several arguments, default arguments, nested user
// modules) and for the built-in layers, Array or typed (Linear, Conv2d, activations, Sequential,
// LSTM, transformer). Values are checked against forward, and forward's against hand-computed
// numbers; the compile-time checks say which calls exist.
#include <gtest/gtest.h>

#include <type_traits>

#include "ember/ember.h"
#include "nn/nn_test_util.h"

namespace ember {
namespace {

using namespace ember::nn;
using ember::testing::all_close;

// forward declared after EMBER_MODULE, with a default argument: y = x W^T + b, times scale.
struct Scaled : Module {
  Linear fc{{.in = 2, .out = 2, .bias = true, .dtype = DType::F64, .device = ember::testing::nn_device()}};
  EMBER_MODULE(fc)
  Tensor<2> forward(const Tensor<2>& x, double scale = 1.0) { return fc(x) * scale; }
};

// Two overloads (typed and Array), and a nested user module.
struct Outer : Module {
  Scaled inner;
  EMBER_MODULE(inner)
  Tensor<2> forward(const Tensor<2>& x) { return inner(x, 2.0) + 1.0; }
  Array forward(const Array& x) { return forward(Tensor<2>(x)).array(); }
};

// Two inputs of different ranks.
struct Pair : Module {
  EMBER_MODULE()
  Tensor<3> forward(const Tensor<3>& a, const Tensor<2>& b) { return a - b; }
};

// Linear with W = [[1, 2], [3, 4]], b = [0.5, -1]: x = [[1, 1], [2, 0]] gives [[3.5, 6], [2.5, 5]].
void set_known_weights(Linear& fc) {
  Device dev = fc.weight.array().device();
  fc.weight.set(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, dev));
  fc.bias.set(from_vector(std::vector<double>{0.5, -1}, {2}, dev));
}
Tensor<2> known_input() {
  return Tensor<2>::from_data({{1, 1}, {2, 0}}, {.dtype = DType::F64, .device = ember::testing::nn_device()});
}

TEST(CallOperatorTest, UserModuleCallsItsForward) {
  Scaled m;
  set_known_weights(m.fc);
  Tensor<2> y = m(known_input());
  static_assert(std::is_same_v<decltype(m(known_input())), Tensor<2>>);
  EXPECT_TRUE(all_close(y.array(), {3.5, 6, 2.5, 5}, 0, 1e-12));
  Tensor<2> y3 = m(known_input(), 3.0);  // the default argument can be given too
  EXPECT_TRUE(all_close(y3.array(), {10.5, 18, 7.5, 15}, 0, 1e-12));
  EXPECT_TRUE(all_close(y3.array(), m.forward(known_input(), 3.0).to_vector<double>(), 0, 0));
}

TEST(CallOperatorTest, OverloadsAndNestedModules) {
  Outer m;
  set_known_weights(m.inner.fc);
  Tensor<2> typed = m(known_input());  // 2 * fc(x) + 1
  EXPECT_TRUE(all_close(typed.array(), {8, 13, 6, 11}, 0, 1e-12));
  Array untyped = m(known_input().array());
  static_assert(std::is_same_v<decltype(m(known_input().array())), Array>);
  EXPECT_TRUE(all_close(untyped, {8, 13, 6, 11}, 0, 1e-12));

  Pair p;
  auto a = Tensor<3>::ones({2, 1, 2}, {.dtype = DType::F64});
  auto b = Tensor<2>::from_data({{1, 2}, {3, 4}}, {.dtype = DType::F64});
  Tensor<3> d = p(a, b);
  EXPECT_EQ(d.shape(), Shape({2, 2, 2}));
  EXPECT_TRUE(all_close(d.array(), {0, -1, -2, -3, 0, -1, -2, -3}, 0, 0));
}

TEST(CallOperatorTest, CallsThatDoNotMatchForwardDoNotCompile) {
  static_assert(std::is_invocable_v<Scaled&, Tensor<2>>);
  static_assert(std::is_invocable_v<Scaled&, Tensor<2>, double>);
  static_assert(!std::is_invocable_v<Scaled&, Tensor<3>>);            // no forward takes a Tensor<3>
  static_assert(!std::is_invocable_v<Scaled&, Tensor<2>, Tensor<2>>);  // nor two tensors
  static_assert(!std::is_invocable_v<Pair&, Tensor<2>, Tensor<3>>);
  SUCCEED();
}

TEST(CallOperatorTest, LocalClassesUseTheVisitOnlyMacro) {
  struct Local : Module {  // a class inside a function may not have member templates
    Linear fc{{.in = 2, .out = 2, .dtype = DType::F64, .device = ember::testing::nn_device()}};
    EMBER_MODULE_VISIT(fc)
    Tensor<2> forward(const Tensor<2>& x) { return fc(x); }
  };
  Local m;
  set_known_weights(m.fc);
  EXPECT_EQ(m.named_parameters().size(), 2u);
  EXPECT_TRUE(all_close(m.forward(known_input()).array(), {3.5, 6, 2.5, 5}, 0, 1e-12));
  static_assert(!std::is_invocable_v<Local&, Tensor<2>>);
}

TEST(CallOperatorTest, BuiltInLayersTakeArraysAndTensors) {
  Device dev = ember::testing::nn_device();
  Linear fc({.in = 2, .out = 2, .dtype = DType::F64, .device = dev});
  set_known_weights(fc);
  Array x = known_input().array();
  static_assert(std::is_same_v<decltype(fc(x)), Array>);
  static_assert(std::is_same_v<decltype(fc(known_input())), Tensor<2>>);
  EXPECT_TRUE(all_close(fc(x), {3.5, 6, 2.5, 5}, 0, 1e-12));
  EXPECT_TRUE(all_close(fc(known_input()).array(), {3.5, 6, 2.5, 5}, 0, 1e-12));

  ReLU relu_layer;
  static_assert(std::is_same_v<decltype(relu_layer(x)), Array>);
  EXPECT_TRUE(all_close(relu_layer(sub(x, 1.5)), {0, 0, 0.5, 0}, 0, 0));

  Conv2d conv({.in = 1, .out = 1, .kernel = 2, .bias = false, .dtype = DType::F64, .device = dev});
  conv.weight.set(ones({1, 1, 2, 2}, {.dtype = DType::F64, .device = dev}));
  Array img = reshape(arange(0, 9, 1, DType::F64, dev), {1, 1, 3, 3});  // 2x2 window sums
  EXPECT_TRUE(all_close(conv(img), {8, 12, 20, 24}, 0, 1e-12));
  EXPECT_TRUE(all_close(conv(Tensor<4>(img)).array(), {8, 12, 20, 24}, 0, 1e-12));

  Sequential seq(fc, ReLU());
  static_assert(std::is_same_v<decltype(seq(x)), Array>);
  EXPECT_TRUE(all_close(seq(neg(x)), {0, 0, 0, 0}, 0, 0));  // fc(-x) = [[-2.5, -8], [-1.5, -7]]
  EXPECT_TRUE(all_close(seq(known_input()).array(), {3.5, 6, 2.5, 5}, 0, 1e-12));
}

TEST(CallOperatorTest, RecurrentAndTransformerModules) {
  Device dev = ember::testing::nn_device();
  LSTM lstm({.input_size = 3, .hidden_size = 4, .seed = 3, .dtype = DType::F64, .device = dev});
  Array x = ember::testing::det({5, 2, 3}, 0.37, 0.1);
  RecurrentOutput want = lstm.forward(x);
  RecurrentOutput got = lstm(x);
  EXPECT_TRUE(all_close(got.output, want.output.to_vector<double>(), 0, 0));
  EXPECT_TRUE(all_close(got.c_n, want.c_n.to_vector<double>(), 0, 0));

  TransformerEncoder enc({.layer = {.d_model = 4, .nhead = 2, .dim_feedforward = 8, .dropout = 0,
                                    .seed = 5, .dtype = DType::F64, .device = dev}});
  Array src = ember::testing::det({3, 2, 4}, 0.21, 0.3);
  EXPECT_TRUE(all_close(enc(src), enc.forward(src).to_vector<double>(), 0, 0));
}

}  // namespace
}  // namespace ember
