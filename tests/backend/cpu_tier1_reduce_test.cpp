// Tier-1 CPU kernels for reductions and multi-pass programs (src/backend/common/emit_c_reduce.cpp,
// the reduce launch in src/backend/cpu/tier1.cpp): single-pass sum/prod/max/min (float and
// wrapping integer, with NaN propagation), a three-pass softmax / log-softmax and a layer norm
// give the results of the tile interpreter (tier 0) and the scalar reference backend, on rows
// (reduce dim contiguous), columns (outer dim contiguous) and strided layouts (which stay on
// tier 0), argmax/argmin of floats (ties, infinities, NaNs) and integers, over one or two outer and
// reduce dims, short rows, long rows (chunked sums) and
// reductions of one point; and softmax, log-softmax, layer norm and sums through the public API.
// GCC 12 reports a false -Wrestrict inside std::string concatenation (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "backend/tier1_harness.h"
#include "ember/nn/norm.h"
#include "ember/ops.h"

namespace ember::testing {
namespace {

using kir::Val;

// kRowsPermuted: the outer dims of the input in reverse order in memory, so they do not
// coalesce with the outputs' (the rows kernel walks several outer dims).
enum Layout { kRows = 0, kColumns = 1, kStrided = 2, kRowsPermuted = 3 };
enum Kind { kSinglePass = 0, kSoftmax = 1, kLayerNorm = 2, kIntSum = 3, kArgExtreme = 4 };

struct Case {
  std::vector<int64_t> outer, reduce;
  Layout layout;
  Kind kind;
  DType F;
};

// A view over the launch dims [outer..., reduce...]: row-major in the memory order `order`
// (iteration dims listed outermost first), each stride times `step`; dims not in `order` are
// broadcast (stride 0).
HArg make_view(const std::vector<int64_t>& shape, const std::vector<int>& order, int64_t step, DType dt,
               std::mt19937_64& rng) {
  HArg a;
  a.dtype = dt;
  a.strides.assign(shape.size(), 0);
  int64_t running = step, extent = 0;
  for (size_t i = order.size(); i-- > 0;) {
    const int d = order[i];
    a.strides[size_t(d)] = running;
    extent += (shape[size_t(d)] - 1) * running;
    running *= shape[size_t(d)];
  }
  a.offset = int64_t(rng() % 3);
  a.bytes.assign(size_t(a.offset + extent + 1) * dtype_size(dt), 0);
  const size_t n = a.bytes.size() / dtype_size(dt);
  for (size_t i = 0; i < n; ++i)
    put(a.bytes, dt, i, dt == DType::I32 || dt == DType::I64 ? double(int64_t(rng() % 2000001) - 1000000)
                                                             : std::uniform_real_distribution<double>(-2, 2)(rng));
  return a;
}

struct Built {
  kir::Builder b;
  HLaunch L;
  std::vector<int> outs;  // output arguments
  std::vector<DType> out_dt;
};

void build(const Case& c, Built& B, std::mt19937_64& rng) {
  kir::Builder& b = B.b;
  HLaunch& L = B.L;
  const int ro = int(c.outer.size()), rr = int(c.reduce.size());
  L.outer_rank = ro;
  L.reduce_rank = rr;
  L.shape = c.outer;
  L.shape.insert(L.shape.end(), c.reduce.begin(), c.reduce.end());
  std::vector<int> outer_dims, reduce_dims, all;
  for (int d = 0; d < ro; ++d) outer_dims.push_back(d);
  for (int d = ro; d < ro + rr; ++d) reduce_dims.push_back(d);
  all = outer_dims;
  all.insert(all.end(), reduce_dims.begin(), reduce_dims.end());
  std::vector<int> x_order = all;
  if (c.layout == kColumns) {
    x_order = reduce_dims;
    x_order.insert(x_order.end(), outer_dims.begin(), outer_dims.end());
  } else if (c.layout == kRowsPermuted) {
    x_order.assign(outer_dims.rbegin(), outer_dims.rend());
    x_order.insert(x_order.end(), reduce_dims.begin(), reduce_dims.end());
  }
  const int64_t step = c.layout == kStrided ? 2 : 1;
  int64_t n_reduce = 1;
  for (int64_t s : c.reduce) n_reduce *= s;
  const DType F = c.F;
  // Arguments: x, then outputs (per outer point: row-major over the outer dims; per point: x's layout).
  auto add = [&](DType dt, const std::vector<int>& order, bool output) {
    int arg = b.add_arg(dt);
    L.args.push_back(make_view(L.shape, order, step, dt, rng));
    if (output) {
      B.outs.push_back(arg);
      B.out_dt.push_back(dt);
    }
    return arg;
  };
  const int x = add(c.kind == kIntSum ? (F == DType::F32 ? DType::I32 : DType::I64) : F, x_order, false);
  switch (c.kind) {
    case kSinglePass: {
      // A NaN in one row: max, min, sum and prod of that row are NaN on every tier.
      HArg& xa = L.args[size_t(x)];
      put(xa.bytes, F, size_t(xa.offset), std::nan(""));
      const int o_sum = add(F, outer_dims, true), o_prod = add(F, outer_dims, true), o_max = add(F, outer_dims, true),
                o_min = add(F, outer_dims, true), o_mix = add(F, outer_dims, true);
      // Element offsets (IOTA) in a view with all dims reversed, which the launch does not
      // check for contiguity: in the reduction and once per outer point.
      std::vector<int> reversed(all.rbegin(), all.rend());
      const int ia = add(F, reversed, false);
      b.phase = 0;
      Val v = b.load(x);
      Val t = kir::tanh(v) * 1.5 + b.cast(b.iota(ia), F) * 1e-4;
      Val s = b.acc_sum(t), p = b.acc_prod(1.0 + t * 0.001), mx = b.acc_max(v), mn = b.acc_min(v * 2.0 - 1.0);
      b.phase = 1;
      b.store(o_sum, s);
      b.store(o_prod, p);
      b.store(o_max, mx);
      b.store(o_min, mn);
      b.store(o_mix, s / double(std::max<int64_t>(n_reduce, 1)) * 2.0 + kir::max(mx, mn) +
                         b.cast(b.iota(ia), F) * 0.01);
      break;
    }
    case kIntSum: {
      const DType I = F == DType::F32 ? DType::I32 : DType::I64;
      const int o_sum = add(I, outer_dims, true), o_prod = add(I, outer_dims, true), o_max = add(I, outer_dims, true);
      b.phase = 0;
      Val v = b.load(x);
      // Sums of +-1e6 values wrap in i32 for long rows: both tiers must wrap the same way.
      Val s = b.acc_sum(v * b.constant_int(3000, I)), p = b.acc_prod(v), mx = b.acc_max(v);
      // Integer argmin / argmax with ties (a tenth of the values clamped to each bound).
      Val am = b.acc_argmin(kir::max(v, b.constant_int(-800000, I))),
          ax = b.acc_argmax(kir::min(v, b.constant_int(800000, I)));
      const int o_am = add(DType::I64, outer_dims, true), o_ax = add(DType::I64, outer_dims, true);
      b.phase = 1;
      b.store(o_am, am);
      b.store(o_ax, ax);
      b.store(o_sum, s);
      b.store(o_prod, p);
      b.store(o_max, mx - b.constant_int(1, I));
      break;
    }
    case kArgExtreme: {
      // Values from a small set (many ties: the first one wins), infinities, signed zeros, and
      // NaNs in three places (the first NaN of a row wins for good).
      HArg& xa = L.args[size_t(x)];
      const size_t n = xa.bytes.size() / dtype_size(F);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t r = rng() % 40;
        put(xa.bytes, F, i, r == 0 ? INFINITY : r == 1 ? -INFINITY : r == 2 ? -0.0 : double(int64_t(r % 7) - 3) * 0.5);
      }
      put(xa.bytes, F, size_t(xa.offset), std::nan(""));
      put(xa.bytes, F, n / 2, std::nan(""));
      put(xa.bytes, F, n - 1, std::nan(""));  // in a later chunk of a long row, after the best value
      const int o_max = add(DType::I64, outer_dims, true), o_min = add(DType::I64, outer_dims, true),
                o_mix = add(DType::I64, outer_dims, true);
      b.phase = 0;
      Val v = b.load(x);
      // The argmin of an expression (recomputed by the tier-1 kernel's search of a chunk).
      Val amax = b.acc_argmax(v), amin = b.acc_argmin(kir::abs(v - 0.5) * 2.0);
      b.phase = 1;
      b.store(o_max, amax);
      b.store(o_min, amin);
      b.store(o_mix, amax * b.constant_int(1000003, DType::I64) + amin);
      break;
    }
    case kSoftmax: {
      const int o_soft = add(F, x_order, true), o_log = add(F, x_order, true), o_lse = add(F, outer_dims, true);
      b.phase = 0;
      Val m = b.acc_max(b.load(x));  // phase 1
      b.phase = 2;
      Val e = kir::exp(b.load(x) - m);
      Val s = b.acc_sum(e);  // phase 3
      b.phase = 3;
      Val ls = kir::log(s);
      b.store(o_lse, ls + m);
      b.phase = 4;
      Val x4 = b.load(x);
      b.store(o_soft, kir::exp(x4 - m) / s);
      b.store(o_log, x4 - m - ls);
      break;
    }
    case kLayerNorm: {
      const int o_y = add(F, x_order, true), o_mean = add(F, outer_dims, true), o_rstd = add(F, outer_dims, true);
      // A weight over the normalized dims (broadcast over the outer ones) only where the rows
      // scheme applies; a per-row scale read once per row (odd phase) everywhere.
      const int w = c.layout == kRows || c.layout == kRowsPermuted ? add(F, reduce_dims, false) : -1;
      const int g = add(F, outer_dims, false);
      b.phase = 0;
      Val s = b.acc_sum(b.load(x));
      b.phase = 1;
      Val mean = s / double(n_reduce);
      b.store(o_mean, mean);
      b.phase = 2;
      Val d = b.load(x) - mean;
      Val var = b.acc_sum(d * d);  // phase 3
      b.phase = 3;
      Val rstd = 1.0 / kir::sqrt(var / double(n_reduce) + 1e-5);
      Val gain = b.load(g) + 2.0;
      b.store(o_rstd, rstd);
      b.phase = 4;
      Val y = (b.load(x) - mean) * rstd * gain;
      if (w >= 0) y = y * b.load(w);
      b.store(o_y, y);
      break;
    }
  }
}

std::string describe(const Case& c) {
  auto dims = [](const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  static const char* kinds[] = {"single-pass", "softmax", "layer norm", "integer", "argmax/argmin"};
  static const char* layouts[] = {"rows", "columns", "strided", "rows, outer dims permuted"};
  return std::string(kinds[c.kind]) + " " + std::string(dtype_name(c.F)) + " outer " + dims(c.outer) +
         " reduce " + dims(c.reduce) + " " + layouts[c.layout];
}

// A built program's outputs on tier 0, on tier 1 (with the tier-1 statistics around that run)
// and on the reference backend; a fatal failure when a run fails or tier 1 fails to compile.
struct Runs {
  std::vector<std::vector<uint8_t>> t0, t1, ref;
  Stats before, after;
};
void run_on_every_tier(Built& B, const std::string& ctx, Runs& r) {
  std::string e0, e1, er;
  set_tier(0);
  r.t0 = run_fresh(cpu_backend(), B.b, B.L, &e0);
  set_tier(1);
  r.before = stats();
  r.t1 = run_fresh(cpu_backend(), B.b, B.L, &e1);
  r.after = stats();
  r.ref = run_fresh(reference_backend(), B.b, B.L, &er);
  ASSERT_TRUE(e0.empty() && e1.empty() && er.empty()) << e0 << e1 << er << ctx;
  ASSERT_EQ(r.after.failures, r.before.failures) << "tier-1 compile failed\n" << ctx;
}

class CpuTier1ReduceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!compiler_present()) GTEST_SKIP() << "no C++ compiler on PATH";
  }
};

TEST_F(CpuTier1ReduceTest, ProgramsMatchTier0AndReferenceOnEveryLayout) {
  Tier1Scope scope(1);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{7}, {64}}, {{3, 5}, {17}}, {{2}, {5000}}, {{100}, {3}}, {{}, {1000}},
      {{4}, {6, 7}}, {{300}, {1}}, {{2, 40}, {9, 5}}, {{33}, {300}}, {{6, 11, 3}, {40}},
      {{2}, {3, 3001}}};  // the last: longer than the arrays that keep values between passes
  std::mt19937_64 rng(20261129);
  int cases = 0;
  for (int kind = 0; kind < 5; ++kind) {
    for (int layout = 0; layout < 4; ++layout) {
      for (size_t si = 0; si < shapes.size(); ++si) {
        // Every shape for rows; a sample of them for columns and strided layouts (each program
        // is compiled once per kind/dtype, so the cost is in the runs, not in compiles).
        if ((layout == kColumns || layout == kStrided) && si % 2 == 1) continue;
        if (layout == kRowsPermuted && shapes[si].first.size() < 2) continue;
        Case c{shapes[si].first, shapes[si].second, Layout(layout), Kind(kind), (si + size_t(kind)) % 2 ? DType::F64 : DType::F32};
        if (c.layout == kStrided && c.reduce.back() < 3) continue;  // a 1-wide row is contiguous
        Built B;
        build(c, B, rng);
        const std::string ctx = describe(c) + "\n" + kir::to_string(B.b.program("t"));
        Runs r;
        ASSERT_NO_FATAL_FAILURE(run_on_every_tier(B, ctx, r));
        const Stats &before = r.before, &after = r.after;
        const auto &t0 = r.t0, &t1 = r.t1, &ref = r.ref;
        // Strided layouts (neither the reduce nor the outer dim contiguous) take the strided
        // columns scheme (emit_c.h), as do short rows; only a single strided row stays on tier 0.
        int64_t n_outer = 1;
        for (int64_t s : c.outer) n_outer *= s;
        EXPECT_EQ(after.launches, before.launches + (c.layout == kStrided && n_outer == 1 ? 0 : 1)) << ctx;
        int64_t n_reduce = 1;
        for (int64_t s : c.reduce) n_reduce *= s;
        const double tol = c.F == DType::F32 ? 2e-5 + 2e-7 * double(n_reduce) : 1e-11;
        for (size_t o = 0; o < B.outs.size(); ++o) {
          const size_t a = size_t(B.outs[o]);
          const bool exact = B.out_dt[o] == DType::I32 || B.out_dt[o] == DType::I64;
          EXPECT_TRUE(agree(t1[a], t0[a], B.out_dt[o], exact, exact ? 0 : tol)) << "tier 1 vs 0, arg " << a << "\n" << ctx;
          EXPECT_TRUE(agree(t1[a], ref[a], B.out_dt[o], exact, exact ? 0 : tol)) << "tier 1 vs reference, arg " << a << "\n" << ctx;
        }
        ++cases;
      }
    }
  }
  EXPECT_GE(cases, 50);
}

// The rows scheme's store-only passes (softmax's last) with streaming stores (emit_c.h) give the
// same bytes as with plain stores, for rows of at least 256 points (shorter ones never stream),
// with chunk tails, several rows per outer point, and NaN/inf among the inputs (build()).
TEST_F(CpuTier1ReduceTest, StreamingStoresMatchPlainStoresBitForBit) {
  Tier1Scope scope(1);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2}, {5000}}, {{33}, {300}}, {{2}, {3, 3001}}, {{5}, {256}}, {{3}, {4099}}};
  std::mt19937_64 rng(20261207);
  int64_t streamed = 0;
  for (int kind : {kSinglePass, kSoftmax, kLayerNorm}) {
    for (size_t si = 0; si < shapes.size(); ++si) {
      Case c{shapes[si].first, shapes[si].second, kRows, Kind(kind), si % 2 ? DType::F64 : DType::F32};
      Built B;
      build(c, B, rng);
      const std::string ctx = describe(c) + "\n" + kir::to_string(B.b.program("t"));
      std::string e0, e1;
      std::vector<std::vector<uint8_t>> plain, streaming;
      {
        StreamScope never(-1);
        plain = run_fresh(cpu_backend(), B.b, B.L, &e0);
      }
      {
        StreamScope always(0);
        const int64_t before = streamed_launches();
        streaming = run_fresh(cpu_backend(), B.b, B.L, &e1);
        streamed += streamed_launches() - before;
      }
      ASSERT_TRUE(e0.empty() && e1.empty()) << e0 << e1 << ctx;
      for (int a : B.outs) EXPECT_EQ(streaming[size_t(a)], plain[size_t(a)]) << "arg " << a << "\n" << ctx;
    }
  }
  EXPECT_GE(streamed, 10);
}

// f16/bf16 reductions (sums, products, maxima, minima; softmax; layer norm) compile too: their
// accumulators run in f32 registers and round once where the result is stored or cast, as the
// interpreter and the reference backend do (the bf16 gradient sums of a training step under
// autocast ran on tier 0 before). The outputs are 16-bit, so tiers agree to their rounding:
// within two units in the last place of the result (summation order may flip one rounding).
TEST_F(CpuTier1ReduceTest, HalfPrecisionReductionsCompileAndMatchTier0AndReference) {
  Tier1Scope scope(1);
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{7}, {64}}, {{3, 5}, {17}}, {{2}, {5000}}, {{33}, {300}}};
  std::mt19937_64 rng(20261205);
  int cases = 0;
  // Each kind on rows and on columns, bf16 or f16 in turn (every program is a compile: seconds).
  for (int kind : {int(kSinglePass), int(kSoftmax), int(kLayerNorm)})
    for (int layout : {int(kRows), int(kColumns)})
      for (const auto& [outer, reduce] : shapes) {
        const DType F = (kind + layout) % 2 ? DType::F16 : DType::BF16;
        Case c{outer, reduce, Layout(layout), Kind(kind), F};
        Built B;
        build(c, B, rng);
        const std::string ctx = describe(c) + "\n" + kir::to_string(B.b.program("t"));
        Runs r;
        ASSERT_NO_FATAL_FAILURE(run_on_every_tier(B, ctx, r));
        const auto &t0 = r.t0, &t1 = r.t1, &ref = r.ref;
        EXPECT_EQ(r.after.launches, r.before.launches + 1) << "ran on tier 0\n" << ctx;
        const double ulp = F == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
        for (size_t o = 0; o < B.outs.size(); ++o) {
          const size_t a = size_t(B.outs[o]);
          EXPECT_TRUE(agree(t1[a], t0[a], B.out_dt[o], false, 2 * ulp)) << "tier 1 vs 0, arg " << a << "\n" << ctx;
          EXPECT_TRUE(agree(t1[a], ref[a], B.out_dt[o], false, 2 * ulp)) << "tier 1 vs reference, arg " << a << "\n" << ctx;
        }
        ++cases;
      }
  EXPECT_EQ(cases, 24);
}

// The columns scheme accumulates each outer point in the reduce dims' order, as the reference
// backend does: float sums agree bit for bit. A block of outer points is cut at 256 and at the
// end of a row of outer points (here 300 columns = 256 + 44, in 3 outer rows).
TEST_F(CpuTier1ReduceTest, ColumnSumsAreExactAcrossBlocks) {
  Tier1Scope scope(1);
  std::mt19937_64 rng(7);
  Case c{{3, 300}, {129}, kColumns, kSinglePass, DType::F32};
  Built B;
  kir::Builder& b = B.b;
  B.L.outer_rank = 2;
  B.L.reduce_rank = 1;
  B.L.shape = {3, 300, 129};
  const int x = b.add_arg(DType::F32), o = b.add_arg(DType::F32);
  B.L.args.push_back(make_view(B.L.shape, {0, 2, 1}, 1, DType::F32, rng));
  B.L.args.push_back(make_view(B.L.shape, {0, 1}, 1, DType::F32, rng));
  Val s = b.acc_sum(b.load(x) * 0.37);
  b.phase = 1;
  b.store(o, s);
  std::string e1, er;
  const Stats before = stats();
  auto t1 = run_fresh(cpu_backend(), b, B.L, &e1);
  ASSERT_EQ(stats().launches, before.launches + 1);
  auto ref = run_fresh(reference_backend(), b, B.L, &er);
  ASSERT_TRUE(e1.empty() && er.empty()) << e1 << er;
  EXPECT_EQ(t1[1], ref[1]);
}

// The sources the tier-1 compiler wrote into the scope's cache directory, concatenated.
std::string kernel_sources(const Tier1Scope& scope) {
  std::string all;
  for (const auto& e : std::filesystem::recursive_directory_iterator(scope.dir())) {
    if (e.path().extension() != ".cpp") continue;
    std::ifstream f(e.path());
    all += std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()) + "\n";
  }
  return all;
}

// A costly value a later pass computes again (softmax's exp(x - max)) is kept from the earlier
// pass only where both passes load the same view: here the store pass reads another input of the
// same dtype, so the kernel must compute its own exponentials.
TEST_F(CpuTier1ReduceTest, KeptValuesAreReloadedOnlyFromTheSameView) {
  Tier1Scope scope(1);
  std::mt19937_64 rng(11);
  Built B;
  kir::Builder& b = B.b;
  B.L.outer_rank = 1;
  B.L.reduce_rank = 1;
  B.L.shape = {5, 300};
  auto arg = [&](std::vector<int> order) {
    B.L.args.push_back(make_view(B.L.shape, order, 1, DType::F32, rng));
    return b.add_arg(DType::F32);
  };
  const int x_max = arg({0, 1}), x_sum = arg({0, 1}), y = arg({0, 1}), o = arg({0, 1});
  b.phase = 0;
  Val m = b.acc_max(b.load(x_max));
  b.phase = 2;
  Val s = b.acc_sum(kir::exp(b.load(x_sum) - m));
  b.phase = 4;
  b.store(o, kir::exp(b.load(y) - m) / s);
  std::string e1, er;
  auto t1 = run_fresh(cpu_backend(), b, B.L, &e1);
  auto ref = run_fresh(reference_backend(), b, B.L, &er);
  ASSERT_TRUE(e1.empty() && er.empty()) << e1 << er;
  EXPECT_NE(kernel_sources(scope).find("same_view(1, 2)"), std::string::npos) << "the kernel does not check the views";
  EXPECT_TRUE(agree(t1[size_t(o)], ref[size_t(o)], DType::F32, false));
}

// A value per row read inside the row loop (stride 0 along the reduced dim: a softmax's saved
// row sum in its gradient, y * (g - sum(g * y)) / s) keeps the rows scheme: the kernel reads it
// from a splat (emit_c.h). Rows longer than a chunk refill the splat; NaN and inf row values
// propagate; bf16 splats hold storage values. A launch with more row values than the kernel has
// splats for (emit_c.h kRowSplatSlots) takes another scheme, with the same results.
TEST_F(CpuTier1ReduceTest, RowValuesInTheRowLoopKeepTheRowsScheme) {
  Tier1Scope scope(1);
  std::mt19937_64 rng(31);
  struct RowCase {
    std::vector<int64_t> shape;  // [outer..., reduce...]: one outer dim, the rest reduced
    DType F;
    int extra;  // more row values read in the row loop
  };
  const RowCase cases[] = {{{64, 128}, DType::F32, 0}, {{3, 4100}, DType::F32, 0}, {{5, 2, 33}, DType::F64, 2},
                           {{9, 70}, DType::BF16, 0}, {{20, 40}, DType::F32, 3}, {{20, 40}, DType::F32, 4}};
  for (const RowCase& rc : cases) {
    Built B;
    kir::Builder& b = B.b;
    B.L.outer_rank = 1;
    B.L.reduce_rank = int(rc.shape.size()) - 1;
    B.L.shape = rc.shape;
    std::vector<int> all(rc.shape.size());
    for (size_t d = 0; d < all.size(); ++d) all[d] = int(d);
    auto arg = [&](const std::vector<int>& order) {
      B.L.args.push_back(make_view(B.L.shape, order, 1, rc.F, rng));
      return b.add_arg(rc.F);
    };
    std::vector<int> extras;
    for (int e = 0; e < rc.extra; ++e) extras.push_back(arg({0}));
    const int y = arg(all), g = arg(all), s = arg({0}), o = arg(all), dot = arg({0});
    // Row values: finite, then an infinite and a NaN row (the rows' first elements).
    HArg& sa = B.L.args[size_t(s)];
    put(sa.bytes, rc.F, size_t(sa.offset), INFINITY);
    put(sa.bytes, rc.F, size_t(sa.offset + 1), std::nan(""));
    b.phase = 0;
    Val prod = b.load(g) * b.load(y);
    for (int e : extras) prod = prod + b.load(e) * 0.5;
    Val d = b.acc_sum(prod);
    b.phase = 1;
    b.store(dot, d);
    b.phase = 2;
    b.store(o, b.load(y) * (b.load(g) - d) / b.load(s));
    const std::string ctx = std::string(dtype_name(rc.F)) + " shape " + std::to_string(rc.shape[0]) + "x" +
                            std::to_string(rc.shape.back()) + ", " + std::to_string(rc.extra) + " more row values\n" +
                            kir::to_string(b.program("t"));
    Runs r;
    const std::array<int64_t, 3> before = reduce_schemes();
    ASSERT_NO_FATAL_FAILURE(run_on_every_tier(B, ctx, r));
    const std::array<int64_t, 3> after = reduce_schemes();
    EXPECT_EQ(after[0] - before[0], rc.extra + 1 <= 4 ? 1 : 0) << "rows launches (kRowSplatSlots = 4)\n" << ctx;
    EXPECT_EQ(after[0] + after[1] + after[2] - before[0] - before[1] - before[2], 1) << ctx;
    int64_t n_reduce = 1;
    for (size_t i = 1; i < rc.shape.size(); ++i) n_reduce *= rc.shape[i];
    const double tol = rc.F == DType::F64 ? 1e-11 : rc.F == DType::BF16 ? 1e-2 : 2e-5 + 2e-7 * double(n_reduce);
    for (int a : {dot, o}) {
      EXPECT_TRUE(agree(r.t1[size_t(a)], r.t0[size_t(a)], rc.F, false, tol)) << "tier 1 vs 0, arg " << a << "\n" << ctx;
      EXPECT_TRUE(agree(r.t1[size_t(a)], r.ref[size_t(a)], rc.F, false, tol)) << "tier 1 vs reference, arg " << a << "\n" << ctx;
    }
    // The infinite row gives (signed) zeros, y * (g - dot) / inf; the NaN row gives NaN.
    const size_t row = size_t(n_reduce), first_o = size_t(B.L.args[size_t(o)].offset);
    EXPECT_EQ(element(r.t1[size_t(o)], rc.F, first_o), 0.0) << ctx;
    EXPECT_TRUE(std::isnan(element(r.t1[size_t(o)], rc.F, first_o + row))) << ctx;
  }
}

// Softmax, log-softmax, layer norm and sums written through the public API (each one fused
// kernel) run on tier 1 and agree with the reference backend, over the last dim and over dim 0.
TEST_F(CpuTier1ReduceTest, ApiSoftmaxLayerNormAndSumsMatchReference) {
  Tier1Scope scope(1);
  const Stats s0 = stats();
  auto compute = [](Device dev) {
    std::vector<float> xv(96 * 200), wv(200), bv(200);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 7919 % 2003) - 1001) / 250.0f;
    for (size_t i = 0; i < wv.size(); ++i) {
      wv[i] = 1.0f + float(i % 13) / 13.0f;
      bv[i] = float(i % 7) / 7.0f - 0.5f;
    }
    Array x = from_vector(xv, {96, 200}, dev);
    Array w = from_vector(wv, {200}, dev), bias = from_vector(bv, {200}, dev);
    std::vector<Array> outs = {softmax(x, -1), log_softmax(x, -1), softmax(x, 0), nn::layer_norm(x, 1, w, bias, 1e-5),
                               sum(x, {1}), sum(x, {0}), max(x, {1})};
    std::vector<std::vector<double>> v;
    for (Array& a : outs) v.push_back(cast(a, DType::F64).to_vector<double>());
    return v;
  };
  auto got = compute(Device::cpu()), want = compute(Device::reference());
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size());
    for (size_t i = 0; i < got[k].size(); ++i)
      ASSERT_NEAR(got[k][i], want[k][i], 3e-5 * (1 + std::fabs(want[k][i]))) << "output " << k << " element " << i;
  }
  EXPECT_GE(stats().launches, s0.launches + 6);
  // Softmax's store pass reloads the exponentials of its sum pass (one chunk per row).
  EXPECT_NE(kernel_sources(scope).find("= keep"), std::string::npos);
}

}  // namespace
}  // namespace ember::testing
