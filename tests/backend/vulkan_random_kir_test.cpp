// Vulkan's shaders against the scalar reference interpreter on randomly generated KIR programs
// (kir_program_gen.h: every dtype's loads through broadcast, transposed and stepped views,
// gathers, iota, random numbers, unary/binary/compare/select/cast ops, reductions followed by
// phase-1 ops, empty launches) on random shapes: exactly where the result is exactly defined,
// within the generator's bound elsewhere; a program that fails (integer division by zero, a
// gather out of range) fails on both, with the same words. Programs with an instruction or dtype
// the device lacks are skipped (the op-level suites check their host fallback), and so are those
// whose output points each read more than a binding (ctest's small-bindings configuration: the
// core sends them to the host; the rest run in pieces there).
#include <gtest/gtest.h>

#include <cstdio>

#include "backend/kir_program_gen.h"
#include "backend/vulkan_test_util.h"

namespace ember::testing {
namespace {

// The kernel error's own words ("integer division by zero", "index out of range"), without the
// device's and program's names around them.
std::string error_kind(const std::string& e) {
  for (const char* k : {"division by zero", "remainder by zero", "out of range", "negative exponent"})
    if (e.find(k) != std::string::npos) return k;
  return e;
}

TEST(VulkanTest, RandomKirProgramsMatchTheReference) {
  REQUIRE_VULKAN();
  Backend& vk = Backend::get(DeviceKind::Vulkan);
  Backend& ref = reference_backend();
  int failures = 0, compared = 0, unsupported = 0, unbindable = 0;
  // Whether the device computes in every dtype the generator uses (a weak device, or lavapipe
  // with features turned off, leaves only a few programs to compare).
  const uint32_t dtypes = vk.properties(0).dtypes;
  bool every_dtype = true;
  for (DType dt : kAllTypes) every_dtype = every_dtype && (dtypes & EMBER_DTYPE_BIT(int(dt)));
  for (uint64_t seed = 1; seed <= 150 && failures < 5; ++seed) {
    ProgramGen g(seed * 7919, /*iota_own_arg=*/true);
    g.generate(seed % 3 == 0, seed % 15 == 0);
    const std::string name = "random" + std::to_string(seed);
    const ember_kir_program prog = g.b.program(name);
    if (!vk.unsupported(0, prog).empty()) {
      ++unsupported;
      continue;
    }
    std::string err_vk, err_ref;
    const auto want = run_kir(ref, g.b, name, g.L, &err_ref);
    const auto got = run_kir(vk, g.b, name, g.L, &err_vk, Device::vulkan(0));
    const std::string context = "seed " + std::to_string(seed) + "\n" + kir::to_string(prog) + g.describe();
    if (err_ref.empty() && err_vk.find("largest storage binding") != std::string::npos) {
      ++unbindable;  // one output point reads more than a binding: the core sends these to the host
      continue;
    }
    if (error_kind(err_vk) != error_kind(err_ref)) {
      ADD_FAILURE() << "errors differ: vulkan '" << err_vk << "', reference '" << err_ref << "'\n" << context;
      ++failures;
      continue;
    }
    if (!err_ref.empty()) continue;
    ++compared;
    if (const std::string m = first_output_mismatch(g, got, want); !m.empty()) {
      ADD_FAILURE() << m << "\n" << context;
      ++failures;
    }
  }
  std::printf("[ info ] %d random programs compared, %d use what vulkan:0 lacks, %d read more than a binding at "
              "one output point\n", compared, unsupported, unbindable);
  EXPECT_GT(compared, every_dtype ? 75 : 0);
}

}  // namespace
}  // namespace ember::testing
