// Creation (like-constructors, linspace, eye, one_hot, bernoulli, randint, randperm), reductions
// (any, all, var, std, max/min with indices), movement (movedim, narrow, select, flip, roll,
// stack, split, chunk, repeat, tile, pad, tril, triu), indexing (scatter, slice/select assign,
// take, gather_nd, scatter_nd, masked_select, nonzero) and the matmul family (dot, outer, mv,
// bmm) on every device. Expected values are hand-computed or computed here in double precision.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "ember/tensor.h"
#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class OpBreadth : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

// ---- creation ----------------------------------------------------------------------------------
TEST_P(OpBreadth, LikeConstructors) {
  Array x = i32(iota_d(6), {2, 3}, dev);
  Array z = zeros_like(x), o = ones_like(x, DType::F64), f = full_like(x, 7);
  EXPECT_EQ(z.dtype(), DType::I32);
  EXPECT_EQ(o.dtype(), DType::F64);
  EXPECT_TRUE(same_shape(f, {2, 3}));
  EXPECT_TRUE(same(z, std::vector<double>(6, 0)));
  EXPECT_TRUE(same(o, std::vector<double>(6, 1)));
  EXPECT_TRUE(same(f, std::vector<double>(6, 7)));
  EXPECT_EQ(z.device(), dev);
  EXPECT_TRUE(same_shape(zeros_like(f32({1}, {}, dev)), {}));
  EXPECT_TRUE(same_shape(ones_like(zeros({0, 2}, {DType::F32, dev})), {0, 2}));
}

TEST_P(OpBreadth, Linspace) {
  std::vector<double> w;
  for (int i = 0; i < 5; ++i) w.push_back(-1 + i * 0.5);
  EXPECT_TRUE(all_close(linspace(-1, 1, 5, {DType::F64, dev}), w, 0, 1e-15));
  // Both ends exact, also where start + (n-1) * step would round.
  std::vector<double> v = vals(linspace(0.1, 0.7, 7, {DType::F64, dev}));
  EXPECT_EQ(v.front(), 0.1);
  EXPECT_EQ(v.back(), 0.7);
  for (int i = 0; i < 7; ++i) EXPECT_NEAR(v[size_t(i)], 0.1 + i * 0.1, 1e-15);
  EXPECT_TRUE(same(linspace(3, 3, 1, {DType::F32, dev}), {3}));
  EXPECT_TRUE(same_shape(linspace(0, 1, 0, {DType::F32, dev}), {0}));
  EXPECT_TRUE(same(linspace(0, 10, 4, {DType::I64, dev}), {0, 3, 6, 10}));  // 3.33 truncates
  EXPECT_TRUE(all_close(linspace(0, 1, 3, {DType::F16, dev}), {0, 0.5, 1}, 0, 0));
  EMBER_EXPECT_ERROR(linspace(0, 1, -2), "linspace", "-2", "breadth_test.cpp");
}

TEST_P(OpBreadth, EyeAndOneHot) {
  EXPECT_TRUE(same(eye(3, std::nullopt, {DType::F32, dev}), {1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_TRUE(same(eye(2, 3, {DType::I32, dev}), {1, 0, 0, 0, 1, 0}));
  EXPECT_TRUE(same_shape(eye(0, 2, {DType::F32, dev}), {0, 2}));
  Array idx = i64({2, 0, 1, 2}, {2, 2}, dev);
  Array oh = one_hot(idx, 3);
  EXPECT_EQ(oh.dtype(), DType::I64);
  EXPECT_TRUE(same_shape(oh, {2, 2, 3}));
  EXPECT_TRUE(same(oh, {0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_TRUE(same(one_hot(i32({1}, {}, dev), 2, DType::F32), {0, 1}));
  EMBER_EXPECT_ERROR(one_hot(f32({1}, {1}, dev), 3), "one_hot", "integer", "float32");
  EMBER_EXPECT_ERROR(one_hot(idx, 0), "one_hot", "num_classes", "0");
  EMBER_EXPECT_ERROR(one_hot(i64({3}, {1}, dev), 3).to_vector<double>(), "3");  // out of range, at read
}

TEST_P(OpBreadth, RandomIntegersAndBernoulli) {
  // randint: floor(low + (high - low) u) of the f64 uniforms of the seed.
  std::vector<double> u = vals(uniform({1000}, 0, 1, {.seed = 5, .dtype = DType::F64, .device = dev}));
  Array r = randint(-3, 4, {1000}, {.seed = 5, .device = dev});
  EXPECT_EQ(r.dtype(), DType::I64);
  EXPECT_TRUE(same(r, map_d(u, [](double a) { return std::floor(a * 7) - 3; })));
  std::set<int64_t> seen;
  for (int64_t v : ivals(r)) seen.insert(v);
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_EQ(*seen.begin(), -3);
  EXPECT_EQ(*seen.rbegin(), 3);
  // Same seed, same values; another seed, other values.
  EXPECT_EQ(ivals(randint(0, 100, {50}, {.seed = 9, .device = dev})), ivals(randint(0, 100, {50}, {.seed = 9, .device = dev})));
  EXPECT_NE(ivals(randint(0, 100, {50}, {.seed = 9, .device = dev})), ivals(randint(0, 100, {50}, {.seed = 10, .device = dev})));
  EMBER_EXPECT_ERROR(randint(3, 3, {2}), "randint", "low 3", "high 3");
  // bernoulli(p): uniform (f32 stream of the seed) < p, in p's dtype.
  Array p = f32({0, 1, 0.5, 0.25}, {4}, dev);
  std::vector<double> pv = {0, 1, 0.5, 0.25};
  Array p_big = expand(reshape(p, {1, 4}), {250, 4});
  std::vector<double> uf = vals(uniform({250, 4}, 0, 1, {.seed = 3, .dtype = DType::F32, .device = dev}));
  Array bern = bernoulli(p_big, 3);
  EXPECT_EQ(bern.dtype(), DType::F32);
  std::vector<double> want(1000);
  for (size_t i = 0; i < 1000; ++i) want[i] = uf[i] < pv[i % 4] ? 1 : 0;
  EXPECT_TRUE(same(bern, want));
  std::vector<double> b = vals(bernoulli({4000}, 0.3, {.seed = 1, .dtype = DType::Bool, .device = dev}));
  double mean = std::accumulate(b.begin(), b.end(), 0.0) / 4000;
  EXPECT_NEAR(mean, 0.3, 0.03);
  EMBER_EXPECT_ERROR(bernoulli({2}, 1.5), "bernoulli", "1.5");
  EMBER_EXPECT_ERROR(bernoulli(i32({1}, {1}, dev)), "bernoulli", "floating", "int32");
}

TEST_P(OpBreadth, Randperm) {
  for (int64_t n : {0, 1, 2, 10, 1000}) {
    std::vector<int64_t> p = ivals(randperm(n, {.seed = 4, .device = dev}));
    std::vector<int64_t> s = p;
    std::sort(s.begin(), s.end());
    std::vector<int64_t> want(static_cast<size_t>(n));
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(s, want);
  }
  // The shuffle: Fisher-Yates driven by the f64 uniforms of the seed (computed here on the host).
  std::vector<double> u = vals(uniform({10}, 0, 1, {.seed = 4, .dtype = DType::F64, .device = dev}));
  std::vector<int64_t> want(10);
  std::iota(want.begin(), want.end(), 0);
  for (int64_t i = 9; i > 0; --i) std::swap(want[size_t(i)], want[size_t(std::min<int64_t>(int64_t(u[size_t(i)] * double(i + 1)), i))]);
  EXPECT_EQ(ivals(randperm(10, {.seed = 4, .device = dev})), want);
  EMBER_EXPECT_ERROR(randperm(-1), "randperm", "-1");
}

// ---- reductions --------------------------------------------------------------------------------
TEST_P(OpBreadth, AnyAll) {
  Array x = f32({0, 1, 0, 0, 0, 0, kNaN, 2, 3}, {3, 3}, dev);
  EXPECT_TRUE(same(any(x), {1}));
  EXPECT_TRUE(same(all(x), {0}));
  EXPECT_TRUE(same(any(x, {1}), {1, 0, 1}));
  EXPECT_TRUE(same(all(x, {1}), {0, 0, 1}));
  EXPECT_TRUE(same(all(x, {0}, true), {0, 0, 0}));
  EXPECT_TRUE(same_shape(all(x, {0}, true), {1, 3}));
  EXPECT_EQ(any(x).dtype(), DType::Bool);
  Array e = zeros({0, 2}, {DType::I32, dev});
  EXPECT_TRUE(same(any(e), {0}));
  EXPECT_TRUE(same(all(e), {1}));
  EXPECT_TRUE(same(all(e, {0}), {1, 1}));
  EXPECT_TRUE(same(any(make({0, 1}, {2}, DType::Bool, dev)), {1}));
  EXPECT_TRUE(same(all(i64({5}, {}, dev)), {1}));
}

TEST_P(OpBreadth, VarStd) {
  std::vector<double> v = rand_d(24, -3, 3, 11);
  Array x = f64(v, {2, 3, 4}, dev);
  // Over dims {0, 2} with corrections 0 and 1, computed here.
  for (int64_t corr : {0, 1, 2}) {
    std::vector<double> want;
    for (int j = 0; j < 3; ++j) {
      double m = 0;
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 4; ++k) m += v[size_t(i * 12 + j * 4 + k)];
      m /= 8;
      double ss = 0;
      for (int i = 0; i < 2; ++i)
        for (int k = 0; k < 4; ++k) ss += std::pow(v[size_t(i * 12 + j * 4 + k)] - m, 2);
      want.push_back(ss / double(8 - corr));
    }
    EXPECT_TRUE(all_close(var(x, {0, 2}, corr), want, 1e-13, 0));
    EXPECT_TRUE(all_close(std(x, {0, 2}, corr), map_d(want, [](double a) { return std::sqrt(a); }), 1e-13, 0));
  }
  EXPECT_TRUE(same_shape(var(x, {1}, 1, true), {2, 1, 4}));
  EXPECT_TRUE(all_close(var(f32({1, 2, 3, 4}, {4}, dev)), {5.0 / 3}, 1e-6, 0));
  EXPECT_TRUE(same(var(f32({1}, {1}, dev)), {kNaN}));  // n - correction = 0: 0/0
  EXPECT_TRUE(all_close(std(cast(f32({1, 3}, {2}, dev), DType::BF16), {}, 0), {1}, 0, 0));
  EMBER_EXPECT_ERROR(var(i32({1, 2}, {2}, dev)), "var", "floating", "int32");
  EMBER_EXPECT_ERROR(var(x, {0}, -1), "var", "correction", "-1");
  EMBER_EXPECT_ERROR(std(x, {3}), "3", "rank 3");
}

TEST_P(OpBreadth, MaxMinWithIndices) {
  Array x = f32({3, 7, 7, 1, -2, 5, 0, -2}, {2, 4}, dev);
  ValuesIndices m = max_with_indices(x, 1);
  EXPECT_TRUE(same(m.values, {7, 5}));
  EXPECT_TRUE(same(m.indices, {1, 1}));
  EXPECT_EQ(m.indices.dtype(), DType::I64);
  ValuesIndices n = min_with_indices(x, 1, true);
  EXPECT_TRUE(same_shape(n.values, {2, 1}));
  EXPECT_TRUE(same(n.values, {1, -2}));
  EXPECT_TRUE(same(n.indices, {3, 0}));
  ValuesIndices c = max_with_indices(x, 0);
  EXPECT_TRUE(same(c.values, {3, 7, 7, 1}));
  EXPECT_TRUE(same(c.indices, {0, 0, 0, 0}));
  Array i = i64({4, 9, 9}, {3}, dev);
  EXPECT_TRUE(same(max_with_indices(i, 0).indices, {1}));
  EXPECT_TRUE(same(max_with_indices(f32({1, kNaN, 3}, {3}, dev), 0).values, {kNaN}));
  EMBER_EXPECT_ERROR(max_with_indices(zeros({2, 0}), 1), "max_with_indices", "zero elements", "[2, 0]");
}

// ---- movement ----------------------------------------------------------------------------------
TEST_P(OpBreadth, MovedimNarrowSelect) {
  Array x = f32(iota_d(24), {2, 3, 4}, dev);
  Array m = movedim(x, 2, 0);
  EXPECT_TRUE(same_shape(m, {4, 2, 3}));
  EXPECT_TRUE(same(slice(m, 0, 1, 2), {1, 5, 9, 13, 17, 21}));
  EXPECT_TRUE(same_shape(movedim(x, 0, -1), {3, 4, 2}));
  EXPECT_TRUE(same_shape(swap_dims(x, 0, 2), {4, 3, 2}));
  EXPECT_TRUE(same(narrow(x, 2, 1, 2), {1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22}));
  EXPECT_TRUE(same(select(x, 1, -1), {8, 9, 10, 11, 20, 21, 22, 23}));
  EXPECT_TRUE(same_shape(select(x, 0, 1), {3, 4}));
  EMBER_EXPECT_ERROR(narrow(x, 2, 3, 2), "narrow", "start 3", "length 2", "size 4");
  EMBER_EXPECT_ERROR(select(x, 0, 2), "select", "index 2", "size 2");
}

TEST_P(OpBreadth, FlipRoll) {
  Array x = i32(iota_d(6), {2, 3}, dev);
  EXPECT_TRUE(same(flip(x, {1}), {2, 1, 0, 5, 4, 3}));
  EXPECT_TRUE(same(flip(x, {0, 1}), {5, 4, 3, 2, 1, 0}));
  EXPECT_TRUE(same(flip(transpose(x, 0, 1), {0}), {2, 5, 1, 4, 0, 3}));  // non-contiguous input
  EXPECT_TRUE(same(flip(f32({4}, {}, dev), {}), {4}));
  EXPECT_TRUE(same(roll(x, 1, 1), {2, 0, 1, 5, 3, 4}));
  EXPECT_TRUE(same(roll(x, -4, 1), {1, 2, 0, 4, 5, 3}));
  EXPECT_TRUE(same(roll(x, 3, 0), {3, 4, 5, 0, 1, 2}));
  EXPECT_TRUE(same_shape(roll(zeros({0, 2}), 3, 0), {0, 2}));
  EMBER_EXPECT_ERROR(flip(x, {1, -1}), "flip", "more than once");
}

TEST_P(OpBreadth, StackSplitChunk) {
  Array a = f32({1, 2, 3}, {3}, dev), b = f32({4, 5, 6}, {3}, dev);
  EXPECT_TRUE(same(stack({a, b}), {1, 2, 3, 4, 5, 6}));
  Array s = stack({a, b}, 1);
  EXPECT_TRUE(same_shape(s, {3, 2}));
  EXPECT_TRUE(same(s, {1, 4, 2, 5, 3, 6}));
  EXPECT_TRUE(same_shape(stack({f32({1}, {}, dev), f32({2}, {}, dev)}), {2}));
  EMBER_EXPECT_ERROR(stack({a, f32({1, 2}, {2}, dev)}), "stack", "[2]", "[3]");
  Array x = i64(iota_d(10), {10}, dev);
  std::vector<Array> p = split(x, 4);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_TRUE(same(p[2], {8, 9}));
  std::vector<Array> q = split(x, std::vector<int64_t>{1, 0, 9});
  ASSERT_EQ(q.size(), 3u);
  EXPECT_TRUE(same_shape(q[1], {0}));
  EXPECT_TRUE(same(q[0], {0}));
  std::vector<Array> c = chunk(x, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_TRUE(same(c[0], {0, 1, 2, 3}));
  EXPECT_TRUE(same(c[2], {8, 9}));
  EXPECT_EQ(chunk(i64(iota_d(2), {2}, dev), 5).size(), 2u);
  EMBER_EXPECT_ERROR(split(x, std::vector<int64_t>{3, 3}), "split", "6", "10");
  EMBER_EXPECT_ERROR(chunk(x, 0), "chunk", "0");
}

TEST_P(OpBreadth, RepeatTile) {
  Array x = f32({1, 2, 3, 4}, {2, 2}, dev);
  Array r = repeat(x, {2, 1, 2});
  EXPECT_TRUE(same_shape(r, {2, 2, 4}));
  EXPECT_TRUE(same(r, {1, 2, 1, 2, 3, 4, 3, 4, 1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(same(tile(x, {2}), {1, 2, 1, 2, 3, 4, 3, 4}));
  EXPECT_TRUE(same_shape(repeat(x, {0, 3}), {0, 6}));
  EXPECT_TRUE(same(repeat(f32({5}, {}, dev), {3}), {5, 5, 5}));
  EXPECT_TRUE(same(repeat(transpose(x, 0, 1), {1, 2}), {1, 3, 1, 3, 2, 4, 2, 4}));
  EMBER_EXPECT_ERROR(repeat(x, {2}), "repeat", "1 repeats", "rank 2");
}

TEST_P(OpBreadth, Pad) {
  Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  EXPECT_TRUE(same(pad(x, {1, 2}), {0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0}));
  EXPECT_TRUE(same(pad(x, {0, 0, 1, 0}, PadMode::Constant, -1), {-1, -1, -1, 1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(same(pad(x, {-1, 1}), {2, 3, 0, 5, 6, 0}));
  EXPECT_TRUE(same(pad(x, {2, 2}, PadMode::Reflect), {3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4}));
  EXPECT_TRUE(same(pad(x, {1, 2}, PadMode::Replicate), {1, 1, 2, 3, 3, 3, 4, 4, 5, 6, 6, 6}));
  EXPECT_TRUE(same(pad(x, {0, 0, 1, 1}, PadMode::Replicate), {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_TRUE(same(pad(i32({7}, {1}, dev), {1, 1}, PadMode::Constant, 9), {9, 7, 9}));
  EMBER_EXPECT_ERROR(pad(x, {3, 0}, PadMode::Reflect), "pad", "reflect", "size 3");
  EMBER_EXPECT_ERROR(pad(x, {1}), "pad", "pairs");
  EMBER_EXPECT_ERROR(pad(x, {-2, -2}), "pad", "remove");
}

TEST_P(OpBreadth, TrilTriu) {
  Array x = f32(iota_d(12, 1), {3, 4}, dev);
  EXPECT_TRUE(same(tril(x), {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}));
  EXPECT_TRUE(same(triu(x), {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  EXPECT_TRUE(same(tril(x, 1), {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}));
  EXPECT_TRUE(same(triu(x, -1), {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}));
  Array b = expand(reshape(make({1, 1, 1, 1}, {2, 2}, DType::Bool, dev), {1, 2, 2}), {2, 2, 2});
  EXPECT_TRUE(same(triu(b, 1), {0, 1, 0, 0, 0, 1, 0, 0}));
  EMBER_EXPECT_ERROR(tril(f32({1, 2}, {2}, dev)), "tril", "2 dims", "[2]");
}

// ---- indexing ----------------------------------------------------------------------------------
TEST_P(OpBreadth, ScatterLastIndexWins) {
  Array x = f32(std::vector<double>(8, -1), {2, 4}, dev);
  Array idx = i64({1, 3, 1, 0, 0, 2}, {2, 3}, dev);
  Array src = f32({10, 20, 30, 40, 50, 60}, {2, 3}, dev);
  // Row 0: positions 1 <- 10 then 30 (last wins), 3 <- 20. Row 1: 0 <- 40 then 50, 2 <- 60.
  EXPECT_TRUE(same(scatter(x, 1, idx, src), {-1, 30, -1, 20, 50, -1, 60, -1}));
  EXPECT_TRUE(same(scatter(x, 1, idx, 5.0), {-1, 5, -1, 5, 5, -1, 5, -1}));
  Array b = make({0, 0, 0, 0}, {2, 2}, DType::Bool, dev);
  EXPECT_TRUE(same(scatter(b, 0, i64({1, 0}, {1, 2}, dev), make({1, 1}, {1, 2}, DType::Bool, dev)), {0, 1, 1, 0}));
  Array ii = i32(iota_d(4), {4}, dev);
  EXPECT_TRUE(same(scatter(ii, 0, i64({3, 3, 3}, {3}, dev), i32({7, 8, 9}, {3}, dev)), {0, 1, 2, 9}));
  EMBER_EXPECT_ERROR(scatter(x, 1, idx, f32({1}, {1, 1}, dev)), "scatter", "[2, 3]", "[1, 1]");
  EMBER_EXPECT_ERROR(scatter(x, 1, i64({4}, {1, 1}, dev), f32({1}, {1, 1}, dev)).to_vector<double>(), "4");
}

TEST_P(OpBreadth, SliceAndSelectAssign) {
  Array x = f32(iota_d(12), {3, 4}, dev);
  EXPECT_TRUE(same(slice_assign(x, 1, 0, 4, 2, f32({-1, -2, -3}, {3, 1}, dev)),
                   {-1, 1, -1, 3, -2, 5, -2, 7, -3, 9, -3, 11}));
  EXPECT_TRUE(same(slice_assign(x, 0, 1, 3, f32({0}, {}, dev)), {0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(same(slice_assign(x, 0, 5, 9, f32({7}, {}, dev)), iota_d(12)));  // empty region
  EXPECT_TRUE(same(select_assign(x, 1, -1, f32({9, 8, 7}, {3}, dev)), {0, 1, 2, 9, 4, 5, 6, 8, 8, 9, 10, 7}));
  EXPECT_TRUE(same(select_assign(i64(iota_d(4), {2, 2}, dev), 0, 0, i64({5}, {}, dev)), {5, 5, 2, 3}));
  EMBER_EXPECT_ERROR(slice_assign(x, 1, 0, 2, f32({1, 2, 3}, {3}, dev)), "slice_assign", "[3]", "[3, 2]");
  EMBER_EXPECT_ERROR(select_assign(x, 0, 3, f32({1}, {}, dev)), "select_assign", "index 3");
}

TEST_P(OpBreadth, TakeGatherNdScatterNd) {
  Array x = f32(iota_d(12), {3, 4}, dev);
  EXPECT_TRUE(same(take(x, i64({0, 11, -1, 5}, {2, 2}, dev)), {0, 11, 11, 5}));
  EXPECT_TRUE(same_shape(take(x, i64({2}, {}, dev)), {}));
  EXPECT_TRUE(same(take(transpose(x, 0, 1), i32({1, 3}, {2}, dev)), {4, 1}));
  EMBER_EXPECT_ERROR(take(x, i64({12}, {1}, dev)).to_vector<double>(), "12");
  Array ind = i64({2, 1, 0, 3, -1, 0}, {3, 2}, dev);
  EXPECT_TRUE(same(gather_nd(x, ind), {9, 3, 8}));
  Array rows = gather_nd(x, i64({2, 0}, {2, 1}, dev));
  EXPECT_TRUE(same_shape(rows, {2, 4}));
  EXPECT_TRUE(same(rows, {8, 9, 10, 11, 0, 1, 2, 3}));
  EMBER_EXPECT_ERROR(gather_nd(x, i64({0, 0, 0}, {1, 3}, dev)), "gather_nd", "3 dims", "rank 2");
  EMBER_EXPECT_ERROR(gather_nd(x, i64({0, 4}, {1, 2}, dev)).to_vector<double>(), "-1");  // column 4 of 4
  Array upd = f32({-1, -2, -3}, {3}, dev);
  EXPECT_TRUE(same(scatter_nd(x, i64({0, 0, 2, 3, 0, 0}, {3, 2}, dev), upd),
                   {-3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -2}));  // (0, 0) twice: last wins
  Array srow = scatter_nd(x, i64({1}, {1, 1}, dev), f32({7, 7, 7, 7}, {1, 4}, dev));
  EXPECT_TRUE(same(srow, {0, 1, 2, 3, 7, 7, 7, 7, 8, 9, 10, 11}));
  EMBER_EXPECT_ERROR(scatter_nd(x, i64({0, 0}, {1, 2}, dev), upd), "scatter_nd", "[3]", "[1]");
}

TEST_P(OpBreadth, MaskedSelectNonzero) {
  Array x = f32(iota_d(6), {2, 3}, dev);
  Array m = make({1, 0, 1}, {3}, DType::Bool, dev);
  EXPECT_TRUE(same(masked_select(x, m), {0, 2, 3, 5}));
  EXPECT_TRUE(same_shape(masked_select(x, make({0}, {1}, DType::Bool, dev)), {0}));
  EXPECT_TRUE(same(masked_select(transpose(x, 0, 1), gt(transpose(x, 0, 1), 2.0)), {3, 4, 5}));
  EMBER_EXPECT_ERROR(masked_select(x, f32({1}, {1}, dev)), "masked_select", "bool");
  Array nz = nonzero(f32({0, 3, 0, kNaN, 0, -1}, {2, 3}, dev));
  EXPECT_EQ(nz.dtype(), DType::I64);
  EXPECT_TRUE(same_shape(nz, {3, 2}));
  EXPECT_TRUE(same(nz, {0, 1, 1, 0, 1, 2}));
  EXPECT_TRUE(same_shape(argwhere(i32({0, 0}, {2}, dev)), {0, 1}));
  EXPECT_TRUE(same_shape(nonzero(i32({4}, {}, dev)), {1, 0}));
}

TEST_P(OpBreadth, MatmulFamily) {
  Array a = f32({1, 2, 3}, {3}, dev), b = f32({4, 5, 6}, {3}, dev);
  Array d = dot(a, b);
  EXPECT_TRUE(same_shape(d, {}));
  EXPECT_TRUE(same(d, {32}));
  EXPECT_TRUE(same(outer(a, f32({1, -1}, {2}, dev)), {1, -1, 2, -2, 3, -3}));
  EXPECT_TRUE(same(outer(i32({2}, {1}, dev), i32({3, 4}, {2}, dev)), {6, 8}));
  Array m = f32(iota_d(6), {2, 3}, dev);
  EXPECT_TRUE(same(mv(m, a), {8, 26}));
  Array p = f32(iota_d(12), {2, 2, 3}, dev), q = f32(iota_d(6), {2, 3, 1}, dev);
  EXPECT_TRUE(same(bmm(p, q), {5, 14, 86, 122}));
  EMBER_EXPECT_ERROR(dot(a, f32({1, 2}, {2}, dev)), "dot", "[3]", "[2]");
  EMBER_EXPECT_ERROR(outer(m, a), "outer", "1-D", "[2, 3]");
  EMBER_EXPECT_ERROR(mv(m, f32({1, 2}, {2}, dev)), "mv", "[2, 3]", "[2]");
  EMBER_EXPECT_ERROR(bmm(p, f32(iota_d(6), {1, 3, 2}, dev)), "bmm", "[2, 2, 3]", "[1, 3, 2]");
}

// The typed facade: rank rules at compile time (stack and one_hot add a dim, select_index and
// masked_select remove or flatten, dot gives rank 0).
TEST_P(OpBreadth, TypedFacade) {
  auto a = Tensor<1>::from_data({1.0, 2.0, 3.0}, {.device = dev});
  auto b = Tensor<1>::from_data({4.0, 5.0, 6.0}, {.device = dev});
  Tensor<2> s = Tensor<1>::stack({a, b}, 0);
  EXPECT_TRUE(same(s.array(), {1, 2, 3, 4, 5, 6}));
  Tensor<0> d = a.dot(b);
  EXPECT_TRUE(same(d.array(), {32}));
  Tensor<1> row = s.select_index(0, 1);
  EXPECT_TRUE(same(row.array(), {4, 5, 6}));
  auto [v, i] = s.max_dim_with_indices(1);
  EXPECT_TRUE(same(v.array(), {3, 6}));
  EXPECT_TRUE(same(i.array(), {2, 2}));
  EXPECT_TRUE(same(s.tril().array(), {1, 0, 0, 4, 5, 0}));
  EXPECT_TRUE(all_close(s.var_dim(1).array(), {1, 1}, 1e-6, 0));
  EXPECT_TRUE(same(s.masked_select(s.greater(2.5)).array(), {3, 4, 5, 6}));
  EXPECT_TRUE(same(s.pad({1, 0}).array(), {0, 1, 2, 3, 0, 4, 5, 6}));
  EXPECT_TRUE(same(s.repeat({1, 2}).array(), {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(s.chunk(2, 1).size(), 2u);
  auto idx = Tensor<1, Int>::from_data({2, 0}, {.device = dev});
  Tensor<2, Int> oh = idx.one_hot(3);
  EXPECT_TRUE(same(oh.array(), {0, 0, 1, 1, 0, 0}));
  EXPECT_TRUE(same(idx.shift_left(2).bitwise_or(Tensor<1, Int>::from_data({1, 1}, {.device = dev})).array(), {9, 1}));
  EXPECT_TRUE(all_close(a.atan2(b).array(), {std::atan2(1, 4), std::atan2(2, 5), std::atan2(3, 6)}, 1e-6, 0));
  EXPECT_TRUE(all_close(silu(a).array(), map_d({1, 2, 3}, [](double x) { return x / (1 + std::exp(-x)); }), 1e-6, 0));
  EXPECT_TRUE(same(Tensor<2>::eye(2, {.device = dev}).array(), {1, 0, 0, 1}));
  auto perm = Tensor<1, Int>::randperm(5, {.seed = 1, .device = dev});
  EXPECT_EQ(perm.sum().item<int64_t>(), 10);
}

EMBER_OP_SUITE(OpBreadth);

}  // namespace
}  // namespace ember::testing
