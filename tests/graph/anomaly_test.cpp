// Anomaly detection (ember/anomaly.h): the op that first made a NaN/inf from finite inputs is
// named with this file's line at the next read or eval, forward and backward; NaN/inf the user
// gave (data, constants) and values that only carry them along are not blamed; off by default,
// and off the same programs give NaN/inf silently; the guard restores the previous state.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "graph/anomaly.h"
#include "docs_snippets.h"
#include "scheduler/realize.h"
#include "test_util.h"

namespace ember {
namespace {

using testing::error_of;

std::string at_line(int line) { return "anomaly_test.cpp:" + std::to_string(line); }

// Each test starts with the mode off and leaves it as it found it (EMBER_DETECT_ANOMALY=1 turns it
// on for the process), with no anomaly left unreported.
class AnomalyTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override {
    previous_ = detect_anomaly_enabled();
    set_detect_anomaly(false);
  }
  void TearDown() override {
    set_detect_anomaly(previous_);
    try {
      throw_unreported_anomaly();
    } catch (const Error&) {
    }
  }
  Device device() const { return GetParam(); }

 private:
  bool previous_ = false;
};

TEST_P(AnomalyTest, LogOfZeroNamesLogAndTheLine) {
  DetectAnomalyGuard anomaly;
  Array x = from_vector<float>({1, 0, 2, 0}, {4}, device());
  const int line = __LINE__ + 1;
  Array y = log(x);
  Array z = mul(add(y, 1.0), 2.0);  // carries the -inf along: not the culprit
  std::string e = error_of([&] { z.to_vector<float>(); });
  EXPECT_NE(e.find("detect_anomaly: log (at " + at_line(line) + ")"), std::string::npos) << e;
  EXPECT_NE(e.find("2 of the 4 values of its float32 output of shape [4] (0 NaN, 2 inf)"), std::string::npos) << e;
  // Reported once: a later, finite computation reads normally.
  Array ok = exp(from_vector<float>({0, 1}, {2}, device()));
  EXPECT_TRUE(testing::all_close(ok, {1.0, std::exp(1.0)}));
}

TEST_P(AnomalyTest, OffByDefaultAndOffTheSameProgramGivesInfSilently) {
  // SetUp turned the mode off; that it is off by default is DefaultStateFollowsTheEnvironment.
  Array x = from_vector<float>({1, 0, 2, 0}, {4}, device());
  Array z = mul(add(log(x), 1.0), 2.0);
  std::vector<float> got;
  EXPECT_EQ(error_of([&] { got = z.to_vector<float>(); }), "<no error>");
  EXPECT_TRUE(testing::all_close(std::vector<double>(got.begin(), got.end()),
                                 {2.0, -INFINITY, 2 * (std::log(2.0) + 1), -INFINITY}));
}

TEST_P(AnomalyTest, NaNFromTheUsersDataIsNotReported) {
  DetectAnomalyGuard anomaly;
  Array x = from_vector<float>({1, NAN, 3}, {3}, device());
  Array y = exp(add(mul(x, 2.0), -1.0));  // NaN in, NaN out: carried along
  Array s = sum(y);
  Array inf_const = add(from_vector<float>({1, 2}, {2}, device()), INFINITY);  // the user's constant
  std::vector<float> got, got_inf;
  EXPECT_EQ(error_of([&] { got = y.to_vector<float>(); }), "<no error>");
  EXPECT_EQ(error_of([&] { got_inf = inf_const.to_vector<float>(); }), "<no error>");
  EXPECT_TRUE(testing::all_close(std::vector<double>(got.begin(), got.end()), {std::exp(1.0), NAN, std::exp(5.0)}));
  EXPECT_TRUE(std::isnan(s.item<double>()));
  EXPECT_EQ(got_inf, (std::vector<float>{INFINITY, INFINITY}));
}

TEST_P(AnomalyTest, ZeroOverZeroInAChainNamesDivNotALaterOp) {
  auto program = [&](int* div_line) {
    Array a = from_vector<float>({0, 1, 2}, {3}, device());
    Array b = from_vector<float>({0, 2, 4}, {3}, device());
    Array num = sub(mul(a, 3.0), b);  // [0, 1, 2]
    *div_line = __LINE__ + 1;
    Array q = div(num, a);            // [0/0, 1, 1]
    return sum(exp(add(q, 1.0)));     // elementwise chain + reduction: one kernel when fused
  };
  int line = 0;
  auto kernels_to_eval = [](const Array& s) {  // kernels run by s.eval(), and its error
    synchronize();
    const int64_t before = execution_stats().kernels;
    std::string e = error_of([&] { s.eval(); });
    synchronize();
    return std::pair{execution_stats().kernels - before, e};
  };
  // Off first (fused, and its partition cached), then on: the cached fused plan is not reused.
  auto [fused_kernels, no_error] = kernels_to_eval(program(&line));
  EXPECT_EQ(no_error, "<no error>");
  {
    DetectAnomalyGuard anomaly;
    auto [kernels, e] = kernels_to_eval(program(&line));
    EXPECT_NE(e.find("detect_anomaly: div (at " + at_line(line) + ")"), std::string::npos) << e;
    EXPECT_NE(e.find("1 of the 3 values of its float32 output of shape [3] (1 NaN, 0 inf)"), std::string::npos) << e;
    EXPECT_EQ(e.find("exp"), std::string::npos) << e;
    EXPECT_EQ(e.find("sum"), std::string::npos) << e;
    // mul, sub and div ran one kernel each; add, exp and sum failed with div's error unrun.
    EXPECT_EQ(kernels, 3);
    Array again = program(&line);
    EXPECT_NE(error_of([&] { again.item<double>(); }).find("div (at " + at_line(line) + ")"), std::string::npos);
  }
  if (fusion_enabled()) {  // EMBER_FUSION=0 runs every op alone anyway
    EXPECT_LT(fused_kernels, 3);
  }
  Array s = program(&line);  // off again: NaN, silently
  double got = 0;
  EXPECT_EQ(error_of([&] { got = s.item<double>(); }), "<no error>");
  EXPECT_TRUE(std::isnan(got));
}

TEST_P(AnomalyTest, BackwardOfSqrtAtZeroNamesTheBackwardAndTheForwardLine) {
  auto program = [&](int* sqrt_line) {
    Array x = from_vector<float>({0, 4}, {2}, device()).require_grad();
    *sqrt_line = __LINE__ + 1;
    Array y = sqrt(x);  // [0, 2]: finite
    Array loss = sum(mul(y, 3.0));
    Gradients g = loss.backward();
    return std::pair{loss, x.grad(g)};  // d/dx = 3 / (2 sqrt(x)): [inf, 0.75]
  };
  int line = 0;
  {
    DetectAnomalyGuard anomaly;
    auto [loss, dx] = program(&line);
    EXPECT_EQ(error_of([&] { EXPECT_DOUBLE_EQ(loss.item<double>(), 6.0); }), "<no error>");
    std::string e = error_of([&] { dx.to_vector<float>(); });
    EXPECT_NE(e.find("in the backward of sqrt created at " + at_line(line)), std::string::npos) << e;
    EXPECT_NE(e.find("detect_anomaly: div in the backward of sqrt"), std::string::npos) << e;
    EXPECT_NE(e.find("(0 NaN, 1 inf)"), std::string::npos) << e;
  }
  auto [loss, dx] = program(&line);
  std::vector<float> got;
  EXPECT_EQ(error_of([&] { got = dx.to_vector<float>(); }), "<no error>");
  EXPECT_EQ(got, (std::vector<float>{INFINITY, 0.75f}));
}

TEST_P(AnomalyTest, EvalThrowsAndALaterReadReportsAnAnomalyItDidNotDependOn) {
  DetectAnomalyGuard anomaly;
  Array zero = from_vector<float>({0, 1}, {2}, device());
  int line = __LINE__ + 1;
  Array y = log(zero);
  std::string e = error_of([&] { y.eval(); });
  EXPECT_NE(e.find("log (at " + at_line(line) + ")"), std::string::npos) << e;
  // An automatic evaluation (no user read) finds it; the next read of anything reports it.
  line = __LINE__ + 1;
  Array big = exp(from_vector<float>({1, 100}, {2}, device()));  // exp(100) overflows f32
  realize({big.node()});
  Array other = add(from_vector<float>({1}, {1}, device()), 1.0);
  e = error_of([&] { other.item<double>(); });
  EXPECT_NE(e.find("exp (at " + at_line(line) + ")"), std::string::npos) << e;
  EXPECT_NE(e.find("(0 NaN, 1 inf)"), std::string::npos) << e;
  EXPECT_DOUBLE_EQ(other.item<double>(), 2.0);  // reported once
}

TEST_P(AnomalyTest, TwoCulpritsInOneRealizationTheFirstIsReportedFirst) {
  DetectAnomalyGuard anomaly;
  const int log_line = __LINE__ + 1;
  Array y1 = log(from_vector<float>({0, 1}, {2}, device()));
  const int sqrt_line = __LINE__ + 1;
  Array y2 = sqrt(from_vector<float>({-1, 1}, {2}, device()));
  // One realization computes log, then sqrt: the eval reports log (the first).
  std::string e = error_of([&] { eval({y1, y2}); });
  EXPECT_NE(e.find("log (at " + at_line(log_line) + ")"), std::string::npos) << e;
  EXPECT_EQ(e.find("sqrt"), std::string::npos) << e;
  // sqrt failed too, with its own error: reading it says so.
  e = error_of([&] { y2.to_vector<float>(); });
  EXPECT_NE(e.find("sqrt (at " + at_line(sqrt_line) + ") produced NaN/inf"), std::string::npos) << e;
  EXPECT_NE(e.find("(1 NaN, 0 inf)"), std::string::npos) << e;
  EXPECT_DOUBLE_EQ(add(from_vector<float>({1}, {1}, device()), 2.0).item<double>(), 3.0);
}

TEST_P(AnomalyTest, ACustomFunctionsBackwardNamesTheRulesLineAndTheApplyLine) {
  const int rule_line = __LINE__ + 3;
  CustomFunction reciprocal_grad{
      .forward = [](const std::vector<Array>& in) { return mul(in[0], 2.0); },
      .backward = [](const std::vector<Array>& in, const Array&, const Array& g) { return std::vector{div(g, in[0])}; },
      .name = "halving"};
  DetectAnomalyGuard anomaly;
  Array x = from_vector<float>({0, 2}, {2}, device()).require_grad();
  const int apply_line = __LINE__ + 1;
  Array y = apply(reciprocal_grad, {x});
  auto dx = grad(sum(y), {x});
  std::string e = error_of([&] { dx[0].to_vector<float>(); });
  EXPECT_NE(e.find("div (at " + at_line(rule_line) + ") in the backward of a custom function created at " +
                   at_line(apply_line) + " produced NaN/inf"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("(0 NaN, 1 inf)"), std::string::npos) << e;
}

TEST_P(AnomalyTest, HalfPrecisionOverflowAndCastOverflow) {
  DetectAnomalyGuard anomaly;
  Array h = cast(from_vector<float>({100, 1000}, {2}, device()), DType::F16);
  int line = __LINE__ + 1;
  Array p = mul(h, h);  // 10^4 fits f16, 10^6 > 65504 does not
  std::string e = error_of([&] { p.to_vector<float>(); });
  EXPECT_NE(e.find("mul (at " + at_line(line) + ")"), std::string::npos) << e;
  EXPECT_NE(e.find("1 of the 2 values of its float16 output of shape [2] (0 NaN, 1 inf)"), std::string::npos) << e;
  Array b = cast(from_vector<float>({-3e38f, 3e38f, 1}, {3}, device()), DType::BF16);
  line = __LINE__ + 1;
  Array bb = add(b, b);  // +-6e38 overflows bf16
  e = error_of([&] { bb.to_vector<float>(); });
  EXPECT_NE(e.find("add (at " + at_line(line) + ")"), std::string::npos) << e;
  EXPECT_NE(e.find("2 of the 3 values of its bfloat16 output of shape [3] (0 NaN, 2 inf)"), std::string::npos) << e;
  Array d = from_vector<double>({1e300, -1, 1e300}, {3}, device());
  line = __LINE__ + 1;
  Array f = cast(d, DType::F32);
  e = error_of([&] { f.to_vector<float>(); });
  EXPECT_NE(e.find("cast (at " + at_line(line) + ")"), std::string::npos) << e;
  EXPECT_NE(e.find("(0 NaN, 2 inf)"), std::string::npos) << e;
}

TEST_P(AnomalyTest, SqrtOfMinusOneThroughAStridedViewCountsEveryNaN) {
  DetectAnomalyGuard anomaly;
  // [[1, -1, 4], [-4, 9, 16]] transposed: sqrt reads a strided view; two NaN in six values.
  Array x = permute(from_vector<float>({1, -1, 4, -4, 9, 16}, {2, 3}, device()), {1, 0});
  int line = __LINE__ + 1;
  Array r = sqrt(x);
  std::string e = error_of([&] { r.to_vector<float>(); });
  EXPECT_NE(e.find("sqrt (at " + at_line(line) + ")"), std::string::npos) << e;
  EXPECT_NE(e.find("2 of the 6 values of its float32 output of shape [3, 2] (2 NaN, 0 inf)"), std::string::npos) << e;
}

TEST_P(AnomalyTest, FiniteProgramsGiveTheSameValuesWithTheModeOn) {
  // A masked softmax: -inf from the user's constant goes in, finite probabilities come out (no
  // op is blamed for the -inf that max and sub carry along); integer ops are not checked.
  auto program = [&] {
    Array x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, device());
    Array mask = from_vector<bool>({true, true, false, true, false, false}, {2, 3}, device());
    Array p = softmax(where(mask, x, -INFINITY), 1);
    Array w = from_vector<float>({1, 0, 0, 1, 1, 1}, {3, 2}, device());
    Array i = add(mul(arange(0, 4, 1, DType::I64, device()), 3), 1);
    return std::tuple{matmul(p, w).to_vector<double>(), i.to_vector<int64_t>()};
  };
  auto [off, off_i] = program();
  DetectAnomalyGuard anomaly;
  std::vector<double> on;
  std::vector<int64_t> on_i;
  EXPECT_EQ(error_of([&] { std::tie(on, on_i) = program(); }), "<no error>");
  const double e = std::exp(1.0);
  // Row 0: softmax(1, 2, -inf) = (1, e, 0) / (1 + e), row 1: (1, 0, 0); times w.
  EXPECT_TRUE(testing::all_close(off, {1 / (1 + e), e / (1 + e), 1, 0}, 1e-5));
  EXPECT_TRUE(testing::all_close(on, off, 1e-6));
  EXPECT_EQ(on_i, (std::vector<int64_t>{1, 4, 7, 10}));
  EXPECT_EQ(on_i, off_i);
}

INSTANTIATE_TEST_SUITE_P(Devices, AnomalyTest, ::testing::ValuesIn(testing::test_devices()),
                         testing::device_test_name);

TEST(AnomalySwitchTest, GuardRestoresThePreviousState) {
  const bool before = detect_anomaly_enabled();
  set_detect_anomaly(false);
  {
    DetectAnomalyGuard on;
    EXPECT_TRUE(detect_anomaly_enabled());
    {
      DetectAnomalyGuard off(false);
      EXPECT_FALSE(detect_anomaly_enabled());
    }
    EXPECT_TRUE(detect_anomaly_enabled());
  }
  EXPECT_FALSE(detect_anomaly_enabled());
  set_detect_anomaly(true);
  { DetectAnomalyGuard on; }
  EXPECT_TRUE(detect_anomaly_enabled());
  set_detect_anomaly(before);
}

// Off by default; ctest's graph.detect_anomaly_env runs this with EMBER_DETECT_ANOMALY=1.
TEST(AnomalySwitchTest, DefaultStateFollowsTheEnvironment) {
  const char* env = std::getenv("EMBER_DETECT_ANOMALY");
  EXPECT_EQ(detect_anomaly_enabled(), env && std::string(env) == "1");
}

// The example of docs/semantics.md, "Anomaly detection" (PageExampleIsThisTest keeps them equal).
TEST(AnomalyDocsTest, SemanticsPageExample) {
  const bool before = detect_anomaly_enabled();
  {
    const int loss_line = __LINE__ + 3;
    DetectAnomalyGuard anomaly;  // or set_detect_anomaly(true), or EMBER_DETECT_ANOMALY=1
    auto x = Tensor<1>::from_data({4.0f, 0.0f, 1.0f}).require_grad();
    auto loss = (sqrt(x) * 3.0f).sum();  // sqrt(0) = 0 is finite; its gradient 3 / (2 sqrt(0)) is not
    auto [dx] = grad(loss, x);
    std::string message;
    try {
      dx.to_vector();
    } catch (const Error& e) {
      message = e.what();  // "detect_anomaly: div in the backward of sqrt created at train.cpp:3 produced
    }                      //  NaN/inf from inputs without any: 1 of the 3 values of its float32 output ..."
    EXPECT_NE(message.find("detect_anomaly: div in the backward of sqrt created at " + at_line(loss_line) +
                           " produced NaN/inf from inputs without any: 1 of the 3 values of its float32 output of "
                           "shape [3] (0 NaN, 1 inf)"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(detect_anomaly_enabled(), before);
}

// The ```cpp blocks of one section of a page, each as trimmed non-blank lines.
std::vector<std::vector<std::string>> section_blocks(const std::string& path, const std::string& heading) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> blocks;
  bool in_section = false, in_block = false;
  for (std::string line; std::getline(in, line);) {
    const std::string t = testing::trimmed(line);
    if (!in_block && t.rfind("## ", 0) == 0) in_section = t.rfind(heading, 0) == 0;
    if (!in_section) continue;
    if (!in_block && t == "```cpp") {
      in_block = true;
      blocks.emplace_back();
    } else if (in_block && t == "```") {
      in_block = false;
    } else if (in_block && !t.empty()) {
      blocks.back().push_back(t);
    }
  }
  return blocks;
}

TEST(AnomalyDocsTest, PageExampleIsThisTest) {
  const std::string root = std::string(EMBER_TEST_SOURCE_DIR) + "/..";
  auto blocks = section_blocks(root + "/docs/semantics.md", "## Anomaly detection");
  ASSERT_EQ(blocks.size(), 1u) << "docs/semantics.md, Anomaly detection: one example expected";
  std::vector<std::string> source = testing::trimmed_lines(root + "/tests/graph/anomaly_test.cpp");
  const std::vector<std::string>& block = blocks[0];
  bool found = false;
  for (size_t start = 0; !found && start + block.size() <= source.size(); ++start)
    found = std::equal(block.begin(), block.end(), source.begin() + long(start));
  EXPECT_TRUE(found) << "the example of docs/semantics.md, Anomaly detection, is not in this file line for line";
}

}  // namespace
}  // namespace ember
