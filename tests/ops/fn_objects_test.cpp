// Ops as function values (ember/fn.h): every op of the elementwise table has its ember::fn
// object, which stores in a std::function, calls the very function (same values, same errors
// with the caller's line), keeps the Tensor kinds' rules (fn::exp of an Int tensor does not
// compile), and `using namespace ember` with <cmath> still compiles.
#include <gtest/gtest.h>

#include <cmath>
#include <ember/ember.h>
#include <functional>
#include <type_traits>
#include <vector>

namespace ember {
namespace {

// Compile-time: every unary (Plain, Rounding) and binary op of the table is a function value
// with the function's signature on Arrays.
#define EMBER_FN_CHECK_Plain(name)                                                                      \
  static_assert(std::is_convertible_v<decltype(fn::name), std::function<Array(const Array&)>>, #name); \
  static_assert(std::is_same_v<decltype(fn::name(std::declval<Array>())), Array>, #name);
#define EMBER_FN_CHECK_Rounding(name) EMBER_FN_CHECK_Plain(name)
#define EMBER_FN_CHECK_Params(name) EMBER_FN_CHECK_Plain(name)
#define EMBER_FN_CHECK_Cast(name)
#define EMBER_UNARY_OP(Name, name, rule, form, ...) EMBER_FN_CHECK_##form(name)
#define EMBER_BINARY_OP(Name, name, ...)                                                                  \
  static_assert(std::is_convertible_v<decltype(fn::name), std::function<Array(const Array&, const Array&)>>, \
                #name);                                                                                   \
  static_assert(std::is_same_v<decltype(fn::name(std::declval<Array>(), 2)), Array>, #name);
#include "ember/elementwise_ops.def"

// The Tensor kinds carry over: what the function refuses, the object refuses.
static_assert(std::is_same_v<decltype(fn::exp(std::declval<Tensor<2>>())), Tensor<2>>);
static_assert(!std::is_invocable_v<decltype(fn::exp), Tensor<1, Int>>);
static_assert(std::is_same_v<decltype(fn::lt(std::declval<Tensor<2>>(), std::declval<Tensor<1>>())), Tensor<2, Bool>>);
static_assert(!std::is_invocable_v<decltype(fn::bitwise_and), Tensor<1>, Tensor<1>>);

TEST(FnObjectsTest, StoredInStdFunctionTheyComputeWhatTheFunctionsDo) {
  Array x = from_vector<float>({-2, -0.5f, 0, 1.5f, NAN}, {5});
  std::vector<std::function<Array(const Array&)>> acts{fn::relu, fn::tanh, fn::sigmoid, fn::gelu, fn::exp};
  std::vector<Array> want{relu(x), tanh(x), sigmoid(x), gelu(x), exp(x)};
  for (size_t i = 0; i < acts.size(); ++i) {
    std::vector<float> got = acts[i](x).to_vector<float>(), exp_ = want[i].to_vector<float>();
    ASSERT_EQ(got.size(), exp_.size());
    for (size_t k = 0; k < got.size(); ++k) {
      if (std::isnan(exp_[k])) EXPECT_TRUE(std::isnan(got[k])) << i << "," << k;
      else EXPECT_EQ(got[k], exp_[k]) << i << "," << k;
    }
  }
  // Independent values for two of them.
  EXPECT_EQ(acts[0](x).to_vector<float>()[3], 1.5f);
  EXPECT_FLOAT_EQ(acts[4](x).to_vector<float>()[2], 1.f);
  std::function<Array(const Array&, const Array&)> combine = fn::maximum;
  EXPECT_EQ(combine(from_vector<float>({1, 5}, {2}), from_vector<float>({3, 2}, {2})).to_vector<float>(),
            (std::vector<float>{3, 5}));
  std::function<Array(const Array&)> soft = fn::softplus;  // the Params form, with its defaults
  EXPECT_FLOAT_EQ(soft(from_vector<float>({0}, {1})).to_vector<float>()[0], std::log(2.f));
  EXPECT_FLOAT_EQ(fn::leaky_relu(from_vector<float>({-2}, {1}), 0.5).to_vector<float>()[0], -1.f);
}

TEST(FnObjectsTest, TensorsAndScalarsAsTheFunctionsTakeThem) {
  Tensor<2> t(from_vector<float>({1, 2, 3, 4}, {2, 2}));
  Tensor<2> y = fn::mul(t, 2);
  EXPECT_EQ(y.array().to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
  Tensor<2, Bool> b = fn::gt(t, 2.5);
  EXPECT_EQ(b.array().to_vector<bool>(), (std::vector<bool>{false, false, true, true}));
  std::function<Tensor<2>(const Tensor<2>&)> neg = fn::neg;
  EXPECT_EQ(neg(t).array().to_vector<float>(), (std::vector<float>{-1, -2, -3, -4}));
}

TEST(FnObjectsTest, ErrorsNameTheCallersLine) {
  try {
    (void)fn::add(zeros({2}), zeros({3}));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fn_objects_test.cpp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ember

// <cmath>'s functions and Ember's coexist under a using-directive in user code (the reason the
// objects live in ember::fn): unqualified calls still resolve by argument type.
namespace user_code {
using namespace ember;
inline std::pair<double, float> cmath_and_ember() { return {exp(1.0), exp(zeros({1})).to_vector<float>()[0]}; }
}  // namespace user_code

TEST(FnObjectsTest, UsingNamespaceEmberWithCmathStillCompiles) {
  auto [d, f] = user_code::cmath_and_ember();
  EXPECT_DOUBLE_EQ(d, std::exp(1.0));
  EXPECT_EQ(f, 1.f);
}
