// Fused kernels on non-finite inputs: elementwise chains, reductions with their prologues and
// epilogues, reduce-then-broadcast kernels (softmax, normalizing by a sum) and donated buffers, on
// inputs with NaN, +-inf, -0 and huge values, on the CPU backend with the interpreter (tier 0)
// and with compiled kernels (tier 1), against the unfused graph on the reference backend.
// Exact ops (arithmetic, comparisons, selects, max/min, sqrt) must match bit for bit (NaN
// payloads aside); transcendental ones must agree in class (NaN, the same infinity, the same
// signed zero) and within rounding elsewhere.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>

#include "backend/tier1_harness.h"
#include "ember/ember.h"

namespace ember {
namespace {

std::vector<float> with_specials(int64_t n, uint32_t seed, int64_t stride) {
  static const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e30f, -1e30f, 0.0f, -40.0f, 40.0f, 1e-40f};
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = i % stride == 2 ? specials[size_t(i / stride) % std::size(specials)] : u(g);
  return v;
}

::testing::AssertionResult same(const std::vector<float>& got, const std::vector<float>& want, bool exact) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i], w = want[i];
    bool ok;
    if (std::isnan(w)) ok = std::isnan(g);
    else if (exact || std::isinf(w) || w == 0) ok = std::bit_cast<uint32_t>(g) == std::bit_cast<uint32_t>(w);
    else ok = std::fabs(g - w) <= 2e-5f * std::fabs(w) + 1e-6f;
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << ": got " << g << " (bits " << std::hex
                                           << std::bit_cast<uint32_t>(g) << "), the reference " << w << " (bits "
                                           << std::bit_cast<uint32_t>(w) << ")";
  }
  return ::testing::AssertionSuccess();
}

using Graph = std::function<Array(const std::vector<Array>&)>;
struct Case {
  std::string name;
  Graph f;
  bool exact;
};

std::vector<Case> cases() {
  using V = const std::vector<Array>&;
  return {
      {"mul add bias", [](V x) { return add(mul(x[0], x[1]), x[2]); }, true},
      {"div sub", [](V x) { return sub(div(x[0], x[1]), x[0]); }, true},
      {"neg abs times zero", [](V x) { return mul(neg(abs(x[0])), 0.0); }, true},
      {"relu max min", [](V x) { return minimum(relu(x[0]), maximum(x[1], -1.0)); }, true},
      {"where compare", [](V x) { return where(gt(x[0], x[1]), x[0], neg(x[1])); }, true},
      {"sqrt clamp", [](V x) { return sqrt(clamp(x[0], 0.0, 1e20)); }, true},
      {"exp log tanh", [](V x) { return add(exp(mul(x[0], 0.1)), tanh(log(abs(x[1])))); }, false},
      {"gelu sigmoid", [](V x) { return mul(gelu(x[0]), sigmoid(x[1])); }, false},
      {"sum rows", [](V x) { return sum(mul(x[0], x[1]), {1}); }, false},
      {"mean columns", [](V x) { return mean(x[0], {0}); }, false},
      {"max rows", [](V x) { return max(add(x[0], x[2]), {1}); }, true},
      {"min columns", [](V x) { return min(x[1], {0}); }, true},
      {"softmax", [](V x) { return softmax(x[0], 1); }, false},
      {"logsumexp", [](V x) { return logsumexp(x[1], {1}); }, false},
      {"normalize by row sum", [](V x) { return div(x[0], add(sum(abs(x[1]), {1}, true), 1.0)); }, false},
      {"argmax", [](V x) { return cast(argmax(x[0], 1), DType::F32); }, true},
  };
}

// `via_f64`: the same values stored as f64 and cast to f32 inside the graph, so every kernel is a
// new program (one made under the tier-1 mode compiles; a cached one would stay interpreted).
std::vector<Array> inputs(Device d, bool via_f64) {
  auto make = [&](int64_t n, uint32_t seed, int64_t stride, const Shape& shape) {
    std::vector<float> v = with_specials(n, seed, stride);
    if (!via_f64) return from_vector<float>(v, shape, d).eval();
    return cast(from_vector<double>(std::vector<double>(v.begin(), v.end()), shape, d).eval(), DType::F32);
  };
  return {make(64 * 33, 1, 5, {64, 33}), make(64 * 33, 2, 7, {64, 33}), make(33, 3, 4, {33})};
}

void check_cases(int tier) {
  ::ember::testing::Tier1Scope scope(tier);
  const bool via_f64 = tier == 1;
  const auto before = ::ember::testing::stats();
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    set_fusion_enabled(false);
    const std::vector<float> want = c.f(inputs(Device::reference(), via_f64)).to_vector<float>();
    set_fusion_enabled(true);
    EXPECT_TRUE(same(c.f(inputs(Device::cpu(), via_f64)).to_vector<float>(), want, c.exact));
    EXPECT_TRUE(same(c.f(inputs(Device::reference(), via_f64)).to_vector<float>(), want, c.exact));  // fused
  }
  if (tier == 1) {
    EXPECT_GT(::ember::testing::stats().launches, before.launches) << "no kernel ran compiled";
  }
}

TEST(NonFiniteFusionTest, InterpretedKernelsMatchTheReference) { check_cases(0); }

TEST(NonFiniteFusionTest, CompiledKernelsMatchTheReference) {
  if (!::ember::testing::compiler_present()) GTEST_SKIP() << "no C++ compiler: tier 1 cannot run";
  check_cases(1);
}

// A loop whose kernels write into their inputs' buffers (donation) keeps NaN, infinities and
// signed zeros exactly as the reference computes them.
TEST(NonFiniteFusionTest, DonatedBuffersKeepNonFiniteValues) {
  auto loop = [](Device d) {
    Array x = from_vector<float>(with_specials(4096, 4, 3), {4096}, d).eval();
    for (int i = 0; i < 5; ++i) {
      x = sub(mul(x, 0.5), neg(x));  // x * 0.5 + x; the old x is now held by the graph only
      x.eval();
      synchronize();  // (an input still held by its queued work item is not donated)
    }
    return x.to_vector<float>();
  };
  const std::vector<float> want = loop(Device::reference());
  synchronize();
  reset_execution_stats();
  EXPECT_TRUE(same(loop(Device::cpu()), want, true));
  EXPECT_GT(execution_stats().buffers_donated, 0);
}

}  // namespace
}  // namespace ember
