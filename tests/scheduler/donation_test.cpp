// Buffer donation (src/scheduler/donation.cpp, run_fused in lower_fused.cpp): a fused kernel
// writes an output into the buffer of an input that dies with it. Checked: the buffer is reused
// when nothing else holds the input, and never when something does (a user handle, a value
// saved for backward, a view of the same buffer, another consumer) or when the kernel reads
// the input at other points than it writes (a transpose, a flip, a broadcast). Values come from
// formulas evaluated in double.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/tier1_harness.h"
#include "ember/ember.h"
#include "graph/node.h"
#include "test_util.h"

namespace ember {
namespace {

const DeviceBuffer* buffer_of(const Array& a) { return a.node()->view.buffer.get(); }

std::vector<float> iota_values(size_t n, double scale, double shift) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(double(i) * scale + shift);
  return v;
}

class DonationTest : public ::testing::TestWithParam<Device> {
 protected:
  Device d = GetParam();
  void SetUp() override { synchronize(); }
  int64_t donated() {
    synchronize();
    return execution_stats().buffers_donated;
  }
};

// The common loop `x = f(x)`: each step writes into the previous step's buffer.
TEST_P(DonationTest, LoopUpdatesReuseTheDyingBuffer) {
  std::vector<float> xv = iota_values(1000, 0.01, -5);
  Array x = from_vector<float>(xv, {10, 100}, d);
  const DeviceBuffer* first = buffer_of(x);
  reset_execution_stats();
  for (int step = 0; step < 5; ++step) {
    x = add(mul(x, 0.5), 1.0);
    x.eval();
    synchronize();
    EXPECT_EQ(buffer_of(x), first) << "step " << step;
  }
  EXPECT_EQ(donated(), 5);
  std::vector<float> got = x.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {
    double v = xv[i];
    for (int s = 0; s < 5; ++s) v = v * 0.5 + 1;
    ASSERT_NEAR(got[i], v, 1e-5) << i;
  }
}

// An input the caller still holds keeps its values and its buffer.
TEST_P(DonationTest, HeldInputsAreNotOverwritten) {
  std::vector<float> xv = iota_values(256, 0.5, -3);
  Array x = from_vector<float>(xv, {256}, d);
  reset_execution_stats();
  Array y = mul(x, 3.0).eval();
  EXPECT_EQ(donated(), 0);
  EXPECT_NE(buffer_of(y), buffer_of(x));
  EXPECT_EQ(x.to_vector<float>(), xv);
  std::vector<float> got = y.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(got[i], float(double(xv[i]) * 3));
}

// Read at other points than written: a transpose, a flip and a broadcast row. Writing in place
// would read values the kernel already overwrote.
TEST_P(DonationTest, InputsReadElsewhereAreNotDonated) {
  const int64_t n = 64;
  std::vector<float> mv = iota_values(size_t(n * n), 1, 0);
  Array row = from_vector<float>(iota_values(size_t(n), 1, 0), {1, n}, d);
  synchronize();
  reset_execution_stats();
  // Each operand is a temporary or dropped: when the result is evaluated, only the kernel
  // references it.
  Array t = add(permute(from_vector<float>(mv, {n, n}, d), {1, 0}), 0.0);
  t.eval();
  Array s = from_vector<float>(mv, {n, n}, d);
  s = add(s, permute(s, {1, 0}));  // read in place and transposed
  s.eval();
  EXPECT_EQ(donated(), 0);
  // Read only where written: the broadcast row is too small, the [n, n] operand is donated.
  Array b = add(expand(row, {n, n}), from_vector<float>(mv, {n, n}, d));
  b.eval();
  EXPECT_EQ(donated(), 1);
  // A flip gathers (index_select) into a fresh buffer, which the multiply then updates in place.
  Array f = mul(flip(from_vector<float>(mv, {n * n}, d), {0}), 2.0);
  f.eval();
  EXPECT_EQ(donated(), 2);
  std::vector<float> tv = t.to_vector<float>(), sv = s.to_vector<float>(), bv = b.to_vector<float>(),
                     fv = f.to_vector<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(tv[size_t(i * n + j)], mv[size_t(j * n + i)]);
      ASSERT_EQ(sv[size_t(i * n + j)], mv[size_t(i * n + j)] + mv[size_t(j * n + i)]);
      ASSERT_EQ(bv[size_t(i * n + j)], float(j) + mv[size_t(i * n + j)]);
    }
  for (int64_t i = 0; i < n * n; ++i) ASSERT_EQ(fv[size_t(i)], 2 * mv[size_t(n * n - 1 - i)]);
}

// A value saved for backward must survive the forward kernel that consumes it.
TEST_P(DonationTest, ValuesSavedForBackwardAreKept) {
  std::vector<float> xv = iota_values(100, 0.05, -2.5);
  Array x = from_vector<float>(xv, {100}, d).require_grad();
  Array h = mul(x, 2.0).eval();  // realized, then only held by the graph below
  Array y = sum(mul(exp(h), h));  // d/dh (e^h h) = e^h (1 + h)
  Gradients g = y.backward();
  std::vector<float> gx = x.grad(g).to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {
    double hv = 2.0 * double(xv[i]);
    ASSERT_NEAR(gx[i], 2.0 * std::exp(hv) * (1 + hv), 1e-4 * (1 + std::fabs(gx[i]))) << i;
  }
}

// A view of the buffer (a reshape of the same memory) holds it too.
TEST_P(DonationTest, BuffersSharedWithViewsAreKept) {
  std::vector<float> xv = iota_values(120, 1, 0);
  Array base = from_vector<float>(xv, {120}, d);
  Array view = reshape(base, {10, 12}).eval();  // shares base's buffer
  reset_execution_stats();
  Array y = add(reshape(base, {10, 12}), 1.0);
  base = Array();  // the node dies, the buffer lives on in `view`
  y.eval();
  EXPECT_EQ(donated(), 0);
  EXPECT_EQ(view.to_vector<float>(), xv);
  std::vector<float> got = y.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_EQ(got[i], xv[i] + 1);
}

// Two consumers in one realization: the first may not take the buffer the second still reads.
TEST_P(DonationTest, AnInputWithTwoConsumersIsKeptForTheSecond) {
  std::vector<float> xv = iota_values(500, 0.01, 1);
  Array x = from_vector<float>(xv, {500}, d);
  Array a = exp(x);
  Array s = sum(x);  // a reduction: a kernel of its own
  x = Array();
  reset_execution_stats();
  eval({a, s});
  EXPECT_EQ(donated(), 0);
  double want = 0;
  for (float v : xv) want += v;
  EXPECT_NEAR(s.item<float>(), want, 1e-3);
  std::vector<float> got = a.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_NEAR(got[i], std::exp(double(xv[i])), 1e-5 * std::exp(double(xv[i])));
}

// Adam's moment estimates are updated in place (the parameters' arena is not: the model's
// parameters are views of it). Adam's trajectory with donation on is checked against the
// reference formulas in tests/optim.
TEST_P(DonationTest, AdamUpdatesItsMomentsInPlace) {
  nn::Linear lin(nn::LinearOptions{.in = 4, .out = 3, .seed = 5, .device = d});
  optim::Adam opt(lin, optim::AdamOptions{.lr = 0.1});
  Array x = uniform({8, 4}, -1, 1, {.seed = 6, .device = d}).eval();
  auto step = [&] {
    Array y = lin.forward(x);
    Gradients g = sum(mul(y, y)).backward();
    opt.step(g);
  };
  step();  // creates the state
  synchronize();
  reset_execution_stats();
  step();
  EXPECT_GE(donated(), 2);  // m and v
}

// The same loop with every kernel compiled (tier 1): in-place loads and stores in SIMD loops.
TEST(DonationTier1Test, CompiledKernelsUpdateInPlace) {
  if (!testing::compiler_present()) GTEST_SKIP() << "no C++ compiler on PATH";
  testing::Tier1Scope scope(1);
  std::vector<float> xv = iota_values(100003, 0.001, -50);
  Array x = from_vector<float>(xv, {100003}, Device::cpu());
  Array other = from_vector<float>(iota_values(100003, -0.002, 7), {100003}, Device::cpu());
  const DeviceBuffer* first = buffer_of(x);
  synchronize();
  reset_execution_stats();
  for (int step = 0; step < 3; ++step) {
    x = add(mul(x, other), tanh(x));  // the old x is now referenced by the graph only
    x.eval();
    // (An input still queued, held by its own work item, cannot be donated: wait for it.)
    synchronize();
  }
  synchronize();
  EXPECT_EQ(execution_stats().buffers_donated, 3);
  EXPECT_EQ(buffer_of(x), first);
  std::vector<float> got = x.to_vector<float>();
  std::vector<float> ov = other.to_vector<float>();
  for (size_t i = 0; i < xv.size(); i += 7) {
    double v = xv[i];
    for (int s = 0; s < 3; ++s) v = double(float(double(float(v * double(ov[i]))) + double(float(std::tanh(v)))));
    ASSERT_NEAR(got[i], v, 1e-5 * (1 + std::fabs(v))) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, DonationTest, ::testing::ValuesIn(testing::test_devices()),
                         testing::device_test_name);

}  // namespace
}  // namespace ember
