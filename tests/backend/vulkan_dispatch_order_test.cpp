// The Vulkan plugin's ordering of launches within a command buffer: barriers only where a
// launch's buffer ranges overlap what earlier launches since the last barrier wrote (or, for its
// writes, read), and launch bindings pushed (VK_KHR_push_descriptor) or taken from descriptor
// sets. Each case runs on both binding paths (EMBER_VULKAN_DISABLE=push_descriptors for the
// second) and must give the CPU backend's bits: a chain of dependent kernels (every op its own
// kernel, intermediate buffers recycled on the queue), independent kernels writing disjoint slabs
// of one buffer that one kernel then reads (cat), and commands writing a buffer that an earlier
// kernel read (a buffer recycled by the core's cache). Values are small dyadic numbers: the sums and
// products of reductions and matmuls are exact, so the bits do not depend on summation order
// (elementwise ops round the same way everywhere).
// Run with EMBER_VULKAN_STATS=1 to see the dispatch, push and barrier counts at exit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runtime/registry.h"
#include "backend/vulkan_test_util.h"
#include "ember/ember.h"

namespace ember {
namespace {

const Device kVk = Device::vulkan(0);
const Device kCpu = Device::cpu();

// n multiples of 1/8 in [-8, 8), a different sequence per seed.
std::vector<float> dyadic(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int32_t(s >> 25) - 64) / 8.0f;
  }
  return v;
}

// Same bits (the values are exact, so NaN payloads never come up).
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0 && ++mismatches <= 5)
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
  EXPECT_EQ(mismatches, 0u) << what;
}

// Every op its own kernel while it lives.
struct UnfusedScope {
  bool was = fusion_enabled();
  UnfusedScope() { set_fusion_enabled(false); }
  ~UnfusedScope() { set_fusion_enabled(was); }
};

// Runs `body` with push descriptors (where the device has them), then with descriptor sets:
// EMBER_VULKAN_DISABLE gains push_descriptors (the plugin reads it whenever it builds a pipeline)
// and the core's program cache is emptied first, so that the kernels are built again.
void on_both_binding_paths(const std::function<void()>& body) {
  const char* env = std::getenv("EMBER_VULKAN_DISABLE");
  const bool was_set = env != nullptr;  // env itself does not outlive the setenv below
  const std::string saved = env ? env : "";
  Backend& be = Backend::get(DeviceKind::Vulkan);
  for (bool push : {true, false}) {
    SCOPED_TRACE(push ? "push descriptors" : "descriptor sets (EMBER_VULKAN_DISABLE=push_descriptors)");
    const std::string list = push ? saved : saved + (saved.empty() ? "" : ",") + "push_descriptors";
    if (list.empty()) unsetenv("EMBER_VULKAN_DISABLE");
    else setenv("EMBER_VULKAN_DISABLE", list.c_str(), 1);
    const size_t capacity = be.program_capacity();
    be.set_program_capacity(1);
    (void)neg(from_vector(std::vector<float>{1.0f}, {1}, kVk)).to_vector<float>();
    be.set_program_capacity(capacity);
    body();
  }
  if (was_set) setenv("EMBER_VULKAN_DISABLE", saved.c_str(), 1);
  else unsetenv("EMBER_VULKAN_DISABLE");
}

// (a) Each op reads the previous op's output (elementwise, a matmul, reductions, broadcasts), one
// kernel per op: a barrier before each, and buffers of dead intermediates reused by later ones.
TEST(VulkanTest, DependentKernelChainMatchesTheCpuBitForBit) {
  REQUIRE_VULKAN();
  auto run = [](Device d) {
    UnfusedScope unfused;
    Array x = from_vector(dyadic(24 * 16, 1), {24, 16}, d);
    Array w = from_vector(dyadic(16 * 8, 2), {16, 8}, d);
    Array y = x;
    for (int i = 0; i < 40; ++i) {  // 120 kernels: more than one batch (64 commands each)
      y = add(mul(y, 0.5), x);
      y = maximum(y, -2.0);
    }
    y = floor(mul(y, 8.0));  // back to small integers before the products
    Array h = matmul(y, w);
    Array centred = sub(h, sum(h, {1}, true));
    Array out = add(centred, mul(sum(centred, {0}, true), 0.25));
    std::vector<float> all = out.to_vector<float>();
    const std::vector<float> mid = y.to_vector<float>();
    all.insert(all.end(), mid.begin(), mid.end());
    return all;
  };
  on_both_binding_paths([&] { expect_same_bits(run(kVk), run(kCpu), "chain"); });
}

// (b) Independent kernels computed straight into their slabs of one cat output (disjoint ranges
// of one buffer: no barrier between them), then kernels that read the whole buffer. Slab sizes
// are odd, and in u8 the slabs share 4-byte words (those are ordered as if they overlapped).
TEST(VulkanTest, KernelsWritingDisjointSlabsThenOneReadingThemAllMatchTheCpu) {
  REQUIRE_VULKAN();
  auto run = [](Device d, DType dt) {
    std::vector<Array> ins;
    for (uint32_t i = 0; i < 6; ++i) {
      std::vector<float> v = dyadic(3 + 7 * i, 10 + i);
      if (dt == DType::U8)
        for (float& x : v) x = float(int(x * 8.0f) + 64);  // integers in [0, 128): u8 sums stay below 256
      ins.push_back(cast(from_vector(v, {int64_t(v.size())}, d), dt));
    }
    eval(ins);
    std::vector<Array> parts;
    for (size_t i = 0; i < ins.size(); ++i) {
      const Array& a = ins[i];
      switch (i % 3) {
        case 0: parts.push_back(add(a, a)); break;
        case 1: parts.push_back(maximum(a, cast(full({1}, 1.0, {.device = d}), dt))); break;
        default: parts.push_back(dt == DType::U8 ? add(a, a) : neg(a)); break;
      }
    }
    Array joined = cat(parts, 0);
    Array total = sum(cast(joined, DType::F32));
    Array shifted = sub(cast(joined, DType::F32), mul(sum(cast(joined, DType::F32)), 0.125));
    std::vector<float> all = cast(joined, DType::F32).to_vector<float>();
    const std::vector<float> t = total.to_vector<float>(), s = shifted.to_vector<float>();
    all.insert(all.end(), t.begin(), t.end());
    all.insert(all.end(), s.begin(), s.end());
    return all;
  };
  on_both_binding_paths([&] {
    expect_same_bits(run(kVk, DType::F32), run(kCpu, DType::F32), "cat f32");
    expect_same_bits(run(kVk, DType::U8), run(kCpu, DType::U8), "cat u8");
  });
}

// (c) A kernel reads a buffer, then a later command writes that buffer before the reader is known
// to have run: a dropped buffer goes back to the core's cache at once (it is only reused on the
// same queue) and takes the next output or upload of its size. Unfused, so that each op is its
// own kernel; the chain test above recycles its intermediates the same way.
TEST(VulkanTest, KernelsWritingABufferAnEarlierKernelReadMatchTheCpu) {
  REQUIRE_VULKAN();
  auto run = [&](Device d) {
    UnfusedScope unfused;
    std::vector<float> all;
    auto keep = [&](const Array& a) {
      const std::vector<float> v = a.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    };
    for (uint32_t round = 0; round < 3; ++round) {
      Array a = from_vector(dyadic(1000, 20 + round), {1000}, d);
      Array b = from_vector(dyadic(1000, 30 + round), {1000}, d);
      Array c = from_vector(dyadic(1000, 40 + round), {1000}, d);
      Array doubled = mul(a, 2.0).eval();  // reads a
      a = Array();                          // a's buffer goes back to the cache ...
      Array shifted = add(c, 0.5).eval();   // ... and may take this kernel's output
      Array tripled = mul(b, 3.0).eval();   // reads b
      b = Array();
      Array uploaded = from_vector(dyadic(1000, 50 + round), {1000}, d);  // an upload into b's buffer
      Array sum_all = add(add(doubled, shifted), add(tripled, uploaded)).eval();
      keep(doubled);
      keep(shifted);
      keep(tripled);
      keep(uploaded);
      keep(sum_all);
    }
    return all;
  };
  on_both_binding_paths([&] { expect_same_bits(run(kVk), run(kCpu), "write after read"); });
}

}  // namespace
}  // namespace ember
