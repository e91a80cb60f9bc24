// KIR LOAD_SCALAR (abi.h): a launch-time scalar argument, an i64 that each launch passes in its
// argument's offset field (no buffer), as a GPU passes push constants or kernel parameters. The
// reference backend, the CPU tile interpreter (tier 0) and compiled CPU kernels (tier 1, the
// elementwise and the reduction emitters) give the values computed here; one compiled program run
// with two values gives both results; values past 2^31 are values, not offsets. Random ops take
// their Philox key this way: the same numbers as an immediate key, and no buffer per draw.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/tier1_harness.h"
#include "ember/debug.h"
#include "ember/ops.h"

namespace ember::testing {
namespace {

using kir::Val;

HArg scalar_arg(int64_t value) {
  HArg a;
  a.dtype = DType::I64;
  a.no_buffer = true;
  a.offset = value;
  a.strides = {0, 0};
  return a;
}

HArg zeros(DType dt, size_t n, std::vector<int64_t> strides) {
  HArg a;
  a.dtype = dt;
  a.bytes.assign(n * dtype_size(dt), 0);
  a.strides = std::move(strides);
  return a;
}

// The runs of one program on the reference backend and the CPU tiers; `check` gets each result.
template <class Check>
void on_every_backend_and_tier(kir::Builder& b, const HLaunch& L, Check check) {
  std::string e;
  check(run_fresh(reference_backend(), b, L, &e), "reference", e);
  {
    Tier1Scope scope(0);
    check(run_fresh(cpu_backend(), b, L, &e), "cpu tier 0", e);
  }
  if (compiler_present()) {
    Tier1Scope scope(1);
    const Stats before = stats();
    check(run_fresh(cpu_backend(), b, L, &e), "cpu tier 1", e);
    EXPECT_EQ(stats().launches, before.launches + 1) << "tier 1 did not run the program";
  }
}

// y[i] = iota(i) * 3 + k (i64) over 1000 points, for k near both ends of the i64 range and past
// 2^31 (a value the scheduler must not read as an element offset).
TEST(KirScalarTest, ElementwiseOnEveryBackendAndTier) {
  for (int64_t k : {int64_t(-4), int64_t(1) << 40, INT64_MAX - 5000, INT64_MIN + 7}) {
    kir::Builder b;
    int y = b.add_arg(DType::I64), ka = b.add_arg(DType::I64);
    b.store(y, b.iota(y) * b.constant_int(3, DType::I64) + b.load_scalar(ka));
    HLaunch L;
    L.outer_rank = 1;
    L.shape = {1000};
    L.args = {zeros(DType::I64, 1000, {1}), scalar_arg(k)};
    on_every_backend_and_tier(b, L, [&](const std::vector<std::vector<uint8_t>>& out, const char* what,
                                        const std::string& e) {
      ASSERT_EQ(out.size(), 2u) << what << ": " << e;
      for (size_t i = 0; i < 1000; ++i) {
        int64_t got;
        std::memcpy(&got, out[0].data() + 8 * i, 8);
        ASSERT_EQ(got, int64_t(uint64_t(i) * 3 + uint64_t(k))) << what << " k " << k << " at " << i;
      }
    });
  }
}

// Rows of 64: out[r] = sum_j float(x[r, j] + k) + float(k), with k read in the pass and after it.
TEST(KirScalarTest, ReductionOnEveryBackendAndTier) {
  const int64_t k = -3;
  kir::Builder b;
  int o = b.add_arg(DType::F32), xa = b.add_arg(DType::I64), ka = b.add_arg(DType::I64);
  Val s = b.acc_sum(b.cast(b.load(xa) + b.load_scalar(ka), DType::F32));
  b.phase = 1;
  b.store(o, s + b.cast(b.load_scalar(ka), DType::F32));
  HLaunch L;
  L.outer_rank = 1;
  L.reduce_rank = 1;
  L.shape = {10, 64};
  HArg x = zeros(DType::I64, 640, {64, 1});
  std::vector<double> want(10, double(k));
  for (size_t i = 0; i < 640; ++i) {
    put(x.bytes, DType::I64, i, double(int64_t(i % 11) - 5));
    want[i / 64] += double(int64_t(i % 11) - 5 + k);
  }
  L.args = {zeros(DType::F32, 10, {1, 0}), x, scalar_arg(k)};
  on_every_backend_and_tier(b, L, [&](const std::vector<std::vector<uint8_t>>& out, const char* what,
                                      const std::string& e) {
    ASSERT_EQ(out.size(), 3u) << what << ": " << e;
    for (size_t r = 0; r < 10; ++r) ASSERT_EQ(element(out[0], DType::F32, r), want[r]) << what << " row " << r;
  });
}

// One compiled program, two launches with different values: each launch's own value.
TEST(KirScalarTest, OneProgramServesEveryValue) {
  kir::Builder b;
  int y = b.add_arg(DType::I64), ka = b.add_arg(DType::I64);
  b.store(y, b.load_scalar(ka) - b.iota(y));
  const ember_kir_program prog = b.program("launch_scalar");
  for (Backend* be : {&reference_backend(), &cpu_backend()}) {
    std::shared_ptr<const CompiledProgram> p = be->program(0, prog, b.structure_hash());
    for (int64_t k : {int64_t(100), int64_t(-(int64_t(1) << 35))}) {
      HLaunch L;
      L.outer_rank = 1;
      L.shape = {64};
      L.args = {zeros(DType::I64, 64, {1}), scalar_arg(k)};
      Uploaded u = upload(*be, L);
      be->run(*p, u.launch);
      const auto out = download(*be, L, u);
      for (size_t i = 0; i < 64; ++i) {
        int64_t got;
        std::memcpy(&got, out[0].data() + 8 * i, 8);
        ASSERT_EQ(got, k - int64_t(i)) << be->name() << " k " << k;
      }
    }
  }
}

// RAND_UNIFORM with its key in operand b, from a launch scalar (as the scheduler builds random
// ops) or from a uniform load of a one-element buffer, draws the numbers of the immediate key, on
// every backend and tier.
TEST(KirScalarTest, RandomKeyFromAnOperandEqualsTheImmediateKey) {
  const uint64_t seed = 0xfedc1234abcd5678ull;  // past 2^63: the key is all 64 bits
  enum class Key { Immediate, LaunchScalar, UniformLoad };
  auto build = [&](kir::Builder& b, Key key) {
    int y32 = b.add_arg(DType::F32), y64 = b.add_arg(DType::F64), ks = b.add_arg(DType::I64),
        ku = b.add_arg(DType::I64);
    Val it = b.iota(y32);
    if (key == Key::LaunchScalar) b.runtime_key = b.load_scalar(ks);
    if (key == Key::UniformLoad) b.runtime_key = b.load_uniform(ku);
    b.store(y32, b.rand_uniform(it, seed, 0, DType::F32));
    b.store(y64, b.rand_uniform(it, seed, 1, DType::F64));
  };
  HLaunch L;
  L.outer_rank = 1;
  L.shape = {3000};
  HArg in_buffer = zeros(DType::I64, 1, {0});
  std::memcpy(in_buffer.bytes.data(), &seed, 8);
  L.args = {zeros(DType::F32, 3000, {1}), zeros(DType::F64, 3000, {1}), scalar_arg(int64_t(seed)), in_buffer};
  L.args[2].strides = {0};
  kir::Builder imm, scalar, uniform;
  build(imm, Key::Immediate);
  build(scalar, Key::LaunchScalar);
  build(uniform, Key::UniformLoad);
  std::string e;
  const auto want = run_fresh(reference_backend(), imm, L, &e);
  ASSERT_EQ(want.size(), 4u) << e;
  for (kir::Builder* b : {&scalar, &uniform}) {
    const char* what = b == &scalar ? "launch scalar" : "uniform load";
    EXPECT_EQ(run_fresh(reference_backend(), *b, L, &e), want) << "reference, " << what << " " << e;
    for (int tier : {0, 1}) {
      if (tier == 1 && !compiler_present()) continue;
      Tier1Scope scope(tier);
      EXPECT_EQ(run_fresh(cpu_backend(), imm, L, &e), want) << "tier " << tier << " " << e;
      EXPECT_EQ(run_fresh(cpu_backend(), *b, L, &e), want) << "tier " << tier << ", " << what << " " << e;
    }
  }
}

// Through the scheduler: a random op allocates no buffer for its key (it used to be a one-element
// device array written from the host for every draw): a fused random kernel's peak memory is its
// output's alone, and new seeds reuse the program.
TEST(KirScalarTest, RandomOpsAllocateNoKeyBuffer) {
  for (Device dev : {Device::cpu(), Device::reference()}) {
    auto draw = [&](uint64_t seed) { return mul(uniform({256}, 0, 1, {.seed = seed, .device = dev}), 2.0); };
    Array warm = draw(1);
    warm.eval();
    synchronize(dev);  // an asynchronous device lowers the plan on its queue
    const int64_t programs_before = execution_stats().programs_created;
    const int64_t live_before = memory_stats(dev).live_bytes;
    reset_peak_memory(dev);
    Array a = draw(2);
    a.eval();
    EXPECT_EQ(memory_stats(dev).peak_bytes - live_before, 256 * 4) << dev.str() << ": the output only";
    EXPECT_EQ(execution_stats().programs_created, programs_before) << dev.str();
    EXPECT_NE(a.to_vector<float>(), warm.to_vector<float>()) << dev.str();
  }
}

}  // namespace
}  // namespace ember::testing
