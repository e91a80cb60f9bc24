// KIR LOAD_UNIFORM (abi.h): a one-element argument read at its offset, the same at every point.
// The reference backend, the CPU tile interpreter (tier 0) and compiled CPU kernels (tier 1, both
// the elementwise and the reduction emitters) give the values of the formula evaluated here in
// f64; a uniform argument whose offset lies outside its buffer is a launch error; the scheduler
// reads one-element device arrays this way, so changing their value reuses the same program.
// Random arrays with new seeds reuse one program (their key as an operand: kir_scalar_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backend/tier1_harness.h"
#include "ember/debug.h"
#include "ember/ops.h"

namespace ember::testing {
namespace {

using kir::Val;

HArg vec_f32(const std::vector<float>& v, std::vector<int64_t> strides, int64_t offset = 0) {
  HArg a;
  a.dtype = DType::F32;
  a.offset = offset;
  a.strides = std::move(strides);
  a.bytes.resize(v.size() * 4);
  std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}

// y[i] = x[i] * u + float(k) over 1000 points; u = 1.75 at offset 3 of a 5-element buffer, k = -4
// (i64) at offset 1 of a 2-element buffer. Strides of the uniform arguments are garbage on purpose
// (never used).
struct ElementwiseCase {
  kir::Builder b;
  HLaunch L;
  std::vector<float> x;
  ElementwiseCase() {
    int y = b.add_arg(DType::F32), xa = b.add_arg(DType::F32), ua = b.add_arg(DType::F32), ka = b.add_arg(DType::I64);
    b.store(y, b.load(xa) * b.load_uniform(ua) + b.cast(b.load_uniform(ka), DType::F32));
    const int64_t n = 1000;
    L.outer_rank = 1;
    L.shape = {n};
    for (int64_t i = 0; i < n; ++i) x.push_back(float(i % 37) * 0.25f - 4.0f);
    HArg k;
    k.dtype = DType::I64;
    k.offset = 1;
    k.strides = {7};
    k.bytes.resize(16);
    const int64_t kv[2] = {99, -4};
    std::memcpy(k.bytes.data(), kv, 16);
    L.args = {vec_f32(std::vector<float>(size_t(n), 0.0f), {1}), vec_f32(x, {1}),
              vec_f32({9.f, 9.f, 9.f, 1.75f, 9.f}, {5}, 3), k};
  }
  double want(size_t i) const { return double(x[i]) * 1.75 - 4.0; }
};

TEST(KirUniformTest, ElementwiseOnEveryBackendAndTier) {
  ElementwiseCase c;
  std::string e;
  auto check = [&](const std::vector<std::vector<uint8_t>>& out, const char* what) {
    ASSERT_EQ(out.size(), 4u) << what << ": " << e;
    for (size_t i = 0; i < c.x.size(); ++i) ASSERT_EQ(element(out[0], DType::F32, i), float(c.want(i))) << what << " " << i;
  };
  check(run_fresh(reference_backend(), c.b, c.L, &e), "reference");
  {
    Tier1Scope scope(0);
    check(run_fresh(cpu_backend(), c.b, c.L, &e), "cpu tier 0");
  }
  if (compiler_present()) {
    Tier1Scope scope(1);
    const Stats before = stats();
    check(run_fresh(cpu_backend(), c.b, c.L, &e), "cpu tier 1");
    EXPECT_EQ(stats().launches, before.launches + 1);  // the uniform arguments keep the launch contiguous
  }
}

// Rows of 64: s = sum(x * u) (u read in the reduction), then out = s + u (read once per row).
TEST(KirUniformTest, ReductionOnEveryBackendAndTier) {
  kir::Builder b;
  int o = b.add_arg(DType::F32), xa = b.add_arg(DType::F32), ua = b.add_arg(DType::F32);
  Val s = b.acc_sum(b.load(xa) * b.load_uniform(ua));
  b.phase = 1;
  b.store(o, s + b.load_uniform(ua));
  HLaunch L;
  L.outer_rank = 1;
  L.reduce_rank = 1;
  L.shape = {10, 64};
  std::vector<float> x;
  for (int i = 0; i < 640; ++i) x.push_back(float(i % 11) - 5.0f);
  L.args = {vec_f32(std::vector<float>(10, 0.0f), {1, 0}), vec_f32(x, {64, 1}), vec_f32({0.5f, 3.0f}, {0, 0}, 1)};
  std::vector<double> want(10, 0.0);
  for (int r = 0; r < 10; ++r) {
    for (int j = 0; j < 64; ++j) want[size_t(r)] += double(x[size_t(r * 64 + j)]) * 3.0;
    want[size_t(r)] += 3.0;
  }
  std::string e;
  auto check = [&](const std::vector<std::vector<uint8_t>>& out, const char* what) {
    ASSERT_EQ(out.size(), 3u) << what << ": " << e;
    for (size_t r = 0; r < 10; ++r) ASSERT_EQ(element(out[0], DType::F32, r), want[r]) << what << " row " << r;
  };
  check(run_fresh(reference_backend(), b, L, &e), "reference");
  {
    Tier1Scope scope(0);
    check(run_fresh(cpu_backend(), b, L, &e), "cpu tier 0");
  }
  if (compiler_present()) {
    Tier1Scope scope(1);
    const Stats before = stats();
    check(run_fresh(cpu_backend(), b, L, &e), "cpu tier 1");
    EXPECT_EQ(stats().launches, before.launches + 1);
  }
}

// The CPU backend checks every launch against its buffers (the reference backend trusts the core).
TEST(KirUniformTest, OffsetOutsideTheBufferIsALaunchError) {
  ElementwiseCase c;
  c.L.args[2].offset = 5;  // the buffer holds 5 elements
  for (int tier : {0, 1}) {
    if (tier == 1 && !compiler_present()) continue;
    Tier1Scope scope(tier);
    std::string e;
    auto out = run_fresh(cpu_backend(), c.b, c.L, &e);
    EXPECT_TRUE(out.empty()) << "tier " << tier;
    EXPECT_NE(e.find("argument 2 reaches elements 5..5 outside its buffer of 5 elements"), std::string::npos) << e;
  }
}

// Through the scheduler: x * s + 1 with s a one-element device array builds one program; a new
// value of s reuses it and gives the new result.
TEST(KirUniformTest, OneElementArraysDoNotChangeThePrograms) {
  for (Device dev : {Device::cpu(), Device::reference()}) {
    Array x = from_vector(std::vector<float>{1, 2, 3, 4}, {4}, dev);
    auto run = [&](float v) {
      Array s = from_vector(std::vector<float>{v}, {}, dev);
      return add(mul(x, s), 1.0).to_vector<float>();
    };
    EXPECT_EQ(run(2.0f), (std::vector<float>{3, 5, 7, 9}));
    const int64_t before = execution_stats().programs_created;
    EXPECT_EQ(run(-0.5f), (std::vector<float>{0.5f, 0, -0.5f, -1}));
    EXPECT_EQ(run(10.0f), (std::vector<float>{11, 21, 31, 41}));
    EXPECT_EQ(execution_stats().programs_created, before) << dev.str();
  }
}

// Through the scheduler: random arrays with new seeds (dropout every step) reuse one program,
// differ from each other and equal the reference backend's for the same seed.
TEST(KirUniformTest, NewSeedsReuseTheProgram) {
  auto draw = [](uint64_t seed, Device dev) {
    return add(mul(uniform({1000}, -1, 1, {.seed = seed, .device = dev}), 2.0), 1.0).to_vector<float>();
  };
  draw(1, Device::cpu());
  const int64_t before = execution_stats().programs_created;
  std::vector<float> a = draw(2, Device::cpu()), b = draw(3, Device::cpu());
  EXPECT_EQ(execution_stats().programs_created, before);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, draw(2, Device::reference()));
  EXPECT_EQ(b, draw(3, Device::reference()));
}

}  // namespace
}  // namespace ember::testing
