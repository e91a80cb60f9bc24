// gather, index_select (including out-of-range indices, reported when the values are read) and
// matmul (batch broadcasting, 1-D operands, transposed operands, K = 0, integer and f64).
#include <cmath>

#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

class OpIndexing : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

TEST_P(OpIndexing, Gather) {
  Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  // dim 1: out[i][j] = x[i][idx[i][j]]
  Array g1 = gather(x, 1, i64({2, 0, 1, 1, 0, 2}, {2, 3}, dev));
  EXPECT_TRUE(same_shape(g1, {2, 3}));
  EXPECT_TRUE(same(g1, {3, 1, 2, 5, 4, 6}));
  // dim 0: out[i][j] = x[idx[i][j]][j]; the index may be smaller than x in other dims.
  Array g0 = gather(x, 0, i32({1, 0, 1}, {1, 3}, dev));
  EXPECT_TRUE(same_shape(g0, {1, 3}));
  EXPECT_TRUE(same(g0, {4, 2, 6}));
  EXPECT_TRUE(same(gather(x, -1, i64({0, 0, 0, 2}, {2, 2}, dev)), {1, 1, 4, 6}));
  // More indices than the dim's size along dim (repeats are fine).
  EXPECT_TRUE(same(gather(x, 1, i64({0, 0, 0, 0, 2, 2, 2, 2}, {2, 4}, dev)), {1, 1, 1, 1, 6, 6, 6, 6}));
  // Non-contiguous source and index; integer source dtype is kept.
  Array xt = transpose(x, 0, 1);  // [3,2]: 1 4 / 2 5 / 3 6
  Array it = transpose(i64({1, 0, 0, 1, 1, 0}, {2, 3}, dev), 0, 1);  // [3,2]: 1 1 / 0 1 / 0 0
  EXPECT_TRUE(same(gather(xt, 1, it), {4, 4, 2, 5, 3, 3}));
  Array xi = i32({10, 20, 30}, {3}, dev);
  Array gi = gather(xi, 0, make({2, 2, 0}, {3}, DType::U8, dev));
  EXPECT_EQ(gi.dtype(), DType::I32);
  EXPECT_TRUE(same(gi, {30, 30, 10}));
  // Empty index -> empty result.
  EXPECT_TRUE(same_shape(gather(x, 1, i64({}, {2, 0}, dev)), {2, 0}));
  // 3-D
  Array c = f32(iota_d(24), {2, 3, 4}, dev);
  Array gc = gather(c, 1, i64({2, 0, 1, 2, 1, 1, 0, 0}, {2, 1, 4}, dev));
  EXPECT_TRUE(same(gc, {8, 1, 6, 11, 16, 17, 14, 15}));
}

TEST_P(OpIndexing, IndexSelect) {
  Array x = f32(iota_d(12), {3, 4}, dev);
  Array r = index_select(x, 0, i64({2, 0, 2}, {3}, dev));
  EXPECT_TRUE(same_shape(r, {3, 4}));
  EXPECT_TRUE(same(r, {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Array c = index_select(x, 1, i32({3, 1}, {2}, dev));
  EXPECT_TRUE(same_shape(c, {3, 2}));
  EXPECT_TRUE(same(c, {3, 1, 7, 5, 11, 9}));
  EXPECT_TRUE(same(index_select(x, -1, i64({0}, {1}, dev)), {0, 4, 8}));
  EXPECT_TRUE(same_shape(index_select(x, 0, i64({}, {0}, dev)), {0, 4}));
  // Non-contiguous source and index.
  Array xt = transpose(x, 0, 1);  // [4,3]
  Array idx = slice(i64({2, 9, 0, 9, 3}, {5}, dev), 0, 0, 5, 2);  // 2 0 3
  EXPECT_TRUE(same(index_select(xt, 0, idx), {2, 6, 10, 0, 4, 8, 3, 7, 11}));
  // Every dtype of the source.
  for (DType t : all_dtypes()) {
    Array s = make({1, 0, 1, 1}, {4}, t, dev);
    Array o = index_select(s, 0, i64({1, 3}, {2}, dev));
    EXPECT_EQ(o.dtype(), t);
    EXPECT_TRUE(same(o, {0, 1})) << dtype_name(t);
  }
  // Long index crossing tiles.
  const int64_t n = 1025;
  std::vector<double> iv(static_cast<size_t>(n)), want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) iv[size_t(i)] = double((i * 37) % 300), want[size_t(i)] = iv[size_t(i)] * 2;
  Array src = f32(map_d(iota_d(300), [](double v) { return 2 * v; }), {300}, dev);
  EXPECT_TRUE(same(index_select(src, 0, i64(iv, {n}, dev)), want));
}

TEST_P(OpIndexing, OutOfRangeIndicesFailAtRead) {
  Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  // The index values are data: the error surfaces when the result is read, naming the op,
  // the offending value and the size it exceeds.
  Array g = gather(x, 1, i64({0, 3, 1, 1, 0, 2}, {2, 3}, dev));
  EMBER_EXPECT_ERROR(g.to_vector<float>(), "gather", "out of range", "3", "indexing_matmul_test.cpp:");
  Array n = gather(x, 1, i64({0, 0, -1, 0, 0, 0}, {2, 3}, dev));
  EMBER_EXPECT_ERROR(vals(n), "gather", "-1");
  Array s = index_select(x, 0, i32({0, 2}, {2}, dev));
  EMBER_EXPECT_ERROR(vals(s), "index_select", "out of range", "2");
  Array s2 = index_select(x, 1, i64({-4}, {1}, dev));
  EMBER_EXPECT_ERROR(s2.str(), "index_select", "-4");
  // An op consuming the bad result reports the failing op too.
  EMBER_EXPECT_ERROR(vals(add(index_select(x, 0, i64({5}, {1}, dev)), 1)), "index_select", "5");
  // Later work is unaffected.
  EXPECT_TRUE(same(index_select(x, 0, i64({1}, {1}, dev)), {4, 5, 6}));
}

// The scatters compare each index with each target position: an index out of range matched no
// position and its value vanished (the gradient of a bad gather or embedding was silently
// missing a row). Now it is an error naming the value, and valid scatters keep every bit
// (including -0 and NaN in the values).
TEST_P(OpIndexing, ScatterIndicesOutOfRangeFail) {
  Array z = f32({0, 0, 0, 0, 0, 0, 0, 0}, {4, 2}, dev);
  EMBER_EXPECT_ERROR(vals(index_add(z, 0, i64({1, 9}, {2}, dev), f32({1, 1, 1, 1}, {2, 2}, dev))), "out of range",
                     "9", "size 4");
  EMBER_EXPECT_ERROR(vals(index_add(z, 0, i64({-1}, {1}, dev), f32({1, 1}, {1, 2}, dev))), "out of range", "-1");
  EMBER_EXPECT_ERROR(vals(scatter_add(z, 0, i64({1, 4}, {2, 1}, dev), f32({1, 1}, {2, 1}, dev))), "out of range", "4");
  // Rows (-0, 1), (NaN, 2), (5, 6) added at 3, 0, 3.
  std::vector<double> v = vals(index_add(z, 0, i64({3, 0, 3}, {3}, dev), f32({-0.0f, 1, NAN, 2, 5, 6}, {3, 2}, dev)));
  ASSERT_EQ(v.size(), 8u);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 2.0);
  EXPECT_EQ(v[6], 5.0);
  EXPECT_EQ(v[7], 7.0);
  for (int i : {2, 3, 4, 5}) EXPECT_EQ(v[size_t(i)], 0.0);
}

TEST_P(OpIndexing, Errors) {
  Array x = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev);
  EMBER_EXPECT_ERROR(gather(x, 1, f32({0}, {1, 1}, dev)), "gather", "integer", "float32");
  EMBER_EXPECT_ERROR(gather(x, 1, i64({0}, {1}, dev)), "gather", "rank 1", "rank 2");
  EMBER_EXPECT_ERROR(gather(x, 2, i64({0}, {1, 1}, dev)), "gather", "dim 2");
  EMBER_EXPECT_ERROR(gather(x, 1, i64({0, 0, 0}, {3, 1}, dev)), "gather", "[3, 1]", "[2, 3]");
  EMBER_EXPECT_ERROR(index_select(x, 0, i64({0, 1}, {1, 2}, dev)), "index_select", "1-D", "[1, 2]");
  EMBER_EXPECT_ERROR(index_select(x, 0, make({1}, {1}, DType::Bool, dev)), "index_select", "integer", "bool");
  EMBER_EXPECT_ERROR(index_select(x, -3, i64({0}, {1}, dev)), "index_select", "dim -3");
  EMBER_EXPECT_ERROR(index_select(f32({1}, {}, dev), 0, i64({0}, {1}, dev)), "index_select", "at least one dim");
}

// ---- matmul -----------------------------------------------------------------------------------
// Row-major batched matmul on the host: a [B, M, K] x b [B, K, N].
std::vector<double> host_mm(const std::vector<double>& a, const std::vector<double>& b, int64_t B, int64_t M,
                            int64_t K, int64_t N) {
  std::vector<double> c(size_t(B * M * N), 0.0);
  for (int64_t t = 0; t < B; ++t)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[size_t((t * M + i) * K + k)] * b[size_t((t * K + k) * N + j)];
        c[size_t((t * M + i) * N + j)] = s;
      }
  return c;
}

class OpMatmul : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

TEST_P(OpMatmul, TwoDimensional) {
  Array a = f32({1, 2, 3, 4, 5, 6}, {2, 3}, dev), b = f32({7, 8, 9, 10, 11, 12}, {3, 2}, dev);
  Array c = matmul(a, b);
  EXPECT_TRUE(same_shape(c, {2, 2}));
  EXPECT_TRUE(same(c, {58, 64, 139, 154}));
  // Random values, f32 and f64, against a double host product.
  std::vector<double> x = rand_f32(5 * 7, -1, 1, 21), y = rand_f32(7 * 3, -1, 1, 22);
  std::vector<double> want = host_mm(x, y, 1, 5, 7, 3);
  EXPECT_TRUE(all_close(matmul(f32(x, {5, 7}, dev), f32(y, {7, 3}, dev)), want, 1e-5, 1e-6));
  EXPECT_TRUE(all_close(matmul(f64(x, {5, 7}, dev), f64(y, {7, 3}, dev)), want, 1e-13, 1e-14));
  EXPECT_EQ(matmul(f64(x, {5, 7}, dev), f64(y, {7, 3}, dev)).dtype(), DType::F64);
}

TEST_P(OpMatmul, BatchBroadcasting) {
  // [2,1,3,4] x [5,4,2] -> [2,5,3,2]
  std::vector<double> x = rand_int(2 * 3 * 4, -3, 3, 31), y = rand_int(5 * 4 * 2, -3, 3, 32);
  Array c = matmul(f32(x, {2, 1, 3, 4}, dev), f32(y, {5, 4, 2}, dev));
  EXPECT_TRUE(same_shape(c, {2, 5, 3, 2}));
  std::vector<double> want;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 5; ++q) {
      std::vector<double> xa(x.begin() + p * 12, x.begin() + (p + 1) * 12), yb(y.begin() + q * 8, y.begin() + (q + 1) * 8);
      std::vector<double> r = host_mm(xa, yb, 1, 3, 4, 2);
      want.insert(want.end(), r.begin(), r.end());
    }
  EXPECT_TRUE(same(c, want));
  // A 2-D operand broadcasts against a batch.
  Array d = matmul(f32(x, {2, 3, 4}, dev), f32(std::vector<double>(y.begin(), y.begin() + 8), {4, 2}, dev));
  std::vector<double> wd;
  for (int p = 0; p < 2; ++p) {
    std::vector<double> xa(x.begin() + p * 12, x.begin() + (p + 1) * 12), yb(y.begin(), y.begin() + 8);
    std::vector<double> r = host_mm(xa, yb, 1, 3, 4, 2);
    wd.insert(wd.end(), r.begin(), r.end());
  }
  EXPECT_TRUE(same_shape(d, {2, 3, 2}));
  EXPECT_TRUE(same(d, wd));
}

TEST_P(OpMatmul, OneDimensionalOperands) {
  Array v = f32({1, 2, 3}, {3}, dev), m = f32({1, 2, 3, 4, 5, 6}, {3, 2}, dev);
  Array vm = matmul(v, m);  // [3] x [3,2] -> [2]
  EXPECT_TRUE(same_shape(vm, {2}));
  EXPECT_TRUE(same(vm, {22, 28}));
  Array mv = matmul(transpose(m, 0, 1), v);  // [2,3] x [3] -> [2]
  EXPECT_TRUE(same_shape(mv, {2}));
  EXPECT_TRUE(same(mv, {22, 28}));
  Array dot = matmul(v, v);  // [3] x [3] -> []
  EXPECT_EQ(dot.rank(), 0);
  EXPECT_EQ(dot.item<float>(), 14.0f);
  Array bv = matmul(f32(iota_d(12), {2, 2, 3}, dev), v);  // batched matrix x vector -> [2,2]
  EXPECT_TRUE(same_shape(bv, {2, 2}));
  EXPECT_TRUE(same(bv, {8, 26, 44, 62}));
  Array vb = matmul(f32({1, 1}, {2}, dev), f32(iota_d(12), {2, 2, 3}, dev));  // -> [2,3]
  EXPECT_TRUE(same_shape(vb, {2, 3}));
  EXPECT_TRUE(same(vb, {3, 5, 7, 15, 17, 19}));
}

TEST_P(OpMatmul, NonContiguousOperands) {
  std::vector<double> x = rand_int(4 * 6, -5, 5, 41), y = rand_int(6 * 5, -5, 5, 42);
  std::vector<double> want = host_mm(x, y, 1, 4, 6, 5);
  Array a = f32(x, {4, 6}, dev), b = f32(y, {6, 5}, dev);
  Array at = transpose(contiguous(transpose(a, 0, 1)), 0, 1);  // a's values, column-major layout
  Array bt = transpose(contiguous(transpose(b, 0, 1)), 0, 1);
  EXPECT_TRUE(same(matmul(at, b), want));
  EXPECT_TRUE(same(matmul(a, bt), want));
  EXPECT_TRUE(same(matmul(at, bt), want));
  // Stepped slices and expanded operands.
  Array wide = f32(iota_d(4 * 12), {4, 12}, dev);
  Array sl = slice(wide, 1, 0, 12, 2);  // [4,6], columns 0,2,..,10
  std::vector<double> xs;
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 6; ++k) xs.push_back(i * 12 + 2 * k);
  EXPECT_TRUE(same(matmul(sl, b), host_mm(xs, y, 1, 4, 6, 5)));
  Array ex = expand(f32({1, 2, 3, 4, 5, 6}, {1, 6}, dev), {3, 6});
  std::vector<double> xe;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 6; ++k) xe.push_back(k + 1);
  EXPECT_TRUE(same(matmul(ex, b), host_mm(xe, y, 1, 3, 6, 5)));
  // A batch of transposed matrices.
  Array batch = permute(f32(iota_d(24), {2, 4, 3}, dev), {0, 2, 1});  // [2,3,4]
  std::vector<double> xb;
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 4; ++k) xb.push_back(t * 12 + k * 3 + i);
  std::vector<double> yb = rand_int(4 * 2, -2, 2, 43);
  std::vector<double> yb2 = yb;
  yb2.insert(yb2.end(), yb.begin(), yb.end());
  EXPECT_TRUE(same(matmul(batch, f32(yb, {4, 2}, dev)), host_mm(xb, yb2, 2, 3, 4, 2)));
}

TEST_P(OpMatmul, EmptyAndZeroK) {
  // K = 0: the sum over nothing is 0.
  Array z = matmul(zeros({3, 0}, {.device = dev}), zeros({0, 2}, {.device = dev}));
  EXPECT_TRUE(same_shape(z, {3, 2}));
  EXPECT_TRUE(same(z, std::vector<double>(6, 0.0)));
  EXPECT_TRUE(same(matmul(zeros({0}, {.device = dev}), zeros({0}, {.device = dev})), {0}));
  EXPECT_TRUE(same(matmul(zeros({2, 0}, {.dtype = DType::I32, .device = dev}), zeros({0, 2}, {.dtype = DType::I32, .device = dev})), {0, 0, 0, 0}));
  // M = 0 or N = 0: empty results.
  EXPECT_TRUE(same_shape(matmul(zeros({0, 3}, {.device = dev}), zeros({3, 2}, {.device = dev})), {0, 2}));
  EXPECT_TRUE(same_shape(matmul(zeros({2, 3}, {.device = dev}), zeros({3, 0}, {.device = dev})), {2, 0}));
  EXPECT_TRUE(same_shape(matmul(zeros({0, 2, 3}, {.device = dev}), zeros({3, 4}, {.device = dev})), {0, 2, 4}));
}

TEST_P(OpMatmul, IntegerAndOtherDtypes) {
  Array a = i32({1, -2, 3, 4, 5, -6}, {2, 3}, dev), b = i32({7, 8, 9, 10, 11, 12}, {3, 2}, dev);
  Array c = matmul(a, b);
  EXPECT_EQ(c.dtype(), DType::I32);
  EXPECT_TRUE(same(c, {22, 24, 7, 10}));
  Array l = matmul(from_vector(std::vector<int64_t>{int64_t(1) << 40, 1}, {1, 2}, dev),
                   from_vector(std::vector<int64_t>{4, 3}, {2, 1}, dev));
  EXPECT_EQ(l.dtype(), DType::I64);
  EXPECT_EQ(l.to_vector<int64_t>(), std::vector<int64_t>{(int64_t(1) << 42) + 3});
  EXPECT_TRUE(same(matmul(make({1, 2, 3, 4}, {2, 2}, DType::U8, dev), make({5, 6, 7, 8}, {2, 2}, DType::U8, dev)),
                   {19, 22, 43, 50}));
  for (DType t : {DType::F16, DType::BF16}) {
    Array h = matmul(make({1, 2, 3, 4}, {2, 2}, t, dev), make({0.5, 1, 1.5, 2}, {2, 2}, t, dev));
    EXPECT_EQ(h.dtype(), t);
    EXPECT_TRUE(same(h, {3.5, 5, 7.5, 11})) << dtype_name(t);
  }
  // Mixed dtypes promote first: i32 x f32 -> f32.
  Array m = matmul(i32({1, 2}, {1, 2}, dev), f32({0.5, 0.25}, {2, 1}, dev));
  EXPECT_EQ(m.dtype(), DType::F32);
  EXPECT_TRUE(same(m, {1}));
}

// Sizes past typical blocking factors (odd, prime, > 64), small-integer values: exact in f32.
TEST_P(OpMatmul, SizesAcrossBlocking) {
  const int64_t M = 67, K = 129, N = 33;
  std::vector<double> x = rand_int(M * K, -3, 3, 51), y = rand_int(K * N, -3, 3, 52);
  EXPECT_TRUE(same(matmul(f32(x, {M, K}, dev), f32(y, {K, N}, dev)), host_mm(x, y, 1, M, K, N)));
  EXPECT_TRUE(same(matmul(i64(x, {M, K}, dev), i64(y, {K, N}, dev)), host_mm(x, y, 1, M, K, N)));
}

TEST_P(OpMatmul, Errors) {
  Array a = f32(iota_d(6), {2, 3}, dev);
  EMBER_EXPECT_ERROR(matmul(a, f32(iota_d(20), {4, 5}, dev)), "matmul", "[2, 3]", "[4, 5]", "indexing_matmul_test.cpp:");
  EMBER_EXPECT_ERROR(matmul(f32({1}, {}, dev), a), "matmul", "at least one dim");
  EMBER_EXPECT_ERROR(matmul(f32(iota_d(4), {4}, dev), a), "matmul", "[4]", "[2, 3]");
  EMBER_EXPECT_ERROR(matmul(f32(iota_d(24), {2, 4, 3}, dev), f32(iota_d(27), {3, 3, 3}, dev)), "matmul", "[2, 4, 3]",
                     "[3, 3, 3]");
}

EMBER_OP_SUITE(OpIndexing);
EMBER_OP_SUITE(OpMatmul);

}  // namespace
}  // namespace ember::testing
