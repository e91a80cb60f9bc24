// The CPU backend's matmul (oneDNN for f32/f16/bf16, loops for f64 and integers) against the
// reference backend: plain and transposed operands, strided layouts that must be packed,
// batches with broadcast (stride 0) operands, K = 0, and every dtype.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "backend/kir_harness.h"

namespace ember::testing {
namespace {

struct HTensor {
  DType dtype = DType::F32;
  std::vector<uint8_t> bytes;
  int64_t offset = 0;
  std::vector<int64_t> shape, strides;
};

// A tensor of the given logical shape over a buffer laid out with `order` (storage dims from
// outermost to innermost) and `step` on the innermost storage dim; dims in `broadcast` get
// stride 0.
HTensor make(DType dt, std::vector<int64_t> shape, std::vector<int> order, std::vector<int> broadcast,
             int64_t step, std::mt19937_64& rng, int64_t offset = 3) {
  HTensor t;
  t.dtype = dt;
  t.shape = shape;
  t.strides.assign(shape.size(), 0);
  t.offset = offset;
  int64_t running = step, extent = 0;
  for (int i = int(order.size()) - 1; i >= 0; --i) {
    int d = order[size_t(i)];
    if (std::find(broadcast.begin(), broadcast.end(), d) != broadcast.end()) continue;
    t.strides[size_t(d)] = running;
    extent += (std::max<int64_t>(shape[size_t(d)], 1) - 1) * running;
    running *= std::max<int64_t>(shape[size_t(d)], 1);
  }
  size_t n = size_t(offset + extent + 1);
  t.bytes.assign(n * dtype_size(dt), 0);
  std::uniform_real_distribution<double> u(-1, 1);
  for (size_t i = 0; i < n; ++i) {
    double v = u(rng);
    if (dt == DType::I32 || dt == DType::I64) v = std::floor(v * 100);
    if (dt == DType::U8 || dt == DType::Bool) v = dt == DType::Bool ? (v > 0) : std::floor((v + 1) * 127);
    put(t.bytes, dt, i, v);
  }
  return t;
}

std::vector<uint8_t> run_matmul(Backend& be, const HTensor& a, const HTensor& b, const HTensor& c, std::string* err) {
  std::vector<std::shared_ptr<DeviceBuffer>> bufs;
  ember_tensor_desc d[3];
  const HTensor* ts[3] = {&a, &b, &c};
  for (int i = 0; i < 3; ++i) {
    auto buf = be.alloc(Device{}, ts[i]->bytes.size());
    be.write(*buf, 0, ts[i]->bytes.data(), ts[i]->bytes.size());
    bufs.push_back(buf);
    d[i] = ember_tensor_desc{};
    d[i].buffer = buf->handle;
    d[i].offset = ts[i]->offset;
    d[i].dtype = int32_t(ts[i]->dtype);
    d[i].rank = int32_t(ts[i]->shape.size());
    for (size_t k = 0; k < ts[i]->shape.size(); ++k) {
      d[i].shape[k] = ts[i]->shape[k];
      d[i].strides[k] = ts[i]->strides[k];
    }
  }
  try {
    be.library_call(0, EMBER_LIB_MATMUL, d, 2, &d[2], 1, nullptr);
  } catch (const Error& e) {
    if (err) *err = e.what();
    return {};
  }
  std::vector<uint8_t> out(c.bytes.size());
  be.read(*bufs[2], 0, out.data(), out.size());
  return out;
}

void check(const HTensor& a, const HTensor& b, const HTensor& c, const std::string& what) {
  SCOPED_TRACE(what);
  std::string e1, e2;
  auto got = run_matmul(cpu_backend(), a, b, c, &e1);
  auto want = run_matmul(reference_backend(), a, b, c, &e2);
  ASSERT_EQ(e1, e2);
  ASSERT_EQ(got.size(), want.size());
  DType dt = c.dtype;
  int64_t K = a.shape.back();
  bool exact = !(dt == DType::F32 || dt == DType::F16 || dt == DType::BF16);
  double tol = dt == DType::F32 ? 2e-6 : dt == DType::F16 ? 2e-3 : 1e-2;
  size_t n = got.size() / dtype_size(dt);
  for (size_t i = 0; i < n; ++i) {
    double g = element(got, dt, i), w = element(want, dt, i);
    if (exact) ASSERT_EQ(g, w) << "element " << i;
    else ASSERT_NEAR(g, w, tol * (std::sqrt(double(K)) + std::fabs(w))) << "element " << i;
  }
}

// Every (M, K, N) with a and b each plain or transposed, f32, against the reference backend.
void check_layouts(const std::vector<std::array<int64_t, 3>>& shapes, uint64_t seed, const std::string& what) {
  std::mt19937_64 rng(seed);
  for (auto& s : shapes) {
    int64_t M = s[0], K = s[1], N = s[2];
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        HTensor a = make(DType::F32, {M, K}, ta ? std::vector<int>{1, 0} : std::vector<int>{0, 1}, {}, 1, rng);
        HTensor b = make(DType::F32, {K, N}, tb ? std::vector<int>{1, 0} : std::vector<int>{0, 1}, {}, 1, rng);
        HTensor c = make(DType::F32, {M, N}, {0, 1}, {}, 1, rng, 0);
        check(a, b, c, what + " M " + std::to_string(M) + " K " + std::to_string(K) + " N " + std::to_string(N) +
                           " ta " + std::to_string(ta) + " tb " + std::to_string(tb));
      }
  }
}

TEST(CpuMatmul, PlainAndTransposedF32) {
  check_layouts({{1, 1, 1}, {7, 13, 5}, {64, 100, 33}, {1, 300, 17}, {129, 1, 65}, {128, 256, 512}}, 1, "");
}

// M <= 4 takes the dot-product / row-update loops of gemv.cpp (batch-1 inference): both layouts
// of b, strided a, K not a multiple of the 16 lanes, and sizes large enough to use threads.
TEST(CpuMatmul, SmallMRowsMatchReference) {
  // (4 columns at a time plus a remainder; {2, 2048, 2049} is large enough for threads.)
  check_layouts({{1, 784, 512}, {2, 37, 9}, {3, 16, 1}, {4, 1, 70}, {1, 513, 300}, {4, 1000, 130}, {2, 2048, 2049}}, 5,
                "small");
}

// N = 1 (matrix-vector) takes gemv_n1_f32: rows in fours plus a remainder, threads above 4M.
TEST(CpuMatmul, MatrixVectorMatchesReference) {
  check_layouts({{37, 50, 1}, {300, 513, 1}, {5, 1, 1}, {2049, 2048, 1}}, 6, "matrix-vector");
}

TEST(CpuMatmul, StridedOperandsArePacked) {
  std::mt19937_64 rng(2);
  HTensor a = make(DType::F32, {20, 30}, {0, 1}, {}, 2, rng);  // inner stride 2
  HTensor b = make(DType::F32, {30, 10}, {1, 0}, {}, 3, rng);
  HTensor c = make(DType::F32, {20, 10}, {0, 1}, {}, 1, rng, 0);
  check(a, b, c, "stepped");
  HTensor row = make(DType::F32, {5, 30}, {0, 1}, {0}, 1, rng);  // broadcast rows: stride 0
  HTensor c2 = make(DType::F32, {5, 10}, {0, 1}, {}, 1, rng, 0);
  check(row, b, c2, "broadcast rows");
}

TEST(CpuMatmul, BatchesWithBroadcast) {
  std::mt19937_64 rng(3);
  const int64_t B = 3, M = 17, K = 40, N = 9;
  HTensor c = make(DType::F32, {B, M, N}, {0, 1, 2}, {}, 1, rng, 0);
  HTensor a = make(DType::F32, {B, M, K}, {0, 1, 2}, {}, 1, rng);
  HTensor b = make(DType::F32, {B, K, N}, {0, 1, 2}, {}, 1, rng);
  check(a, b, c, "batched");
  HTensor bs = make(DType::F32, {B, K, N}, {0, 1, 2}, {0}, 1, rng);  // shared weights: folded into M
  check(a, bs, c, "shared b");
  HTensor as = make(DType::F32, {B, M, K}, {0, 2, 1}, {0}, 1, rng);  // shared, transposed a
  check(as, b, c, "shared a");
  HTensor at = make(DType::F32, {B, M, K}, {2, 0, 1}, {}, 1, rng);  // batch dim inside the matrix
  check(at, bs, c, "interleaved batch");
  HTensor aswap = make(DType::F32, {B, M, K}, {1, 0, 2}, {}, 1, rng);  // rows and batch swapped in memory
  check(aswap, bs, c, "batch and rows swapped (a copied into rows, then folded)");
  HTensor c4 = make(DType::F32, {2, 3, M, N}, {0, 1, 2, 3}, {}, 1, rng, 0);
  HTensor a4 = make(DType::F32, {2, 3, M, K}, {0, 1, 2, 3}, {1}, 1, rng);
  HTensor b4 = make(DType::F32, {2, 3, K, N}, {0, 1, 2, 3}, {0}, 1, rng);
  check(a4, b4, c4, "rank 4 broadcast");
}

TEST(CpuMatmul, EmptyKGivesZeros) {
  std::mt19937_64 rng(4);
  for (DType dt : {DType::F32, DType::F64, DType::I64}) {
    HTensor a = make(dt, {2, 4, 0}, {0, 1, 2}, {}, 1, rng);
    HTensor b = make(dt, {2, 0, 5}, {0, 1, 2}, {}, 1, rng);
    HTensor c = make(dt, {2, 4, 5}, {0, 1, 2}, {}, 1, rng, 0);  // random contents: must be overwritten
    check(a, b, c, "K = 0");
    auto got = run_matmul(cpu_backend(), a, b, c, nullptr);
    for (size_t i = 0; i < 40; ++i) EXPECT_EQ(element(got, dt, i), 0.0);
  }
}

TEST(CpuMatmul, EveryDtype) {
  std::mt19937_64 rng(5);
  for (DType dt : {DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::Bool}) {
    for (int ta = 0; ta < 2; ++ta) {
      HTensor a = make(dt, {2, 19, 23}, ta ? std::vector<int>{0, 2, 1} : std::vector<int>{0, 1, 2}, {}, 1, rng);
      HTensor b = make(dt, {2, 23, 11}, {0, 1, 2}, {0}, 1, rng);
      HTensor c = make(dt, {2, 19, 11}, {0, 1, 2}, {}, 1, rng, 0);
      check(a, b, c, std::string(dtype_name(dt)) + (ta ? " transposed" : ""));
    }
  }
  // 16-bit floats past the loops' size (oneDNN on widened operands): each operand row- or
  // column-major (widened in its own layout), or strided (widened element by element).
  for (DType dt : {DType::F16, DType::BF16})
    for (int layout = 0; layout < 4; ++layout) {
      const bool ta = layout & 1, tb = layout & 2;
      HTensor a = make(dt, {2, 40, 50}, ta ? std::vector<int>{0, 2, 1} : std::vector<int>{0, 1, 2}, {}, 1, rng);
      HTensor b = make(dt, {2, 50, 30}, tb ? std::vector<int>{0, 2, 1} : std::vector<int>{0, 1, 2}, {}, 1, rng);
      HTensor c = make(dt, {2, 40, 30}, {0, 1, 2}, {}, 1, rng, 0);
      check(a, b, c, std::string(dtype_name(dt)) + " a " + (ta ? "column" : "row") + "-major, b " +
                         (tb ? "column" : "row") + "-major");
    }
  HTensor stepped = make(DType::BF16, {2, 40, 50}, {0, 2, 1}, {}, 2, rng);  // columns with stride 2
  HTensor b = make(DType::BF16, {2, 50, 30}, {0, 1, 2}, {}, 1, rng);
  HTensor c = make(DType::BF16, {2, 40, 30}, {0, 1, 2}, {}, 1, rng, 0);
  check(stepped, b, c, "bf16 strided");
}

TEST(CpuMatmul, LargeF32) {
  std::mt19937_64 rng(6);
  HTensor a = make(DType::F32, {300, 700}, {0, 1}, {}, 1, rng);
  HTensor b = make(DType::F32, {700, 200}, {1, 0}, {}, 1, rng);
  HTensor c = make(DType::F32, {300, 200}, {0, 1}, {}, 1, rng, 0);
  check(a, b, c, "large");
}

TEST(CpuMatmul, ShapeMismatchIsAnError) {
  std::mt19937_64 rng(7);
  HTensor a = make(DType::F32, {4, 5}, {0, 1}, {}, 1, rng);
  HTensor b = make(DType::F32, {6, 3}, {0, 1}, {}, 1, rng);
  HTensor c = make(DType::F32, {4, 3}, {0, 1}, {}, 1, rng, 0);
  std::string e;
  EXPECT_TRUE(run_matmul(cpu_backend(), a, b, c, &e).empty());
  EXPECT_NE(e.find("matmul"), std::string::npos) << e;
}

}  // namespace
}  // namespace ember::testing
