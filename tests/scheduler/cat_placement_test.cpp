// Cat inputs computed in the cat's buffer (place_cat_inputs, src/scheduler/realize.cpp): inputs that
// the same realization computes (a matmul, a fused kernel, seen through a reshape) are written
// straight into their slab and the cat copies only the others. Values equal the formulas and the
// reference backend; inputs held by the caller keep their values; cats whose slabs are not
// contiguous, repeated inputs and inputs computed earlier are copied as before.
#include <gtest/gtest.h>

#include "ember/ember.h"
#include "test_util.h"

namespace ember {
namespace {

using ember::testing::all_close;

class CatPlacementTest : public ::testing::TestWithParam<Device> {
 protected:
  Device d = GetParam();
  Array x = uniform({8, 5}, -1, 1, {.seed = 1, .device = d}).eval();
  Array w = uniform({5, 3}, -1, 1, {.seed = 2, .device = d}).eval();
  Array y = uniform({4, 6}, -1, 1, {.seed = 3, .device = d}).eval();
  Array z = uniform({7}, -1, 1, {.seed = 4, .device = d}).eval();  // computed earlier: copied
};

// The optimizer's pattern: flat concatenation of freshly computed tensors.
TEST_P(CatPlacementTest, FreshInputsAreComputedInTheirSlab) {
  Array a = matmul(x, w);  // library call
  Array b = exp(y);        // fused kernel
  Array c = cat({reshape(a, {24}), reshape(b, {24}), z}, 0);
  synchronize();
  reset_execution_stats();
  c.eval();
  synchronize();
  const ExecutionStats s = execution_stats();
  // exp + the copy of z; matmul's and exp's results land in the cat's buffer (3 kernels before).
  EXPECT_EQ(s.kernels, 2);
  EXPECT_EQ(s.library_calls, 1);
  std::vector<double> want = matmul(cast(x, DType::F64), cast(w, DType::F64)).to_vector<double>();
  for (double v : cast(exp(cast(y, DType::F64)), DType::F64).to_vector<double>()) want.push_back(v);
  for (double v : z.to_vector<double>()) want.push_back(v);
  EXPECT_TRUE(all_close(c, want, 1e-6, 1e-6));
  // The inputs the caller still holds read back their own values.
  EXPECT_TRUE(all_close(a, std::vector<double>(want.begin(), want.begin() + 24), 1e-6, 1e-6));
  EXPECT_TRUE(all_close(b, std::vector<double>(want.begin() + 24, want.begin() + 48), 1e-6, 1e-6));
}

// Views between the producer and the cat: a transpose transposed back is still the contiguous
// result (placed: only z is copied); a single transpose is not (its reshape copies, values right).
TEST_P(CatPlacementTest, ViewsThatKeepTheLayoutArePlaced) {
  Array a = matmul(x, w);  // [8, 3]
  Array back = cat({reshape(transpose(transpose(a, 0, 1), 0, 1), {24}), z}, 0);
  synchronize();
  reset_execution_stats();
  back.eval();
  synchronize();
  EXPECT_EQ(execution_stats().kernels, 1);
  EXPECT_EQ(execution_stats().library_calls, 1);
  std::vector<double> av = matmul(cast(x, DType::F64), cast(w, DType::F64)).to_vector<double>();
  std::vector<double> want = av;
  for (double v : z.to_vector<double>()) want.push_back(v);
  EXPECT_TRUE(all_close(back, want, 1e-6, 1e-6));
  Array once = cat({reshape(transpose(matmul(x, w), 0, 1), {24}), z}, 0);
  std::vector<double> want_once;
  for (int j = 0; j < 3; ++j)
    for (int i = 0; i < 8; ++i) want_once.push_back(av[size_t(i * 3 + j)]);
  for (double v : z.to_vector<double>()) want_once.push_back(v);
  EXPECT_TRUE(all_close(once, want_once, 1e-6, 1e-6));
}

TEST_P(CatPlacementTest, RepeatedInputsAndStridedSlabsAreCopied) {
  Array b = tanh(y);
  Array twice = cat({b, b}, 0);             // the second occurrence is copied from the first slab
  Array cols = cat({exp(y), tanh(y)}, 1);   // slabs along dim 1 of [4, 12] are not contiguous
  std::vector<double> yv = y.to_vector<double>();
  std::vector<double> want_twice, want_cols;
  for (int rep = 0; rep < 2; ++rep)
    for (double v : yv) want_twice.push_back(std::tanh(v));
  for (int r = 0; r < 4; ++r) {
    for (int j = 0; j < 6; ++j) want_cols.push_back(std::exp(yv[size_t(r * 6 + j)]));
    for (int j = 0; j < 6; ++j) want_cols.push_back(std::tanh(yv[size_t(r * 6 + j)]));
  }
  EXPECT_TRUE(all_close(twice, want_twice, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(cols, want_cols, 1e-6, 1e-6));
  EXPECT_TRUE(all_close(b, std::vector<double>(want_twice.begin(), want_twice.begin() + 24), 1e-6, 1e-6));
}

// A training step's flat gradient (the optimizer concatenates every gradient): the same
// parameters as with the reference backend after three SGD steps.
TEST_P(CatPlacementTest, OptimizerStepsMatchTheReferenceBackend) {
  auto train = [](Device dev) {
    nn::Sequential m(nn::Linear({.in = 5, .out = 4, .seed = 7, .dtype = DType::F64, .device = dev}), nn::Tanh(),
                     nn::Linear({.in = 4, .out = 2, .seed = 8, .dtype = DType::F64, .device = dev}));
    optim::Adam opt(m, {.lr = 0.05});
    Array in = cast(uniform({6, 5}, -1, 1, {.seed = 9, .device = dev}), DType::F64);
    Array target = cast(uniform({6, 2}, -1, 1, {.seed = 10, .device = dev}), DType::F64);
    for (int step = 0; step < 3; ++step) opt.step(nn::mse_loss(m.forward(in), target).backward());
    std::vector<double> all;
    for (auto& np : m.named_parameters())
      for (double v : np.param.array().to_vector<double>()) all.push_back(v);
    return all;
  };
  std::vector<double> got = train(d), want = train(Device::reference());
  EXPECT_TRUE(all_close(got, want, 1e-12, 1e-12));
}

INSTANTIATE_TEST_SUITE_P(Devices, CatPlacementTest, ::testing::ValuesIn(ember::testing::test_devices()),
                         ember::testing::device_test_name);

}  // namespace
}  // namespace ember
