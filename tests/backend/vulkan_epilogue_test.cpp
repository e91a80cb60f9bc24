// Contraction epilogues on Vulkan (EMBER_LIB_MATMUL_EPILOGUE / CONV2D_EPILOGUE,
// src/backend/common/emit_glsl_library.cpp, emit_glsl_conv.cpp): the matmul and convolution
// shaders apply the folded bias / residual adds, scales and activations before their store. Each
// chain, on the tiled matmul shader and the one-output-per-invocation one, the direct convolution
// and the workgroup-per-output one, with broadcast operands and batch dims, on inputs with NaN, +-inf, -0 and huge values, must give the bits the
// same graph gives on the same device with the rewrite off (the post-ops are spelled as the KIR
// instructions of the ops they replace), and the unfused reference's values; and take one
// library call and no kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/vulkan_test_util.h"
#include "ember/ember.h"
#include "scheduler/epilogue.h"
#include "scheduler/epilogue_guard.h"

namespace ember {
namespace {

const Device kVk{DeviceKind::Vulkan, 0};

using Guard = ember::testing::EpilogueSwitchesGuard;

// Values in [-1, 1] with every 7th one replaced by a special value (none with `specials` false:
// the second factor, so that no product of two huge values overflows, which f32 backends and the
// reference's wider sums treat differently).
std::vector<double> with_specials(int64_t n, uint32_t seed, bool with = true) {
  static const double specials[] = {NAN, INFINITY, -INFINITY, -0.0, 1e30, -1e30, 0.0, -40.0, 40.0};
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = with && i % 7 == 3 ? specials[size_t(i / 7) % std::size(specials)] : u(g);
  return v;
}

// A product (matmul or conv2d) and the chain after it; inputs[0] gets the special values, inputs[1]
// (the second factor) none, the others (bias, operands) special values too.
using Graph = std::function<Array(const std::vector<Array>& in)>;

struct Case {
  std::string name;
  std::vector<Shape> inputs;
  Graph graph;
};

struct Result {
  std::vector<double> values;
  int64_t kernels = 0, library_calls = 0;
  uint64_t largest_bytes = 0;  // of the inputs and the output
};

Result run(const Case& c, DType dt, Device d) {
  std::vector<Array> ins;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const std::vector<double> v = with_specials(c.inputs[k].numel(), uint32_t(1 + k), k != 1);
    ins.push_back(dt == DType::F64 ? from_vector(v, c.inputs[k], d).eval()
                                   : from_vector(std::vector<float>(v.begin(), v.end()), c.inputs[k], d).eval());
  }
  synchronize();
  reset_execution_stats();
  Array y = c.graph(ins);  // (the product's temporary handle ends here: foldable)
  y.eval();
  synchronize();
  const ExecutionStats st = execution_stats();  // before the read (which casts to f64)
  uint64_t largest = uint64_t(y.numel()) * dtype_size(dt);
  for (const Array& x : ins) largest = std::max<uint64_t>(largest, uint64_t(x.numel()) * dtype_size(dt));
  return {y.to_vector<double>(), st.kernels, st.library_calls, largest};
}

bool same_bits(double x, double y, DType dt) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (dt == DType::F32) {
    const float fx = float(x), fy = float(y);
    return std::memcmp(&fx, &fy, 4) == 0;
  }
  return std::memcmp(&x, &y, 8) == 0;
}

std::vector<Case> cases() {
  using V = const std::vector<Array>&;
  const Conv2dOptions pad1{.padding = {1, 1}};
  return {
      {"matmul, tiled: relu(y + bias)", {{64, 40}, {40, 48}, {48}}, [](V i) { return relu(add(matmul(i[0], i[1]), i[2])); }},
      {"matmul, tiled: gelu(y * 0.5 + 1)", {{40, 24}, {24, 36}}, [](V i) { return gelu(add(mul(matmul(i[0], i[1]), 0.5), 1.0)); }},
      {"matmul, tiled, broadcast batches: sigmoid(y) * gate", {{2, 1, 33, 20}, {1, 3, 20, 35}, {3, 33, 35}},
       [](V i) { return mul(sigmoid(matmul(i[0], i[1])), i[2]); }},
      {"matmul, simple: tanh(y - 2)", {{3, 40}, {40, 5}}, [](V i) { return tanh(sub(matmul(i[0], i[1]), 2.0)); }},
      {"matmul, simple: gelu_tanh(y + residual)", {{5, 7}, {7, 9}, {5, 9}},
       [](V i) { return gelu_tanh(add(matmul(i[0], i[1]), i[2])); }},
      {"matmul, matrix-vector: y * -3 (signed zeros)", {{6, 11}, {11, 1}}, [](V i) { return mul(matmul(i[0], i[1]), -3.0); }},
      {"matmul, simple, batched: relu(y * per-row scale + bias)", {{4, 2, 8}, {4, 8, 3}, {2, 1}, {3}},
       [](V i) { return relu(add(mul(matmul(i[0], i[1]), i[2]), i[3])); }},
      {"conv2d with bias: relu(y)", {{2, 3, 7, 6}, {4, 3, 3, 3}, {4}},
       [=](V i) { return relu(conv2d(i[0], i[1], i[2], pad1)); }},
      {"conv2d: relu(y * scale + shift), an inference batch norm", {{1, 4, 5, 5}, {6, 4, 3, 3}, {6, 1, 1}, {6, 1, 1}},
       [](V i) { return relu(add(mul(conv2d(i[0], i[1]), i[2]), i[3])); }},
      {"conv2d, a workgroup per output: gelu(y + residual)", {{1, 80, 9, 9}, {2, 80, 5, 5}, {1, 2, 5, 5}},
       [](V i) { return gelu(add(conv2d(i[0], i[1]), i[2])); }},
  };
}

TEST(VulkanEpilogueTest, ChainsGiveTheUnfusedBitsInOneLibraryCall) {
  REQUIRE_VULKAN();
  Guard guard;
  set_fusion_enabled(true);
  for (DType dt : {DType::F32, DType::F64}) {
    Backend& be = Backend::get(DeviceKind::Vulkan);
    if (!be.supports(0, EMBER_SUPPORT_LIBRARY, EMBER_LIB_MATMUL_EPILOGUE, int32_t(dt)) ||
        !be.supports(0, EMBER_SUPPORT_LIBRARY, EMBER_LIB_CONV2D_EPILOGUE, int32_t(dt))) {
      // The shaders index in 64 bits: a device without shaderInt64 (SwiftShader) runs the post-ops
      // as a kernel; every other one has f32 epilogues.
      EXPECT_FALSE(dt == DType::F32 && be.supports(0, EMBER_SUPPORT_KIR, EMBER_KIR_ADD, int32_t(DType::I64)))
          << "no f32 epilogue on a device with 64-bit integers";
      continue;
    }
    for (const Case& c : cases()) {
      SCOPED_TRACE(c.name + " " + std::string(dtype_name(dt)));
      set_epilogue_folding_enabled(true);
      const Result fused = run(c, dt, kVk);
      set_epilogue_folding_enabled(false);
      const Result plain = run(c, dt, kVk);
      set_fusion_enabled(false);
      const Result want = run(c, dt, Device::reference());
      set_fusion_enabled(true);
      // Folded unless a tensor is larger than a binding (EMBER_VULKAN_MAX_BINDING=4096 in the
      // small-bindings configuration): then the product and the post-ops run apart, as with the
      // rewrite off.
      if (fused.largest_bytes <= be.max_binding(0)) {
        EXPECT_EQ(fused.library_calls, 1);
        EXPECT_EQ(fused.kernels, 0) << "the post-ops ran as a kernel";
      } else {
        EXPECT_EQ(fused.kernels, plain.kernels) << "an epilogue folded with a tensor larger than a binding";
      }
      EXPECT_GE(plain.kernels, 1);
      ASSERT_EQ(fused.values.size(), want.values.size());
      int64_t nonfinite = 0;
      const double tol = dt == DType::F32 ? 3e-5 : 1e-12;
      for (size_t i = 0; i < want.values.size(); ++i) {
        const double g = fused.values[i], w = want.values[i];
        ASSERT_TRUE(same_bits(g, plain.values[i], dt)) << "element " << i << ": " << g << " fused, " << plain.values[i]
                                                       << " with the rewrite off";
        if (!std::isfinite(w)) {
          ++nonfinite;
          ASSERT_TRUE(std::isnan(w) ? std::isnan(g) : g == w) << "element " << i << ": " << g << " vs " << w;
        } else {
          ASSERT_LE(std::fabs(g - w), tol * (1 + std::fabs(w))) << "element " << i << ": " << g << " vs " << w;
          if (w == 0 && g == 0) {
            EXPECT_EQ(std::signbit(g), std::signbit(w)) << "element " << i;
          }
        }
      }
      EXPECT_GT(nonfinite, 0) << "the inputs' NaN and infinities reach the outputs";
    }
  }
}

}  // namespace
}  // namespace ember
