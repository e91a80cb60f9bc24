// Tier-1 CPU kernels (src/backend/cpu/tier1.cpp, src/backend/common/emit_c.cpp): elementwise KIR
// programs compiled by the system compiler give the same results as the tile interpreter (tier 0)
// and the scalar reference backend, on random programs over every dtype tier 1 renders and on
// contiguous, transposed, stepped and broadcast views; the disk cache is reused; without a
// compiler everything stays on tier 0. Each test compiles only a few kernels (a compile costs
// about half a second); they use a private cache directory and restore the tier mode.
#include <dlfcn.h>
#include <link.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/tier1_harness.h"
#include "ember/ops.h"

namespace ember::testing {
namespace {

using kir::Val;

// A random elementwise program over every dtype tier 1 renders, with random views.
struct Gen {
  std::mt19937_64 rng;
  kir::Builder b;
  HLaunch L;
  struct Out { int arg; DType dt; bool exact; };
  std::vector<Out> outs;

  explicit Gen(uint64_t seed) : rng(seed) {}
  int rnd(int n) { return int(rng() % uint64_t(n)); }

  void shape() {
    int rank = 1 + rnd(3);
    const int64_t sizes[] = {1, 3, 17, 64, 100, 257, 1000};
    int64_t prod = 1;
    for (int d = 0; d < rank; ++d) {
      int64_t s = sizes[rnd(7)];
      if (prod * s > 60000) s = 2;
      L.shape.push_back(s);
      prod *= s;
    }
    L.outer_rank = rank;
  }
  // kind: 0 contiguous, 1 transposed, 2 stepped, 3 broadcast along some dims (inputs only)
  HArg view(DType dt, bool output) {
    HArg a;
    a.dtype = dt;
    const int r = int(L.shape.size());
    a.strides.assign(size_t(r), 0);
    std::vector<int> dims;
    for (int d = 0; d < r; ++d) dims.push_back(d);
    int kind = rnd(output ? 3 : 4);
    if (kind == 1) std::reverse(dims.begin(), dims.end());
    int64_t running = 1, extent = 0;
    for (int i = r - 1; i >= 0; --i) {
      int d = dims[size_t(i)];
      if (kind == 3 && rnd(2) == 0) continue;  // broadcast dim
      int64_t stride = running * (kind == 2 ? 2 : 1);
      a.strides[size_t(d)] = stride;
      extent += (L.shape[size_t(d)] - 1) * stride;
      running = stride * L.shape[size_t(d)];
    }
    a.offset = rnd(3);
    a.bytes.assign(size_t(a.offset + extent + 1) * dtype_size(dt), 0);
    size_t n = a.bytes.size() / dtype_size(dt);
    for (size_t i = 0; i < n; ++i) {
      double v = dt == DType::F32 || dt == DType::F64 ? std::uniform_real_distribution<double>(-2, 2)(rng)
                 : dt == DType::Bool                   ? double(rnd(2))
                 : dt == DType::U8                     ? double(rnd(256))
                                                       : double(rnd(2001) - 1000);
      put(a.bytes, dt, i, v);
    }
    return a;
  }
  Val load(DType dt) {
    int arg = b.add_arg(dt);
    L.args.push_back(view(dt, false));
    return b.load(arg);
  }
  void store(Val v, DType storage, bool exact) {
    int arg = b.add_arg(storage);
    L.args.push_back(view(storage, true));
    b.store(arg, v);
    outs.push_back({arg, storage, exact});
  }

  // Bounded float chain: every step keeps values within a few units, so rounding differences
  // of the math libraries stay at the level of a few ulps.
  Val chain(Val t, Val y, int steps) {
    for (int i = 0; i < steps; ++i) {
      switch (rnd(14)) {
        case 0: t = kir::tanh(t); break;
        case 1: t = kir::erf(t); break;
        case 2: t = kir::sin(t) * 2.0; break;
        case 3: t = kir::cos(t) + t * 0.5; break;
        case 4: t = kir::exp(kir::tanh(t)); break;
        case 5: t = kir::log(1.0 + kir::abs(t)); break;
        case 6: t = kir::sqrt(kir::abs(t)) - 0.5; break;
        case 7: t = 1.0 / (1.0 + kir::exp(-t)); break;  // sigmoid
        case 8: t = kir::max(t, y) - kir::min(t * 0.5, y); break;
        case 9: t = t * y / (1.5 + kir::abs(y)); break;
        case 10: t = -kir::abs(t) + 1.0; break;
        case 11: t = kir::tanh(t - y) * 3.0; break;
        case 12: t = kir::floor(y * 4.0) + kir::ceil(y * 2.0) * 0.25 + t * 0.125; break;
        default: t = kir::pow(kir::abs(t) + 0.5, y * 0.5) - 1.0; break;
      }
    }
    return t;
  }

  void generate() {
    shape();
    const DType F = rnd(2) ? DType::F32 : DType::F64;
    const DType I = rnd(2) ? DType::I32 : DType::I64;
    Val x = load(F), y = load(F), k = load(I), m = load(rnd(2) ? DType::U8 : DType::Bool);
    Val c = kir::lt(x, y);  // on loaded values: exact
    Val s = kir::select(c, x, y);
    Val t = chain(s, y, 3 + rnd(6));
    Val ki = kir::max(k * b.constant_int(3, I) + b.cast(m, I), -k);
    store(t + b.cast(k, F) * 0.001, F, false);
    store(ki, I, true);
    store(kir::logical_and(c, kir::ne(m, b.constant_int(0, m.dtype))), DType::Bool, true);
    store(b.cast(b.cast(x * 100.0, I), DType::U8), DType::U8, true);                // f -> int -> u8 wraps
    store(b.cast(s, F == DType::F32 ? DType::F64 : DType::F32), F == DType::F32 ? DType::F64 : DType::F32, true);
    store(b.cast(k, F) / 7.0, F == DType::F32 ? DType::F64 : DType::F32, true);     // store converts
    Val it = b.iota(0);
    store(b.rand_uniform(it, rng(), rnd(3), F) + b.cast(it, F), F, true);
    store(b.cast(b.cast(y, DType::Bool), I) + b.cast(kir::logical_not(c), I), DType::I32, true);
  }
};

// A 1-D launch over n points of dtype dt: argument 0 the output (zeros), argument 1 the input
// with value(i) at point i, both contiguous.
// A zeroed contiguous 1-D argument of n elements.
HArg dense_arg(DType dt, int64_t n) {
  HArg a;
  a.dtype = dt;
  a.strides = {1};
  a.bytes.assign(size_t(n) * dtype_size(dt), 0);
  return a;
}

HLaunch unary_launch(DType dt, int64_t n, const std::function<double(int64_t)>& value) {
  HLaunch h;
  h.outer_rank = 1;
  h.shape = {n};
  HArg o, a;
  o.dtype = a.dtype = dt;
  o.strides = a.strides = {1};
  o.bytes.assign(size_t(n) * dtype_size(dt), 0);
  a.bytes.assign(size_t(n) * dtype_size(dt), 0);
  for (int64_t i = 0; i < n; ++i) put(a.bytes, dt, size_t(i), value(i));
  h.args = {o, a};
  return h;
}

class CpuTier1Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!compiler_present()) GTEST_SKIP() << "no C++ compiler on PATH";
  }
};

TEST_F(CpuTier1Test, RandomProgramsMatchTier0AndReference) {
  Tier1Scope scope(1);
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    Gen g(seed * 104729);
    g.generate();
    std::string ctx = "seed " + std::to_string(seed) + "\n" + kir::to_string(g.b.program("t"));
    std::string e0, e1, er;
    set_tier(0);
    auto t0 = run_fresh(cpu_backend(), g.b, g.L, &e0);
    set_tier(1);
    Stats before = stats();
    auto t1 = run_fresh(cpu_backend(), g.b, g.L, &e1);
    Stats after = stats();
    auto ref = run_fresh(reference_backend(), g.b, g.L, &er);
    ASSERT_TRUE(e0.empty() && e1.empty() && er.empty()) << e0 << e1 << er << ctx;
    ASSERT_EQ(after.launches, before.launches + 1) << "did not run on tier 1\n" << ctx;
    for (const auto& o : g.outs) {
      EXPECT_TRUE(agree(t1[size_t(o.arg)], t0[size_t(o.arg)], o.dt, o.exact)) << "tier 1 vs 0, arg " << o.arg << "\n" << ctx;
      EXPECT_TRUE(agree(t1[size_t(o.arg)], ref[size_t(o.arg)], o.dt, o.exact)) << "tier 1 vs reference, arg " << o.arg << "\n" << ctx;
    }
  }
}

// Streaming stores (emit_c.h: outputs written from a chunk buffer with non-temporal stores),
// forced on whatever the size: the same bytes as plain stores and as the reference, with an output
// that starts off its vector alignment, chunk and block tails, NaN and inf among the inputs, and
// several outputs; an in-place program (its stored argument is also loaded) keeps plain stores.
TEST_F(CpuTier1Test, StreamingStoresMatchPlainStoresAndReference) {
  Tier1Scope scope(1);
  for (int64_t n : {1, 3, 17, 1000, 16385, 40001}) {
    SCOPED_TRACE(n);
    for (bool in_place : {false, true}) {
      kir::Builder b;
      int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32), pos = b.add_arg(DType::I64);
      int wide = b.add_arg(DType::F64);
      Val i = b.iota(pos);
      Val x = b.load(in);
      b.store(in_place ? in : out, x * 3.0 + b.cast(i, DType::F32) * 0.5);
      b.store(wide, b.cast(x, DType::F64) - 1.0);
      HLaunch h = unary_launch(DType::F32, n, [](int64_t k) {
        return k % 7 == 3 ? std::nan("") : k % 11 == 5 ? (k % 2 ? INFINITY : -INFINITY) : k % 13 == 1 ? -0.0 : double(k % 101) - 50;
      });
      h.args[0].offset = 1;  // the output one element past its buffer's (aligned) start
      h.args[0].bytes.assign(size_t(n + 1) * 4, 0);
      h.args.push_back(dense_arg(DType::I64, n));
      h.args.push_back(dense_arg(DType::F64, n));
      std::string e0, e1, er;
      std::vector<std::vector<uint8_t>> plain, streaming;
      int64_t streamed = 0;
      {
        StreamScope never(-1);
        plain = run_fresh(cpu_backend(), b, h, &e0);
      }
      {
        StreamScope always(0);
        const int64_t before = streamed_launches(), launches = stats().launches;
        streaming = run_fresh(cpu_backend(), b, h, &e1);
        streamed = streamed_launches() - before;
        ASSERT_EQ(stats().launches, launches + 1) << "did not run on tier 1";
      }
      auto ref = run_fresh(reference_backend(), b, h, &er);
      ASSERT_TRUE(e0.empty() && e1.empty() && er.empty()) << e0 << e1 << er;
      // Asked for (the in-place kernel runs its plain loop); a single point is not a contiguous row.
      EXPECT_EQ(streamed, n > 1 ? 1 : 0);
      for (int a : {out, in, wide}) {
        EXPECT_EQ(streaming[size_t(a)], plain[size_t(a)]) << "arg " << a << (in_place ? " in place" : "");
        EXPECT_EQ(streaming[size_t(a)], ref[size_t(a)]) << "arg " << a << (in_place ? " in place" : "");
      }
    }
  }
}

// Large launches split over threads and blocks; an argmax stays on tier 0.
TEST_F(CpuTier1Test, LargeLaunchAndFallbacks) {
  Tier1Scope scope(1);
  kir::Builder b;
  int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32);
  Val x = b.load(in);
  b.store(out, x * 0.5 * (1.0 + kir::erf(x * 0.7071067811865476)));
  const int64_t n = 300000;
  HLaunch h = unary_launch(DType::F32, n, [&](int64_t i) { return -6.0 + 12.0 * double(i) / double(n); });
  Stats s0 = stats();
  std::string err;
  auto t1 = run_fresh(cpu_backend(), b, h, &err);
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(stats().launches, s0.launches + 1);
  auto ref = run_fresh(reference_backend(), b, h, &err);
  EXPECT_TRUE(agree(t1[0], ref[0], DType::F32, false));

  // A gather is not rendered: it runs on tier 0 and compiles nothing.
  kir::Builder r;
  int ro = r.add_arg(DType::F32), ri = r.add_arg(DType::F32), rx = r.add_arg(DType::I64);
  r.store(ro, r.load_gather(ri, r.load(rx)));
  Stats s1 = stats();
  ember_kir_program prog = r.program("gather");
  ember_program p = nullptr;
  ember_status st{};
  ASSERT_EQ(cpu_backend().table().program_create(0, &prog, &p, &st), EMBER_OK) << st.message;
  cpu_backend().table().program_destroy(p);
  Stats s2 = stats();
  EXPECT_EQ(s2.compiles + s2.cache_hits + s2.failures, s1.compiles + s1.cache_hits + s1.failures);
}

// Runs y = op(x) on tier 1 over `xs` plus about a million points spread over [lo, hi) by bit
// pattern, both signs (appended to xs); fails if it did not run on tier 1.
void run_unary_f32_on_tier1(Val (*op)(Val), float lo, float hi, std::vector<float>& xs, std::vector<float>& y) {
  kir::Builder b;
  int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32);
  b.store(out, op(b.load(in)));
  const uint32_t ulo = std::bit_cast<uint32_t>(lo), uhi = std::bit_cast<uint32_t>(hi);
  for (uint32_t u = ulo; u < uhi; u += 1 + (uhi - ulo) / 500000) {
    xs.push_back(std::bit_cast<float>(u));
    xs.push_back(-std::bit_cast<float>(u));
  }
  HLaunch h = unary_launch(DType::F32, int64_t(xs.size()), [&](int64_t i) { return double(xs[size_t(i)]); });
  Stats s0 = stats();
  std::string err;
  auto got = run_fresh(cpu_backend(), b, h, &err);
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_EQ(stats().launches, s0.launches + 1) << "did not run on tier 1";
  y.resize(xs.size());
  std::memcpy(y.data(), got[0].data(), y.size() * sizeof(float));
}

// Distance in representable floats (monotone ordering of the bit patterns).
int64_t ordinal(float v) {
  int32_t i = std::bit_cast<int32_t>(v);
  return i < 0 ? int64_t(INT32_MIN) - int64_t(i) : int64_t(i);
}

// f32 exp on tier 1 is the prelude's own (e_expf; exhaustively within 1 ulp when written): here
// a million inputs over the whole range where exp is neither 0 nor inf nor 1 (subnormal results
// included), both overflow and underflow edges, and the special values: within 1 ulp of exp
// computed in f64 and rounded.
TEST_F(CpuTier1Test, Exp32IsWithinOneUlp) {
  Tier1Scope scope(1);
  std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 88.7228f, 88.72284f,
                           88.7229f, 89.0f, 89.1f, 1000.0f, -87.33655f, -103.97f, -103.98f, -104.0f, -104.1f,
                           -1000.0f, 3e38f, -3e38f, 1.0f, -1.0f, 0x1p-24f};
  std::vector<float> y;
  run_unary_f32_on_tier1([](Val v) { return kir::exp(v); }, 0x1p-26f, 105.0f, xs, y);
  if (HasFatalFailure()) return;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    const float truth = float(std::exp(double(xs[i])));
    ASSERT_LE(std::llabs(ordinal(y[i]) - ordinal(truth)), 1) << "exp(" << xs[i] << ") = " << y[i] << ", expected " << truth;
  }
  EXPECT_EQ(y[2], INFINITY);
  EXPECT_EQ(y[3], 0.0f);
}

// f32 erf on tier 1 is the prelude's own polynomial (e_erff, tools/fit_erf.py), checked over
// all 2^32 inputs when it was fitted; here a million inputs spread over every binade from 2^-30
// to 2^3 (both signs) and the special values: within 1 ulp of erf computed in f64 and rounded,
// and within 6e-8 absolute where GELU's 1 + erf(x) cancels.
TEST_F(CpuTier1Test, Erf32IsWithinOneUlp) {
  Tier1Scope scope(1);
  std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 1e-30f, 3.92f, 3.93f, 4.0f,
                           5.0f, 100.0f, -100.0f, 3e38f, -3e38f, 1.0f, -1.0f, std::nextafter(1.0f, 0.0f)};
  std::vector<float> y;
  run_unary_f32_on_tier1([](Val v) { return kir::erf(v); }, 0x1p-30f, 4.5f, xs, y);
  if (HasFatalFailure()) return;
  int64_t worst_ulp = 0;
  double worst_abs = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double truth = std::erf(double(xs[i]));
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(y[i]));
      continue;
    }
    const int64_t d = std::llabs(ordinal(y[i]) - ordinal(float(truth)));
    ASSERT_LE(d, 1) << "erf(" << xs[i] << ") = " << y[i] << ", expected " << float(truth);
    worst_ulp = std::max(worst_ulp, d);
    const double ax = std::fabs(double(xs[i]));
    if (ax >= 0.5 && ax <= 4) worst_abs = std::max(worst_abs, std::fabs(double(y[i]) - truth));
  }
  EXPECT_LE(worst_abs, 6e-8);
  EXPECT_EQ(std::signbit(y[1]), true);  // erf(-0) = -0
  EXPECT_EQ(y[2], 1.0f);
  EXPECT_EQ(y[3], -1.0f);
}

// The interpreter (tier 0, also the contraction epilogues' GELU) computes f32 erf with the same
// polynomial as tier 1, operation for operation: the same bits on the same million inputs and
// special values (on a target without FMA, or built with clang, it falls back to erf in f64,
// rounded: then within 1 ulp).
TEST_F(CpuTier1Test, Erf32OnTheInterpreterMatchesTier1BitForBit) {
  Tier1Scope scope(1);
  std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 3.92f, 3.93f, 4.0f, 100.0f,
                           -3e38f, 1.0f, -1.0f, std::nextafter(1.0f, 0.0f), -std::nextafter(1.0f, 0.0f)};
  std::vector<float> tier1;
  run_unary_f32_on_tier1([](Val v) { return kir::erf(v); }, 0x1p-30f, 4.5f, xs, tier1);
  if (HasFatalFailure()) return;
  kir::Builder b;
  int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32);
  b.store(out, kir::erf(b.load(in)));
  HLaunch h = unary_launch(DType::F32, int64_t(xs.size()), [&](int64_t i) { return double(xs[size_t(i)]); });
  set_tier(0);
  Stats s0 = stats();
  std::string err;
  auto got = run_fresh(cpu_backend(), b, h, &err);
  ASSERT_TRUE(err.empty()) << err;
  ASSERT_EQ(stats().launches, s0.launches) << "ran on tier 1, not on the interpreter";
  std::vector<float> tier0(xs.size());
  std::memcpy(tier0.data(), got[0].data(), tier0.size() * sizeof(float));
#if defined(__clang__)
  const int64_t allowed = 1;
#else
  const int64_t allowed = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 0 : 1;
#endif
  for (size_t i = 0; i < xs.size(); ++i) {
    if (std::isnan(xs[i])) {
      EXPECT_TRUE(std::isnan(tier0[i]));
      continue;
    }
    ASSERT_LE(std::llabs(ordinal(tier0[i]) - ordinal(tier1[i])), allowed)
        << "erf(" << xs[i] << "): interpreter " << tier0[i] << ", tier 1 " << tier1[i];
  }
  EXPECT_EQ(std::signbit(tier0[1]), true);  // erf(-0) = -0
  EXPECT_EQ(tier0[2], 1.0f);
  EXPECT_EQ(tier0[3], -1.0f);
}

// f16/bf16 arguments on tier 1: loads, stores and rounding casts are the core's conversions bit
// for bit (every f16 and bf16 bit pattern to f32, NaN payloads included; f32 to f16/bf16 over
// every binade, ties, subnormals, overflow and NaN).
TEST_F(CpuTier1Test, HalfConversionsMatchTheCore) {
  Tier1Scope scope(1);
  for (DType half : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_name(half));
    // Every 16-bit pattern -> f32.
    {
      kir::Builder b;
      int out = b.add_arg(DType::F32), in = b.add_arg(half);
      b.store(out, b.cast(b.load(in), DType::F32));
      HLaunch h;
      h.outer_rank = 1;
      h.shape = {65536};
      HArg o, a;
      o.dtype = DType::F32;
      a.dtype = half;
      o.strides = a.strides = {1};
      o.bytes.assign(65536 * 4, 0);
      a.bytes.resize(65536 * 2);
      for (uint32_t u = 0; u < 65536; ++u) {
        uint16_t v = uint16_t(u);
        std::memcpy(a.bytes.data() + 2 * u, &v, 2);
      }
      h.args = {o, a};
      Stats s0 = stats();
      std::string err;
      auto got = run_fresh(cpu_backend(), b, h, &err);
      ASSERT_TRUE(err.empty()) << err;
      ASSERT_EQ(stats().launches, s0.launches + 1) << "did not run on tier 1";
      for (uint32_t u = 0; u < 65536; ++u) {
        float want = half == DType::F16 ? half_to_float(uint16_t(u)) : bf16_to_float(uint16_t(u));
        uint32_t g;
        std::memcpy(&g, got[0].data() + 4 * u, 4);
        ASSERT_EQ(g, std::bit_cast<uint32_t>(want)) << "pattern " << u;
      }
    }
    // f32 -> f16/bf16: a rounding CAST, then the store.
    {
      std::vector<float> xs = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 65504.0f, 65519.0f, 65520.0f,
                               1e-8f, 2.98e-8f, 5.96e-8f, 6.1e-5f, 3e38f};
      for (uint32_t u = 0; u < 0x7f800000u; u += 997) {
        xs.push_back(std::bit_cast<float>(u));
        xs.push_back(-std::bit_cast<float>(u | 0x1000u));  // ties of f16's last place
        xs.push_back(std::bit_cast<float>(u | 0x8000u));   // ties of bf16's last place
      }
      xs.push_back(std::bit_cast<float>(0x7fa00001u));  // a signalling NaN with a payload
      kir::Builder b;
      int out = b.add_arg(half), in = b.add_arg(DType::F32);
      b.store(out, b.cast(b.load(in), half));
      HLaunch h = unary_launch(DType::F32, int64_t(xs.size()), [&](int64_t i) { return double(xs[size_t(i)]); });
      h.args[0].dtype = half;
      h.args[0].bytes.assign(xs.size() * 2, 0);
      // unary_launch writes doubles through put(); NaN payloads need the exact bits.
      std::memcpy(h.args[1].bytes.data(), xs.data(), xs.size() * 4);
      Stats s0 = stats();
      std::string err;
      auto got = run_fresh(cpu_backend(), b, h, &err);
      ASSERT_TRUE(err.empty()) << err;
      ASSERT_EQ(stats().launches, s0.launches + 1) << "did not run on tier 1";
      for (size_t i = 0; i < xs.size(); ++i) {
        uint16_t want = half == DType::F16 ? float_to_half(xs[i]) : float_to_bf16(xs[i]);
        uint16_t g;
        std::memcpy(&g, got[0].data() + 2 * i, 2);
        ASSERT_EQ(g, want) << "x = " << xs[i] << " (bits " << std::hex << std::bit_cast<uint32_t>(xs[i]) << ")";
      }
    }
  }
}

// Runs `h` on tier 0, on tier 1 (it must run there) and on the reference backend; the first
// n_outputs arguments must agree bit for bit.
void expect_tier1_bits_match(kir::Builder& b, const HLaunch& h, int n_outputs) {
  std::string e0, e1, er;
  set_tier(0);
  auto t0 = run_fresh(cpu_backend(), b, h, &e0);
  set_tier(1);
  Stats s0 = stats();
  auto t1 = run_fresh(cpu_backend(), b, h, &e1);
  ASSERT_EQ(stats().launches, s0.launches + 1) << "did not run on tier 1";
  auto ref = run_fresh(reference_backend(), b, h, &er);
  ASSERT_TRUE(e0.empty() && e1.empty() && er.empty()) << e0 << e1 << er;
  for (int a = 0; a < n_outputs; ++a) {
    EXPECT_EQ(t1[size_t(a)], t0[size_t(a)]) << "tier 1 vs 0, argument " << a;
    EXPECT_EQ(t1[size_t(a)], ref[size_t(a)]) << "tier 1 vs reference, argument " << a;
  }
}

// A program over f16 and bf16 tensors (computed in f32, rounded after each op as the lowering
// emits it) gives the same bits on tier 1, tier 0 and the reference backend.
TEST_F(CpuTier1Test, HalfProgramsMatchTier0AndReference) {
  Tier1Scope scope(1);
  kir::Builder b;
  int o16 = b.add_arg(DType::F16), ob16 = b.add_arg(DType::BF16), o32 = b.add_arg(DType::F32);
  int a16 = b.add_arg(DType::F16), ab16 = b.add_arg(DType::BF16);
  Val x = b.cast(b.load(a16), DType::F32), y = b.cast(b.load(ab16), DType::F32);
  Val r16 = b.round_to_dtype(b.cast(x * 2.5 + y, DType::F16));
  Val rb = b.round_to_dtype(b.cast(kir::select(kir::lt(x, y), x, y * 0.75), DType::BF16));
  b.store(o16, r16);
  b.store(ob16, rb);
  b.store(o32, b.cast(r16, DType::F32) + b.cast(rb, DType::F32));
  const int64_t n = 20000;
  HLaunch h;
  h.outer_rank = 1;
  h.shape = {n};
  for (DType dt : {DType::F16, DType::BF16, DType::F32, DType::F16, DType::BF16}) {
    HArg a;
    a.dtype = dt;
    a.strides = {1};
    a.bytes.assign(size_t(n) * dtype_size(dt), 0);
    h.args.push_back(a);
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = float(std::sin(double(i) * 0.37) * std::pow(10.0, double(i % 9) - 4));
    const uint16_t hv = float_to_half(v), bv = float_to_bf16(-v * 1.5f);
    std::memcpy(h.args[3].bytes.data() + 2 * i, &hv, 2);
    std::memcpy(h.args[4].bytes.data() + 2 * i, &bv, 2);
  }
  expect_tier1_bits_match(b, h, 3);
}

// Rows whose loaded arguments are contiguous or hold one value per row (stride 0 along the row:
// a per-channel scale over NCHW pixels) run the chunked loop with splats (emit_c.cpp, contiguous
// == 2): rows of 1 to 300 points (chunks of 128 and a remainder, odd and even), f32 and f16
// per-row values, NaN/inf/-0 among them, an argument read both ways, and an IOTA: bit for bit
// the values of tier 0 and of the reference backend.
TEST_F(CpuTier1Test, RowsWithPerRowValuesMatchTier0AndReference) {
  Tier1Scope scope(1);
  kir::Builder b;
  int out = b.add_arg(DType::F32), out16 = b.add_arg(DType::F16);
  int x = b.add_arg(DType::F32), scale = b.add_arg(DType::F32), shift = b.add_arg(DType::F16), cnt = b.add_arg(DType::F32);
  Val xv = b.load(x), sv = b.load(scale), hv = b.cast(b.load(shift), DType::F32);
  Val y = xv * sv + hv + b.cast(b.iota(cnt), DType::F32) * 0.001;
  b.store(out, y);
  b.store(out16, b.round_to_dtype(b.cast(y * 0.5, DType::F16)));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t row : {1, 2, 127, 128, 129, 257, 300}) {
    SCOPED_TRACE("row " + std::to_string(row));
    const int64_t rows = 6;
    HLaunch h;
    h.outer_rank = 2;
    h.shape = {rows, row};
    auto arg = [&](DType dt, std::vector<int64_t> strides, int64_t elems) {
      HArg a;
      a.dtype = dt;
      a.strides = std::move(strides);
      a.bytes.assign(size_t(elems) * dtype_size(dt), 0);
      return a;
    };
    h.args = {arg(DType::F32, {row, 1}, rows * row), arg(DType::F16, {row, 1}, rows * row),
              arg(DType::F32, {row, 1}, rows * row), arg(DType::F32, {1, 0}, rows),
              arg(DType::F16, {1, 0}, rows), arg(DType::F32, {row, 1}, rows * row)};
    for (int64_t i = 0; i < rows * row; ++i) put(h.args[2].bytes, DType::F32, size_t(i), std::sin(0.37 * double(i)) * 3);
    const float scales[] = {1.5f, -0.0f, inf, nan, 0.25f, -2.0f}, shifts[] = {0.5f, -0.0f, 1.0f, 2.0f, -inf, nan};
    for (int64_t r = 0; r < rows; ++r) {
      put(h.args[3].bytes, DType::F32, size_t(r), scales[r]);
      put(h.args[4].bytes, DType::F16, size_t(r), shifts[r]);
    }
    expect_tier1_bits_match(b, h, 2);
    if (HasFatalFailure()) return;
  }
}

// Contiguous blocks compute two points half a block apart per iteration, plus the last point
// of an odd block: every size from 1 point to several blocks (odd and even) gives the reference
// backend's values at every index (loads, IOTA and counter-based random numbers included).
TEST_F(CpuTier1Test, InterleavedBlocksCoverEveryPoint) {
  Tier1Scope scope(1);
  for (int64_t n : {1, 2, 3, 17, 16384, 16385, 40001}) {
    SCOPED_TRACE(n);
    kir::Builder b;
    int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32), pos = b.add_arg(DType::I64);
    int rnd = b.add_arg(DType::F32);
    Val i = b.iota(pos);
    b.store(out, b.load(in) * 3.0 + b.cast(i, DType::F32) * 0.5);
    b.store(rnd, b.rand_uniform(i, 1234, 0, DType::F32));
    HLaunch h = unary_launch(DType::F32, n, [](int64_t k) { return double(k % 101) - 50; });
    h.args.push_back(dense_arg(DType::I64, n));
    h.args.push_back(dense_arg(DType::F32, n));
    Stats s0 = stats();
    std::string e1, er;
    auto t1 = run_fresh(cpu_backend(), b, h, &e1);
    ASSERT_EQ(stats().launches, s0.launches + 1) << "did not run on tier 1";
    auto ref = run_fresh(reference_backend(), b, h, &er);
    ASSERT_TRUE(e1.empty() && er.empty()) << e1 << er;
    EXPECT_EQ(t1[0], ref[0]);
    EXPECT_EQ(t1[3], ref[3]);
  }
}

// The same program compiled twice: the second time the kernel comes from the disk cache.
TEST_F(CpuTier1Test, DiskCacheIsReused) {
  Tier1Scope scope(1);
  kir::Builder b;
  int out = b.add_arg(DType::F64), in = b.add_arg(DType::F64);
  b.store(out, kir::tanh(b.load(in)) * 3.0 + 0.25);
  HLaunch h = unary_launch(DType::F64, 100, [](int64_t i) { return double(i) * 0.03 - 1.5; });
  Stats s0 = stats();
  std::string err;
  auto first = run_fresh(cpu_backend(), b, h, &err);
  Stats s1 = stats();
  auto second = run_fresh(cpu_backend(), b, h, &err);
  Stats s2 = stats();
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(s1.compiles, s0.compiles + 1);
  EXPECT_EQ(s2.compiles, s1.compiles);
  EXPECT_EQ(s2.cache_hits, s1.cache_hits + 1);
  EXPECT_EQ(s2.launches, s0.launches + 2);
  EXPECT_EQ(first, second);
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(scope.dir()))
    if (e.path().filename().string().rfind("cpu-", 0) == 0 && e.path().extension() == ".bin") entries.push_back(e.path());
  ASSERT_EQ(entries.size(), 1u) << "one entry in the core's program cache";

  // A damaged entry (a byte of the shared object flipped) is compiled again and replaced.
  std::ifstream file(entries[0], std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  file.close();
  std::string damaged = whole;
  damaged[damaged.size() / 2] ^= 0x20;
  std::ofstream(entries[0], std::ios::binary | std::ios::trunc) << damaged;
  auto third = run_fresh(cpu_backend(), b, h, &err);
  Stats s3 = stats();
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(s3.compiles, s2.compiles + 1) << "the damaged entry was used";
  EXPECT_EQ(s3.cache_hits, s2.cache_hits);
  EXPECT_EQ(third, first);
  std::ifstream again(entries[0], std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>()), whole)
      << "the entry was not replaced";
}

// Without a compiler (EMBER_CXX names none) programs run on tier 0 with the right results.
TEST_F(CpuTier1Test, MissingCompilerStaysOnTier0) {
  Tier1Scope scope(1, "/nonexistent/c++");
  kir::Builder b;
  int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32);
  b.store(out, kir::exp(b.load(in)) - 1.0);
  HLaunch h = unary_launch(DType::F32, 50, [](int64_t i) { return double(i) * 0.1 - 2.5; });
  Stats s0 = stats();
  std::string err;
  auto got = run_fresh(cpu_backend(), b, h, &err);
  Stats s1 = stats();
  ASSERT_TRUE(err.empty()) << err;
  EXPECT_EQ(s1.failures, s0.failures + 1);
  EXPECT_EQ(s1.launches, s0.launches);  // ran on tier 0
  auto ref = run_fresh(reference_backend(), b, h, &err);
  EXPECT_TRUE(agree(got[0], ref[0], DType::F32, false));
}

// Elementwise ops through the public API (the scheduler fuses each expression into one kernel) on
// a transposed and a broadcast input: tier 1 on the CPU against the reference backend.
TEST_F(CpuTier1Test, FusedOpsThroughTheApiMatchReference) {
  Tier1Scope scope(1);
  const Stats s0 = stats();
  auto compute = [](Device dev) {
    std::vector<float> xv(64 * 48), bv(48);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(int(i * 37 % 1001) - 500) / 125.0f;
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = float(i) / 24.0f - 1.0f;
    Array x = transpose(from_vector(xv, {48, 64}, dev), 0, 1);  // [64, 48], strided
    Array b = from_vector(bv, {48}, dev);                       // broadcast over rows
    // GELU from primitives, a where over a comparison, a sigmoid and an f64 cast of the sum.
    Array g = mul(mul(x, 0.5), add(erf(div(x, 1.4142135623730951)), 1.0));
    Array y = add(where(gt(x, b), tanh(x), sub(exp(x), 1.0)), sigmoid(mul(g, b)));
    return std::vector<std::vector<double>>{g.to_vector<double>(), cast(y, DType::F64).to_vector<double>()};
  };
  auto got = compute(Device::cpu()), want = compute(Device::reference());
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size());
    for (size_t i = 0; i < got[k].size(); ++i)
      ASSERT_NEAR(got[k][i], want[k][i], 2e-6 * (1 + std::fabs(want[k][i]))) << "output " << k << " element " << i;
  }
  EXPECT_GT(stats().launches, s0.launches);
}

// The integer dtypes held in wider registers (i8/i16/u16 in i32, u32 in i64) and u64's unsigned
// semantics in compiled kernels: fused chains, casts, compares and reductions give the
// reference's bytes exactly.
TEST_F(CpuTier1Test, NarrowAndUnsignedIntegersMatchReference) {
  Tier1Scope scope(1);
  const Stats s0 = stats();
  auto compute = [](Device dev) {
    std::vector<Array> outs;
    std::vector<int8_t> i8v;
    std::vector<uint16_t> u16v;
    std::vector<uint32_t> u32v;
    std::vector<uint64_t> u64v;
    std::vector<double> fv;
    for (int i = 0; i < 300; ++i) {
      i8v.push_back(int8_t(i * 37));
      u16v.push_back(uint16_t(i * 4099));
      u32v.push_back(uint32_t(i) * 2654435761u);
      u64v.push_back(uint64_t(i) * 0x9E3779B97F4A7C15ull);
      fv.push_back((i - 150) * 1.0e17 + (i % 7) * 0.37);  // beyond every integer range, and small values
    }
    Array a8 = from_vector(i8v, {300}, dev), a16 = from_vector(u16v, {300}, dev);
    Array a32 = from_vector(u32v, {300}, dev), a64 = from_vector(u64v, {300}, dev);
    Array f = from_vector(fv, {300}, dev);
    outs.push_back(mul(add(a8, a8), a8));                         // i8 wraps after each op
    outs.push_back(sub(mul(a16, 3), a16));                        // u16
    outs.push_back(add(mul(a32, a32), 7));                        // u32 products beyond 2^32
    outs.push_back(where(gt(a64, mul(a64, 3)), a64, maximum(a64, sub(a64, 1))));  // u64 compares
    outs.push_back(cast(a64, DType::F64));                        // u64 -> f64 above 2^63
    outs.push_back(cast(f, DType::U64));                          // f64 -> u64 out of range
    outs.push_back(cast(f, DType::U32));
    outs.push_back(cast(div(f, 1e15), DType::I8));
    outs.push_back(sum(reshape(a64, {30, 10}), {1}));             // u64 sums wrap
    outs.push_back(max(reshape(a64, {30, 10}), {1}));             // unsigned max
    outs.push_back(min(reshape(a32, {30, 10}), {1}));
    outs.push_back(sum(reshape(a16, {30, 10}), {1}));             // -> i64
    std::vector<std::vector<uint8_t>> bytes;
    for (const Array& o : outs) bytes.push_back(o.to_bytes());
    return bytes;
  };
  auto got = compute(Device::cpu()), want = compute(Device::reference());
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], want[k]) << "output " << k;
  EXPECT_GE(stats().launches, s0.launches + 12) << "every kernel above runs on tier 1";
}

// Two threads keep running one program while it switches from tier 0 to tier 1 (auto mode, the
// compile in the background): every run gives the same bits (correctly rounded ops only).
TEST_F(CpuTier1Test, ThreadsRunAProgramWhileItSwitches) {
  Tier1Scope scope(2);
  kir::Builder b;
  int o = b.add_arg(DType::F32), in = b.add_arg(DType::F32);
  Val x = b.load(in);
  b.store(o, kir::sqrt(x * x + 1.0) / (x - 3.0) + x * 0.25);
  ember_kir_program prog = b.program("switch");
  ember_program p = nullptr;
  ember_status st{};
  Backend& be = cpu_backend();
  ASSERT_EQ(be.table().program_create(0, &prog, &p, &st), EMBER_OK) << st.message;
  const int64_t n = 40000;
  const size_t N = static_cast<size_t>(n);
  std::vector<float> xv(N), want(N);
  for (int64_t i = 0; i < n; ++i) {
    xv[size_t(i)] = float(i % 997) * 0.01f - 5.0f;
    const float v = xv[size_t(i)];
    want[size_t(i)] = std::sqrt(v * v + 1.0f) / (v - 3.0f) + v * 0.25f;
  }
  const Stats s0 = stats();
  std::atomic<int> bad{0};
  auto worker = [&] {
    auto xb = be.alloc(Device{}, size_t(n) * 4), yb = be.alloc(Device{}, size_t(n) * 4);
    be.write(*xb, 0, xv.data(), size_t(n) * 4);
    ember_kir_arg args[2] = {};
    args[0].buffer = yb->handle;
    args[1].buffer = xb->handle;
    args[0].strides[0] = args[1].strides[0] = 1;
    ember_kir_launch l{};
    l.outer_rank = 1;
    l.shape[0] = n;
    l.n_args = 2;
    l.args = args;
    std::vector<float> y(N);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int after = 0;
    while (after < 20 && std::chrono::steady_clock::now() < deadline) {
      ember_status rs{};
      if (be.table().program_run(be.queue(0), p, &l, 0, &rs) != EMBER_OK) ++bad;
      be.read(*yb, 0, y.data(), size_t(n) * 4);
      if (std::memcmp(y.data(), want.data(), size_t(n) * 4) != 0) ++bad;
      const Stats s = stats();
      if (s.compiles + s.cache_hits + s.failures > s0.compiles + s0.cache_hits + s0.failures) ++after;
    }
  };
  std::thread t1(worker), t2(worker);
  t1.join();
  t2.join();
  be.table().program_destroy(p);
  EXPECT_EQ(bad.load(), 0);
  const Stats s1 = stats();
  EXPECT_EQ(s1.compiles, s0.compiles + 1);  // compiled once, though both threads made it hot
  EXPECT_GT(s1.launches, s0.launches);
}

}  // namespace
}  // namespace ember::testing
