// The CPU backend's SIMD tile interpreter against the scalar reference interpreter: randomly
// generated KIR programs (loads of every dtype through contiguous, broadcast, transposed and
// stepped views, gathers, iota, random numbers, unary/binary/compare/select/cast ops, and
// reductions followed by phase-1 ops) on random iteration shapes, run on both plugins and
// compared: exactly where the result is exactly defined (integers, bools, correctly rounded
// float ops), within a tolerance scaled by a tracked magnitude bound where transcendentals or
// reassociated sums are involved. Also: results independent of the thread count, special
// values, and the error statuses (integer division by zero, gather out of range).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

#include "backend/kir_program_gen.h"

namespace ember::testing {
namespace {

TEST(CpuInterpreter, RandomProgramsMatchReference) {
  Backend& cpu = cpu_backend();
  Backend& ref = reference_backend();
  int failures = 0, big_runs = 0;
  for (uint64_t seed = 1; seed <= 300 && failures < 5; ++seed) {
    ProgramGen g(seed * 7919);
    bool reduction = seed % 3 == 0;
    bool big = seed % 10 == 0;
    g.generate(reduction, big);
    std::string name = "random" + std::to_string(seed);
    std::string err_cpu, err_ref;
    auto want = run_kir(ref, g.b, name, g.L, &err_ref);
    auto got = run_kir(cpu, g.b, name, g.L, &err_cpu);
    std::string context = "seed " + std::to_string(seed) + "\n" + kir::to_string(g.b.program(name)) + g.describe();
    if (err_cpu != err_ref || want.empty()) {
      ADD_FAILURE() << "errors differ: cpu '" << err_cpu << "', reference '" << err_ref << "'\n" << context;
      ++failures;
      continue;
    }
    if (const std::string m = first_output_mismatch(g, got, want); !m.empty()) {
      ADD_FAILURE() << m << "\n" << context;
      ++failures;
    }
    // Large launches run on several threads: the bytes must not depend on the thread count.
    if (g.points >= 32768 && set_omp_threads(1)) {
      ++big_runs;
      auto one = run_kir(cpu, g.b, name, g.L, nullptr);
      set_omp_threads(2);
      auto two = run_kir(cpu, g.b, name, g.L, nullptr);
      EXPECT_TRUE(one == two) << "1 vs 2 threads differ\n" << context;
      EXPECT_TRUE(two == got) << "repeated run differs\n" << context;
    }
  }
  EXPECT_GT(big_runs, 5);
}

// A launch over n points of a 1-D contiguous space with the given args.
HLaunch flat(int64_t n, std::vector<HArg> args) {
  HLaunch h;
  h.outer_rank = 1;
  h.shape = {n};
  h.args = std::move(args);
  return h;
}
HArg vec(DType dt, const std::vector<double>& values) {
  HArg a;
  a.dtype = dt;
  a.bytes.assign(values.size() * dtype_size(dt), 0);
  for (size_t i = 0; i < values.size(); ++i) put(a.bytes, dt, i, values[i]);
  a.strides = {1};
  return a;
}

TEST(CpuInterpreter, SpecialValues) {
  const double inf = INFINITY, nan = NAN;
  std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-40, -1e-40, 1e-30, 88.0, 88.7, 89.0, -87.5, -104.0,
                            -200.0, 1e6, -1e6, 3e9, -3e9, 1e20, 2.147483648e9, -2.147483648e9, 65519.0, 65520.0,
                            inf, -inf, nan, 39000.0, 1e5, 3.14159265, 20.0, -20.0, 5.0, -5.0, 1e-8, 255.5, 256.0};
  const ember_kir_op unary[] = {EMBER_KIR_NEG, EMBER_KIR_ABS, EMBER_KIR_EXP, EMBER_KIR_LOG, EMBER_KIR_SQRT,
                                EMBER_KIR_TANH, EMBER_KIR_ERF, EMBER_KIR_SIN, EMBER_KIR_COS, EMBER_KIR_FLOOR,
                                EMBER_KIR_CEIL};
  for (DType dt : {DType::F32, DType::F64}) {
    for (ember_kir_op op : unary) {
      kir::Builder b;
      int out = b.add_arg(dt), in = b.add_arg(dt);
      b.store(out, b.emit(op, dt, b.load(in)));
      HLaunch h = flat(int64_t(xs.size()), {vec(dt, std::vector<double>(xs.size(), 0)), vec(dt, xs)});
      std::string name = std::string("special_") + kir::op_name(op);
      auto want = run_kir(reference_backend(), b, name, h, nullptr);
      auto got = run_kir(cpu_backend(), b, name, h, nullptr);
      ASSERT_FALSE(got.empty());
      bool exact = op == EMBER_KIR_NEG || op == EMBER_KIR_ABS || op == EMBER_KIR_SQRT || op == EMBER_KIR_FLOOR ||
                   op == EMBER_KIR_CEIL;
      for (size_t i = 0; i < xs.size(); ++i) {
        double g = element(got[0], dt, i), w = element(want[0], dt, i);
        SCOPED_TRACE(std::string(kir::op_name(op)) + " " + std::string(dtype_name(dt)) + " of " + std::to_string(xs[i]));
        if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << g;
        else if (exact || std::isinf(w) || w == 0) EXPECT_EQ(g, w);
        else EXPECT_NEAR(g, w, std::fabs(w) * (dt == DType::F32 ? 1e-6 : 1e-14)) << "got " << g << " want " << w;
      }
    }
    // Casts to every dtype, max/min with NaN.
    for (DType to : kAllTypes) {
      kir::Builder b;
      int out = b.add_arg(to), in = b.add_arg(dt);
      b.store(out, b.cast(b.load(in), to));
      HLaunch h = flat(int64_t(xs.size()), {vec(to, std::vector<double>(xs.size(), 0)), vec(dt, xs)});
      auto want = run_kir(reference_backend(), b, "special_cast", h, nullptr);
      auto got = run_kir(cpu_backend(), b, "special_cast", h, nullptr);
      ASSERT_FALSE(got.empty());
      EXPECT_EQ(got[0], want[0]) << "cast " << dtype_name(dt) << " -> " << dtype_name(to);
    }
    for (ember_kir_op op : {EMBER_KIR_MAX, EMBER_KIR_MIN}) {
      kir::Builder b;
      int out = b.add_arg(dt), x = b.add_arg(dt), y = b.add_arg(dt);
      b.store(out, b.emit(op, dt, b.load(x), b.load(y)));
      std::vector<double> ys(xs.rbegin(), xs.rend());
      HLaunch h = flat(int64_t(xs.size()), {vec(dt, std::vector<double>(xs.size(), 0)), vec(dt, xs), vec(dt, ys)});
      auto want = run_kir(reference_backend(), b, "special_minmax", h, nullptr);
      auto got = run_kir(cpu_backend(), b, "special_minmax", h, nullptr);
      ASSERT_FALSE(got.empty());
      for (size_t i = 0; i < xs.size(); ++i) {
        double g = element(got[0], dt, i), w = element(want[0], dt, i);
        if (std::isnan(w)) EXPECT_TRUE(std::isnan(g)) << i;
        else EXPECT_EQ(g, w) << i;
      }
    }
  }
}

TEST(CpuInterpreter, ArgmaxFirstIndexAndNaN) {
  // Long contiguous rows (reduce-vectorized path) with ties spread over lanes and NaNs.
  for (int64_t len : {7, 300, 1000, 5000}) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<double> x(size_t(len * 3));
      for (size_t i = 0; i < x.size(); ++i) x[i] = double((i * 37) % 11);
      if (variant == 1) x[size_t(len / 2)] = NAN, x[size_t(len - 1)] = NAN;
      if (variant == 2) std::fill(x.begin(), x.end(), 3.0);
      if (variant == 3) x[size_t(2 * len + len / 3)] = NAN;
      for (ember_kir_op op : {EMBER_KIR_ACC_ARGMAX, EMBER_KIR_ACC_ARGMIN}) {
        kir::Builder b;
        int out = b.add_arg(DType::I64), in = b.add_arg(DType::F32);
        Val v = b.load(in);
        Val r = op == EMBER_KIR_ACC_ARGMAX ? b.acc_argmax(v) : b.acc_argmin(v);
        b.phase = 1;
        b.store(out, r);
        HLaunch h;
        h.outer_rank = 1;
        h.reduce_rank = 1;
        h.shape = {3, len};
        HArg o = vec(DType::I64, {0, 0, 0});
        o.strides = {1, 0};
        HArg i = vec(DType::F32, x);
        i.strides = {len, 1};
        h.args = {o, i};
        auto want = run_kir(reference_backend(), b, "argmax", h, nullptr);
        auto got = run_kir(cpu_backend(), b, "argmax", h, nullptr);
        ASSERT_FALSE(got.empty());
        EXPECT_EQ(got[0], want[0]) << "len " << len << " variant " << variant;
      }
    }
  }
}

TEST(CpuInterpreter, EmptyReductionGivesIdentity) {
  for (ember_kir_op op : {EMBER_KIR_ACC_SUM, EMBER_KIR_ACC_PROD}) {
    kir::Builder b;
    int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32);
    Val v = b.load(in);
    Val r = op == EMBER_KIR_ACC_SUM ? b.acc_sum(v) : b.acc_prod(v);
    b.phase = 1;
    b.store(out, r);
    HLaunch h;
    h.outer_rank = 1;
    h.reduce_rank = 1;
    h.shape = {4, 0};
    HArg o = vec(DType::F32, {7, 7, 7, 7});
    o.strides = {1, 0};
    HArg i = vec(DType::F32, {0});
    i.strides = {0, 1};
    h.args = {o, i};
    auto got = run_kir(cpu_backend(), b, "empty", h, nullptr);
    ASSERT_FALSE(got.empty());
    for (size_t k = 0; k < 4; ++k) EXPECT_EQ(element(got[0], DType::F32, k), op == EMBER_KIR_ACC_SUM ? 0.0 : 1.0);
  }
}

TEST(CpuInterpreter, IntegerDivisionByZeroIsAnError) {
  for (ember_kir_op op : {EMBER_KIR_DIV, EMBER_KIR_FLOORDIV, EMBER_KIR_REM}) {
    for (DType dt : {DType::I32, DType::I64}) {
      kir::Builder b;
      int out = b.add_arg(dt), x = b.add_arg(dt), y = b.add_arg(dt);
      b.store(out, b.emit(op, dt, b.load(x), b.load(y)));
      std::vector<double> ys(1000, 3.0);
      ys[777] = 0;
      HLaunch h = flat(1000, {vec(dt, std::vector<double>(1000, 0)), vec(dt, std::vector<double>(1000, 5)), vec(dt, ys)});
      std::string e_cpu, e_ref;
      EXPECT_TRUE(run_kir(cpu_backend(), b, "idiv", h, &e_cpu).empty());
      EXPECT_TRUE(run_kir(reference_backend(), b, "idiv", h, &e_ref).empty());
      EXPECT_EQ(e_cpu, e_ref);
      EXPECT_NE(e_cpu.find(op == EMBER_KIR_REM ? "integer remainder by zero" : "integer division by zero"),
                std::string::npos)
          << e_cpu;
    }
  }
  // Negative integer powers too.
  kir::Builder b;
  int out = b.add_arg(DType::I64), x = b.add_arg(DType::I64);
  b.store(out, kir::pow(b.load(x), b.load(x)));
  HLaunch h = flat(3, {vec(DType::I64, {0, 0, 0}), vec(DType::I64, {2, -1, 3})});
  std::string e_cpu, e_ref;
  run_kir(cpu_backend(), b, "ipow", h, &e_cpu);
  run_kir(reference_backend(), b, "ipow", h, &e_ref);
  EXPECT_EQ(e_cpu, e_ref);
  EXPECT_NE(e_cpu.find("negative power"), std::string::npos) << e_cpu;
}

TEST(CpuInterpreter, GatherOutOfRangeIsAnError) {
  kir::Builder b;
  int out = b.add_arg(DType::F32), src = b.add_arg(DType::F32), idx = b.add_arg(DType::I64);
  b.store(out, b.load_gather(src, b.load(idx)));
  std::vector<double> is(600, 1.0);
  is[599] = 5;
  HArg s = vec(DType::F32, {1, 2, 3, 4, 5});
  s.strides = {0};
  s.gather_stride = 1;
  s.gather_size = 5;
  HLaunch h = flat(600, {vec(DType::F32, std::vector<double>(600, 0)), s, vec(DType::I64, is)});
  std::string e_cpu, e_ref;
  EXPECT_TRUE(run_kir(cpu_backend(), b, "gather", h, &e_cpu).empty());
  EXPECT_TRUE(run_kir(reference_backend(), b, "gather", h, &e_ref).empty());
  EXPECT_EQ(e_cpu, e_ref);
  EXPECT_NE(e_cpu.find("index out of range (5 for a dimension of size 5)"), std::string::npos) << e_cpu;
  is[599] = -1;
  h.args[2] = vec(DType::I64, is);
  EXPECT_TRUE(run_kir(cpu_backend(), b, "gather", h, &e_cpu).empty());
  EXPECT_NE(e_cpu.find("index out of range (-1 for"), std::string::npos) << e_cpu;
}

TEST(CpuInterpreter, ViewOutsideBufferIsAnError) {
  kir::Builder b;
  int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32);
  b.store(out, b.load(in));
  HLaunch h = flat(10, {vec(DType::F32, std::vector<double>(10, 0)), vec(DType::F32, std::vector<double>(9, 1))});
  std::string e;
  EXPECT_TRUE(run_kir(cpu_backend(), b, "oob", h, &e).empty());
  EXPECT_NE(e.find("outside its buffer"), std::string::npos) << e;
}

// In-place kernel with two outputs: arg0 and arg1 view the same buffer; the second store must
// still see the values loaded before the first store overwrote them (as the reference does).
TEST(CpuInterpreter, InPlaceStoreDoesNotChangeLoadedValues) {
  for (Backend* be : {&cpu_backend(), &reference_backend()}) {
    kir::Builder b;
    int out = b.add_arg(DType::F32), in = b.add_arg(DType::F32), out2 = b.add_arg(DType::F32);
    Val x = b.load(in);
    b.store(out, x * 2.0);
    b.store(out2, x + 1.0);
    const int64_t n = 1000;
    std::vector<float> init(n);
    for (int64_t i = 0; i < n; ++i) init[size_t(i)] = float(i);
    auto x_buf = be->alloc(Device{}, n * 4), y_buf = be->alloc(Device{}, n * 4);
    be->write(*x_buf, 0, init.data(), n * 4);
    ember_kir_arg args[3] = {};
    args[0].buffer = args[1].buffer = x_buf->handle;
    args[2].buffer = y_buf->handle;
    for (auto& a : args) a.strides[0] = 1;
    ember_kir_launch l{};
    l.outer_rank = 1;
    l.shape[0] = n;
    l.n_args = 3;
    l.args = args;
    ember_kir_program prog = b.program("inplace");
    be->run(*be->program(0, prog, b.structure_hash()), l);
    std::vector<float> x_out(n), y_out(n);
    be->read(*x_buf, 0, x_out.data(), n * 4);
    be->read(*y_buf, 0, y_out.data(), n * 4);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(x_out[size_t(i)], 2.0f * float(i)) << be->name();
      ASSERT_EQ(y_out[size_t(i)], float(i) + 1.0f) << be->name();
    }
  }
}

// IOTA only needs an argument's view, not its memory (the scheduler passes views without buffers).
TEST(CpuInterpreter, IotaArgumentNeedsNoBuffer) {
  kir::Builder b;
  int out = b.add_arg(DType::I64), pos = b.add_arg(DType::I64);
  b.store(out, b.iota(pos));
  auto buf = cpu_backend().alloc(Device{}, 100 * 8);
  ember_kir_arg args[2] = {};
  args[0].buffer = buf->handle;
  args[0].strides[0] = 1;
  args[1].offset = 5;
  args[1].strides[0] = 3;
  ember_kir_launch l{};
  l.outer_rank = 1;
  l.shape[0] = 100;
  l.n_args = 2;
  l.args = args;
  ember_kir_program prog = b.program("iota_view");
  cpu_backend().run(*cpu_backend().program(0, prog, b.structure_hash()), l);
  std::vector<int64_t> got(100);
  cpu_backend().read(*buf, 0, got.data(), 800);
  for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(got[size_t(i)], 5 + 3 * i);
}

TEST(CpuInterpreter, DeviceName) {
  const char* name = cpu_backend().properties(0).name;
  EXPECT_NE(std::string(name).find("threads"), std::string::npos) << name;
}

}  // namespace
}  // namespace ember::testing
