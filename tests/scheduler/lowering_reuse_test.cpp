// Lowered kernels reused across realizations (run_fused in src/scheduler/lower_fused.cpp): a graph
// with the structure of one realized before takes its kernels' programs and argument recipes
// from the plan cache's LoweringSlot instead of emitting them again. What could make a reused
// program wrong is what the plan cache's key does not hold, so each test changes one such thing
// between two graphs of one structure and checks the values against formulas evaluated in double
// (and that the program really was reused, or really was not): the constants folded into the
// program, whether two inputs are one node (x * x against x * y, in both orders), the strides
// of an input that is a view, and a random op's seed.
#include <gtest/gtest.h>

#include <cmath>

#include "ember/ember.h"
#include "scheduler/fusion.h"
#include "test_util.h"

namespace ember {
namespace {

class LoweringReuseTest : public ::testing::TestWithParam<Device> {
 protected:
  Device d = GetParam();
  void SetUp() override { synchronize(); }
  static int64_t reuses() {
    synchronize();
    return lowered_kernel_reuses();
  }
  Array values(const std::vector<float>& v, const Shape& s) { return from_vector<float>(v, s, d); }
};

std::vector<float> ramp(size_t n, double scale, double shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(double(i) * scale + shift);
  return v;
}

// The same chain with other values in the inputs reuses its program and computes the new values.
TEST_P(LoweringReuseTest, SameStructureReusesTheProgram) {
  for (int round = 0; round < 3; ++round) {
    std::vector<float> xv = ramp(300, 0.01, -1.0 + round);
    Array x = values(xv, {3, 100});
    const int64_t before = reuses();
    std::vector<float> y = add(mul(exp(x), 0.5), 1.0).to_vector<float>();
    if (round > 0) {
      EXPECT_GE(reuses(), before + 1) << "round " << round;
    }
    for (size_t i = 0; i < xv.size(); ++i)
      ASSERT_NEAR(y[i], std::exp(double(xv[i])) * 0.5 + 1.0, 1e-5 * (1 + std::fabs(y[i]))) << round << " " << i;
  }
}

// Constants are part of the program: another scale is not the program of the first.
TEST_P(LoweringReuseTest, OtherConstantsAreNotReused) {
  std::vector<float> xv = ramp(200, 0.02, -2.0);
  Array x = values(xv, {200});
  for (double scale : {2.0, 3.0, -0.25, 2.0}) {
    std::vector<float> y = add(mul(tanh(x), scale), scale).to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i)
      ASSERT_NEAR(y[i], std::tanh(double(xv[i])) * scale + scale, 1e-5) << "scale " << scale << " at " << i;
  }
}

// An op's own scalar parameters (leaky_relu's slope, a uniform's bounds) are constants too.
TEST_P(LoweringReuseTest, OtherParametersAreNotReused) {
  std::vector<float> xv = ramp(100, 0.1, -5.0);
  Array x = values(xv, {100});
  for (double slope : {0.1, 0.5, 0.1}) {
    std::vector<float> y = add(leaky_relu(x, slope), 1.0).to_vector<float>();
    for (size_t i = 0; i < xv.size(); ++i)
      ASSERT_NEAR(y[i], (xv[i] > 0 ? double(xv[i]) : double(xv[i]) * slope) + 1.0, 1e-5) << slope << " at " << i;
  }
  Array zero = values(ramp(1000, 0, 0), {1000});
  std::vector<float> u01 = add(uniform({1000}, 0, 1, {.seed = 5, .device = d}), zero).to_vector<float>();
  std::vector<float> u23 = add(uniform({1000}, 2, 3, {.seed = 5, .device = d}), zero).to_vector<float>();
  for (size_t i = 0; i < u01.size(); ++i) ASSERT_NEAR(u23[i], u01[i] + 2.0f, 1e-5) << i;
}

// (x + 0.5) * x loads x once; (x + 0.5) * y has two arguments. Either program run for the other
// graph would be wrong (x * y through x * x's program ignores y), so whether inputs are one node
// is checked. (Exact float arithmetic here: a GPU's sin may be 2^-11 off.)
TEST_P(LoweringReuseTest, OneInputReadTwiceIsNotTwoInputs) {
  std::vector<float> xv = ramp(128, 0.05, -3.0), yv = ramp(128, -0.03, 2.0);
  Array x = values(xv, {128}), y = values(yv, {128});
  auto expect = [&](const std::vector<float>& got, const std::vector<float>& a, const std::vector<float>& b,
                    const char* what) {
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = (double(a[i]) + 0.5) * double(b[i]) + 1.0;
      ASSERT_NEAR(got[i], want, 1e-6 * (1 + std::fabs(want))) << what << " at " << i;
    }
  };
  for (int round = 0; round < 2; ++round) {
    expect(add(mul(add(x, 0.5), x), 1.0).to_vector<float>(), xv, xv, "x * x first");
    expect(add(mul(add(x, 0.5), y), 1.0).to_vector<float>(), xv, yv, "then x * y");
    expect(add(mul(add(y, 0.5), x), 1.0).to_vector<float>(), yv, xv, "y * x");
    expect(add(mul(add(y, 0.5), y), 1.0).to_vector<float>(), yv, yv, "y * y");
  }
}

// An input that is a strided view of a computed buffer: the same program, the new strides.
TEST_P(LoweringReuseTest, AViewInputBringsItsOwnStrides) {
  std::vector<float> av = ramp(12 * 8, 0.1, -4.0), bv = ramp(8 * 12, -0.07, 3.0);
  Array a = values(av, {12, 8});
  Array at = transpose(values(bv, {12, 8}), 0, 1);  // [8, 12], strides (1, 8)
  Array b = values(bv, {8, 12});                    // [8, 12], contiguous
  eval({at});
  for (int round = 0; round < 2; ++round) {
    std::vector<float> r1 = add(mul(exp(b), 2.0), 1.0).to_vector<float>();
    std::vector<float> r2 = add(mul(exp(at), 2.0), 1.0).to_vector<float>();
    std::vector<float> r3 = add(mul(exp(transpose(a, 0, 1)), 2.0), 1.0).to_vector<float>();
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 12; ++j) {
        const size_t o = size_t(i * 12 + j);
        ASSERT_NEAR(r1[o], std::exp(double(bv[o])) * 2 + 1, 1e-4 * std::fabs(r1[o]));
        ASSERT_NEAR(r2[o], std::exp(double(bv[size_t(j * 8 + i)])) * 2 + 1, 1e-4 * std::fabs(r2[o]));
        ASSERT_NEAR(r3[o], std::exp(double(av[size_t(j * 8 + i)])) * 2 + 1, 1e-4 * std::fabs(r3[o]));
      }
  }
}

// A random op's seed is a launch argument: a reused program draws the new seed's numbers, and the
// first seed's numbers again when it comes back.
TEST_P(LoweringReuseTest, RandomOpsDrawTheirOwnSeedsNumbers) {
  Array x = values(ramp(4096, 0.0, 0.0), {4096});  // zeros
  auto draw = [&](uint64_t seed) {
    return add(uniform({4096}, 0, 1, {.seed = seed, .device = d}), x).to_vector<float>();
  };
  std::vector<float> a = draw(11);
  const int64_t before = reuses();
  std::vector<float> b = draw(12);
  std::vector<float> a2 = draw(11);
  EXPECT_GE(reuses(), before + 2);
  EXPECT_EQ(a, a2);
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i] == b[i];
  EXPECT_LT(same, 8u) << "seed 12 drew seed 11's numbers";
  // Against the same draw without fusion (each op its own kernel, nothing reused).
  set_fusion_enabled(false);
  std::vector<float> b_unfused = draw(12);
  set_fusion_enabled(true);
  EXPECT_EQ(b, b_unfused);
}

// A random op draws by its elements' indices in its own layout, wherever its output is placed:
// computed straight into its slab of a cat (an offset into a larger buffer), fused or alone, it
// draws what it draws by itself. (Alone, the kernel once counted from the slab's offset.)
TEST_P(LoweringReuseTest, RandomOpsComputedIntoACatSlabDrawTheirOwnNumbers) {
  for (bool fused : {true, false}) {
    set_fusion_enabled(fused);
    const std::vector<float> alone = uniform({1000}, 0, 1, {.seed = 5, .device = d}).to_vector<float>();
    const std::vector<float> both =
        cat({uniform({1000}, 0, 1, {.seed = 7, .device = d}), uniform({1000}, 0, 1, {.seed = 5, .device = d})}, 0)
            .to_vector<float>();
    set_fusion_enabled(true);
    ASSERT_EQ(both.size(), 2000u);
    EXPECT_EQ(std::vector<float>(both.begin() + 1000, both.end()), alone) << (fused ? "fused" : "unfused");
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, LoweringReuseTest, ::testing::ValuesIn(testing::test_devices()),
                         testing::device_test_name);

}  // namespace
}  // namespace ember
