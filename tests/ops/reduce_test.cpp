// Reductions: sum, mean, prod, max, min, argmax, argmin over one or several dims, keepdim,
// all dims; dtypes, empty inputs, rank 0, NaN, non-contiguous inputs and long rows/columns.
#include <cmath>
#include <limits>

#include "ops/op_test_util.h"

namespace ember::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Reduces a row-major host tensor over `dims` (empty = all) with (init, combine); returns the
// values in the order of the kept dims. argmax/argmin use the index variant below.
std::vector<double> host_reduce(const std::vector<double>& x, const std::vector<int64_t>& shape,
                                std::vector<int> dims, double init,
                                const std::function<double(double, double)>& combine) {
  int r = int(shape.size());
  std::vector<bool> red(size_t(r), dims.empty());
  for (int d : dims) red[size_t(d < 0 ? d + r : d)] = true;
  std::vector<int64_t> out_shape;
  for (int d = 0; d < r; ++d)
    if (!red[size_t(d)]) out_shape.push_back(shape[size_t(d)]);
  int64_t out_n = 1;
  for (int64_t s : out_shape) out_n *= s;
  std::vector<double> out(size_t(out_n), init);
  std::vector<int64_t> idx(size_t(r), 0);
  for (size_t lin = 0; lin < x.size(); ++lin) {
    int64_t rem = int64_t(lin);
    for (int d = r - 1; d >= 0; --d) idx[size_t(d)] = rem % shape[size_t(d)], rem /= shape[size_t(d)];
    int64_t o = 0;
    for (int d = 0; d < r; ++d)
      if (!red[size_t(d)]) o = o * shape[size_t(d)] + idx[size_t(d)];
    out[size_t(o)] = combine(out[size_t(o)], x[lin]);
  }
  return out;
}

// Index of the first max (or min) along `dim`, as a double.
std::vector<double> host_argext(const std::vector<double>& x, const std::vector<int64_t>& shape, int dim, bool is_max) {
  int r = int(shape.size());
  int64_t outer = 1, inner = 1, n = shape[size_t(dim)];
  for (int d = 0; d < dim; ++d) outer *= shape[size_t(d)];
  for (int d = dim + 1; d < r; ++d) inner *= shape[size_t(d)];
  std::vector<double> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 0; k < n; ++k) {
        double v = x[size_t((o * n + k) * inner + i)], b = x[size_t((o * n + best) * inner + i)];
        if (std::isnan(b)) break;
        if (std::isnan(v) || (is_max ? v > b : v < b)) best = k;
      }
      out.push_back(double(best));
    }
  return out;
}

Shape reduced_shape(const std::vector<int64_t>& shape, std::vector<int> dims, bool keepdim) {
  int r = int(shape.size());
  std::vector<bool> red(size_t(r), dims.empty());
  for (int d : dims) red[size_t(d < 0 ? d + r : d)] = true;
  std::vector<int64_t> out;
  for (int d = 0; d < r; ++d) {
    if (!red[size_t(d)]) out.push_back(shape[size_t(d)]);
    else if (keepdim) out.push_back(1);
  }
  return Shape(out);
}

class OpReduce : public ::testing::TestWithParam<Device> {
 protected:
  Device dev = GetParam();
};

TEST_P(OpReduce, AllReductionsOverDimSets) {
  const std::vector<int64_t> shape = {2, 3, 4};
  // Small integers (some repeated): every partial sum/product is exact in f32 and f64.
  std::vector<double> x = rand_int(24, -4, 4, 3);
  x[5] = 0;
  const std::vector<std::vector<int>> dim_sets = {{0}, {1}, {2}, {-1}, {0, 2}, {2, 0}, {1, 2}, {0, 1, 2}, {}};
  for (DType t : {DType::F32, DType::F64}) {
    Array a = make(x, Shape(shape), t, dev);
    for (const auto& dims : dim_sets)
      for (bool keep : {false, true}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " dims=" << ::testing::PrintToString(dims) << " keepdim=" << keep);
        Shape want_shape = reduced_shape(shape, dims, keep);
        Array s = sum(a, dims, keep), m = mean(a, dims, keep), p = prod(a, dims, keep);
        Array mx = max(a, dims, keep), mn = min(a, dims, keep);
        EXPECT_TRUE(same_shape(s, want_shape));
        EXPECT_TRUE(same_shape(mx, want_shape));
        EXPECT_EQ(s.dtype(), t);
        std::vector<double> ws = host_reduce(x, shape, dims, 0, std::plus<>());
        EXPECT_TRUE(same(s, ws));
        double count = double(24 / std::max<int64_t>(1, int64_t(ws.size())));
        EXPECT_TRUE(all_close(m, map_d(ws, [&](double v) { return v / count; }), rtol_for(t), 0));
        EXPECT_TRUE(same(p, host_reduce(x, shape, dims, 1, std::multiplies<>())));
        EXPECT_TRUE(same(mx, host_reduce(x, shape, dims, -1e300, [](double u, double v) { return std::max(u, v); })));
        EXPECT_TRUE(same(mn, host_reduce(x, shape, dims, 1e300, [](double u, double v) { return std::min(u, v); })));
      }
    for (int d : {0, 1, 2, -1})
      for (bool keep : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "arg dim=" << d << " keepdim=" << keep);
        int w = d < 0 ? d + 3 : d;
        Array am = argmax(a, d, keep), an = argmin(a, d, keep);
        EXPECT_EQ(am.dtype(), DType::I64);
        EXPECT_TRUE(same_shape(am, reduced_shape(shape, {w}, keep)));
        EXPECT_TRUE(same(am, host_argext(x, shape, w, true)));
        EXPECT_TRUE(same(an, host_argext(x, shape, w, false)));
      }
  }
}

TEST_P(OpReduce, IntegerAndBoolDtypes) {
  std::vector<double> x = {3, 0, 200, 7, 255, 1};
  for (DType t : {DType::I32, DType::I64, DType::U8}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array a = make(x, {2, 3}, t, dev);
    Array s = sum(a, {1});
    EXPECT_EQ(s.dtype(), DType::I64);  // integers accumulate in i64: no u8 wrap
    EXPECT_TRUE(same(s, {203, 263}));
    EXPECT_TRUE(same(sum(a), {466}));
    EXPECT_EQ(prod(a, {0}).dtype(), DType::I64);
    EXPECT_TRUE(same(prod(a, {0}), {21, 0, 200}));
    EXPECT_EQ(max(a, {1}).dtype(), t);
    EXPECT_TRUE(same(max(a, {1}), {200, 255}));
    EXPECT_TRUE(same(min(a, {0}, true), {3, 0, 1}));
    EXPECT_TRUE(same(argmax(a, 1), {2, 1}));
    EXPECT_TRUE(same(argmin(a, 0), {0, 0, 1}));
  }
  // i32 sums beyond the i32 range, and i64 wrap-around.
  Array big = i32({2147483647, 2147483647}, {2}, dev);
  EXPECT_EQ(sum(big).item<int64_t>(), 4294967294LL);
  EXPECT_EQ(prod(i32({65536, 65536}, {2}, dev)).item<int64_t>(), int64_t(1) << 32);
  Array over = from_vector(std::vector<int64_t>{INT64_MAX, 1}, {2}, dev);
  EXPECT_EQ(sum(over).item<int64_t>(), INT64_MIN);
  // bool: sum counts the true values; max/min are any/all.
  Array b = make({1, 0, 1, 1, 0, 0}, {2, 3}, DType::Bool, dev);
  EXPECT_TRUE(same(sum(b, {1}), {2, 1}));
  EXPECT_EQ(max(b, {1}).dtype(), DType::Bool);
  EXPECT_TRUE(same(max(b, {1}), {1, 1}));
  EXPECT_TRUE(same(min(b, {1}), {0, 0}));
  EXPECT_TRUE(same(argmax(b, 1), {0, 0}));
  EXPECT_TRUE(same(argmin(b, 1), {1, 1}));
  // Negative integers in max/min/argmax.
  Array n = i64({-5, -3, -9, -3}, {4}, dev);
  EXPECT_TRUE(same(max(n), {-3}));
  EXPECT_TRUE(same(min(n), {-9}));
  EXPECT_TRUE(same(argmax(n, 0), {1}));  // the first of equal maxima
}

TEST_P(OpReduce, SixteenBitFloats) {
  for (DType t : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    Array a = make({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, t, dev);
    Array s = sum(a, {1});
    EXPECT_EQ(s.dtype(), t);
    EXPECT_TRUE(same(s, {10, 26}));
    EXPECT_TRUE(same(mean(a, {0}), {3, 4, 5, 6}));
    EXPECT_TRUE(same(prod(a, {1}), {24, 1680}));
    EXPECT_TRUE(same(max(a), {8}));
    EXPECT_TRUE(same(argmin(a, 1), {0, 0}));
  }
}

// f16/bf16 sums accumulate in f32 and round once, on every device, fused or not (PyTorch's CPU
// rule): rounding at every step would stall 2048 + 1 + 1 + 1 + 1 at 2048 in f16 (Vulkan did). And
// a sum consumed inside its kernel is the rounded one: 1 + 2^-10 + 2^-11 in f16 is exactly halfway
// between 1 + 2^-10 and 1 + 2^-9 (the even one wins; in bf16, 1 + 2^-7 + 2^-8), which a cast to
// f32 fused after the sum must see, as it sees the stored sum (the CPU and reference kernels once
// passed on the unrounded f32 value).
TEST_P(OpReduce, SixteenBitSumsAccumulateInF32AndRoundOnce) {
  struct Case {
    DType dtype;
    double big, tiny1, tiny2, halfway_rounded;
  };
  for (const Case& c : {Case{DType::F16, 2048, std::ldexp(1.0, -10), std::ldexp(1.0, -11), 1 + std::ldexp(1.0, -9)},
                        Case{DType::BF16, 256, std::ldexp(1.0, -7), std::ldexp(1.0, -8), 1 + std::ldexp(1.0, -6)}}) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)));
    const Array stall = make({c.big, 1, 1, 1, 1}, {1, 5}, c.dtype, dev);
    EXPECT_TRUE(same(sum(stall, {1}), {c.big + 4})) << "sum rounded at every step";
    EXPECT_TRUE(same(sum(mul(stall, 1.0), {1}), {c.big + 4})) << "fused with its operand";
    const Array halfway = make({1, c.tiny1, c.tiny2}, {1, 3}, c.dtype, dev);
    EXPECT_TRUE(same(cast(sum(halfway, {1}), DType::F32), {c.halfway_rounded})) << "the sum's consumer in its kernel";
    EXPECT_TRUE(same(sum(halfway, {1}), {c.halfway_rounded})) << "stored";
  }
}

TEST_P(OpReduce, EmptyInputs) {
  Array e = f32({}, {0}, dev);
  EXPECT_TRUE(same(sum(e), {0}));
  EXPECT_EQ(sum(e).rank(), 0);
  EXPECT_TRUE(same(prod(e), {1}));
  EXPECT_TRUE(same(mean(e), {kNaN}));
  EXPECT_TRUE(same(sum(i32({}, {0}, dev)), {0}));
  EXPECT_TRUE(same(prod(i64({}, {0}, dev)), {1}));
  Array e2 = zeros({2, 0}, {.device = dev});
  EXPECT_TRUE(same(sum(e2, {1}), {0, 0}));
  EXPECT_TRUE(same(prod(e2, {1}, true), {1, 1}));
  EXPECT_TRUE(same_shape(prod(e2, {1}, true), {2, 1}));
  EXPECT_TRUE(same(mean(e2, {1}), {kNaN, kNaN}));
  EXPECT_TRUE(same_shape(sum(e2, {0}), {0}));  // reducing the non-empty dim leaves an empty result
  EXPECT_TRUE(same_shape(max(e2, {0}), {0}));  // nothing to reduce per output: allowed
  // max/min/argmax/argmin of no elements have no value.
  EMBER_EXPECT_ERROR(max(e), "max", "zero elements", "[0]");
  EMBER_EXPECT_ERROR(min(e2, {1}), "min", "zero elements", "[2, 0]");
  EMBER_EXPECT_ERROR(argmax(e, 0), "argmax", "zero elements");
  EMBER_EXPECT_ERROR(argmin(e2, 1), "argmin", "zero elements");
}

TEST_P(OpReduce, RankZero) {
  Array s = f32({5}, {}, dev);
  EXPECT_EQ(sum(s).item<float>(), 5.0f);
  EXPECT_EQ(sum(s).rank(), 0);
  EXPECT_EQ(mean(s).item<float>(), 5.0f);
  EXPECT_EQ(prod(s, {0}).item<float>(), 5.0f);
  EXPECT_EQ(max(s, {-1}, true).item<float>(), 5.0f);
  EXPECT_EQ(argmax(s, 0).item<int64_t>(), 0);
  EXPECT_EQ(argmin(s, 0).rank(), 0);
}

TEST_P(OpReduce, NaNPropagation) {
  Array a = f32({1, kNaN, 3, 4, 5, 6, kNaN, 0}, {2, 4}, dev);
  EXPECT_TRUE(same(max(a, {1}), {kNaN, kNaN}));
  EXPECT_TRUE(same(min(a, {0}), {1, kNaN, kNaN, 0}));
  EXPECT_TRUE(same(sum(a, {1}), {kNaN, kNaN}));
  EXPECT_TRUE(same(argmax(a, 1), {1, 2}));  // the first NaN wins
  EXPECT_TRUE(same(argmin(a, 1), {1, 2}));
  EXPECT_TRUE(same(argmax(a, 0), {1, 0, 1, 0}));
  Array b = f64({2, 1, kNaN}, {3}, dev);
  EXPECT_TRUE(same(argmax(b, 0), {2}));
  EXPECT_TRUE(same(argmin(b, 0), {2}));
  EXPECT_TRUE(same(max(b), {kNaN}));
  // Infinities are ordinary values.
  Array c = f32({-INFINITY, -INFINITY, -1}, {3}, dev);
  EXPECT_TRUE(same(argmin(c, 0), {0}));
  EXPECT_TRUE(same(argmax(f32({-INFINITY, -INFINITY}, {2}, dev), 0), {0}));
  EXPECT_TRUE(same(max(f32({-INFINITY}, {1}, dev)), {-INFINITY}));
}

TEST_P(OpReduce, NonContiguousInputs) {
  std::vector<double> x = iota_d(24);
  Array a = f32(x, {2, 3, 4}, dev);
  Array p = permute(a, {2, 0, 1});  // [4,2,3]: p[i][j][k] = x[j*12 + k*4 + i]
  std::vector<double> perm;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) perm.push_back(x[size_t(j * 12 + k * 4 + i)]);
  for (const std::vector<int>& dims : std::vector<std::vector<int>>{{0}, {1}, {2}, {0, 2}, {}}) {
    EXPECT_TRUE(same(sum(p, dims), host_reduce(perm, {4, 2, 3}, dims, 0, std::plus<>())));
    EXPECT_TRUE(same(max(p, dims, true), host_reduce(perm, {4, 2, 3}, dims, -1e300, [](double u, double v) { return std::max(u, v); })));
  }
  EXPECT_TRUE(same(argmax(p, 0), host_argext(perm, {4, 2, 3}, 0, true)));
  EXPECT_TRUE(same(argmin(p, 2), host_argext(perm, {4, 2, 3}, 2, false)));
  // Sliced with a step and expanded inputs.
  Array s = slice(a, 2, 1, 4, 2);  // [2,3,2]: columns 1 and 3
  EXPECT_TRUE(same(sum(s, {2}), {4, 12, 20, 28, 36, 44}));
  Array e = expand(f32({1, 2, 3}, {3, 1}, dev), {3, 5});
  EXPECT_TRUE(same(sum(e, {1}), {5, 10, 15}));
  EXPECT_TRUE(same(sum(e), {30}));
  EXPECT_TRUE(same(argmax(e, 0), {2, 2, 2, 2, 2}));
}

// Long rows, long columns and flat reductions across tile and thread thresholds. Values are small
// integers, so every partial sum is exact whatever the order of accumulation.
TEST_P(OpReduce, SizesAcrossTileAndThreadBoundaries) {
  const bool slow = dev.kind == DeviceKind::Reference;
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(255), int64_t(256), int64_t(257), int64_t(1023),
                    int64_t(70001), int64_t(1) << 20}) {
    SCOPED_TRACE(n);
    std::vector<double> x(static_cast<size_t>(n));
    double want = 0, mx = -1;
    int64_t arg = 0;
    for (int64_t i = 0; i < n; ++i) {
      x[size_t(i)] = double((i * 7919) % 13);
      want += x[size_t(i)];
      if (x[size_t(i)] > mx) mx = x[size_t(i)], arg = i;
    }
    Array a = f32(x, {n}, dev);
    EXPECT_EQ(sum(a).item<double>(), want);
    EXPECT_EQ(argmax(a, 0).item<int64_t>(), arg);
    if (slow && n > 70001) continue;
    EXPECT_EQ(max(a).item<double>(), mx);
    EXPECT_EQ(sum(cast(a, DType::I32)).item<int64_t>(), int64_t(want));
    EXPECT_NEAR(mean(a).item<double>(), want / double(n), 1e-5 * (want / double(n)) + 1e-7);
  }
  // A [3, 70001] row reduction and a [70001, 3] column reduction.
  const int64_t m = 70001;
  std::vector<double> x(static_cast<size_t>(3 * m));
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i % 5);
  Array rows = f32(x, {3, m}, dev);
  EXPECT_TRUE(same(sum(rows, {1}), host_reduce(x, {3, m}, {1}, 0, std::plus<>())));
  Array cols = f32(x, {m, 3}, dev);
  EXPECT_TRUE(same(sum(cols, {0}), host_reduce(x, {m, 3}, {0}, 0, std::plus<>())));
  EXPECT_TRUE(same(argmax(cols, 0), host_argext(x, {m, 3}, 0, true)));
}

TEST_P(OpReduce, Errors) {
  Array a = f32(iota_d(6), {2, 3}, dev);
  EMBER_EXPECT_ERROR(sum(a, {2}), "sum", "dim 2", "rank 2", "reduce_test.cpp:");
  EMBER_EXPECT_ERROR(mean(a, {-3}), "mean", "dim -3");
  EMBER_EXPECT_ERROR(prod(a, {0, 0}), "prod", "more than once");
  EMBER_EXPECT_ERROR(max(a, {1, -1}), "max", "more than once");
  EMBER_EXPECT_ERROR(argmax(a, 5), "argmax", "dim 5");
  EMBER_EXPECT_ERROR(mean(i32({1}, {1}, dev)), "mean", "int32");
  EMBER_EXPECT_ERROR(mean(make({1}, {1}, DType::Bool, dev)), "mean", "bool");
}

EMBER_OP_SUITE(OpReduce);

}  // namespace
}  // namespace ember::testing
