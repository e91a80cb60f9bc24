// Vulkan convolutions that take the implicit-GEMM shaders (src/backend/common/emit_glsl_conv.cpp:
// the forward and the gradient of the input, ungrouped, GEMMs of >= 32 rows, columns and terms)
// against the direct shaders (EMBER_VULKAN_CONV_DIRECT=1) bit for bit, and against the reference
// backend. The inputs hold NaN, infinities and -0, and infinite weights sit at taps that read the
// padding (or, for the gradient, fall between the strides), which must be skipped, not multiplied
// by a zero (that would give NaN, and turn -0 sums into +0).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/vulkan_test_util.h"
#include "ember/ember.h"

namespace ember {
namespace {

const Device kVk = Device::vulkan(0);

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

TEST(VulkanTest, ImplicitGemmConvolutionsMatchTheDirectShaderAndTheReference) {
  REQUIRE_VULKAN();
  struct Case {
    const char* name;
    Shape xs, ws;
    Conv2dOptions opts;
    bool bias, relu, positive;  // positive: x >= 0 (then channel 7's sums are -0: see below)
  };
  const Case cases[] = {
      {"padding 1", {2, 8, 9, 7}, {40, 8, 3, 3}, {.padding = 1}, false, false, false},
      {"stride 2, dilation 2, bias", {1, 6, 15, 13}, {33, 6, 3, 3}, {.stride = 2, .padding = 2, .dilation = 2}, true, false, true},
      {"bias and ReLU as an epilogue", {2, 16, 8, 8}, {64, 16, 3, 3}, {.padding = 1}, true, true, false},
      // The gradient of the input as a GEMM too (>= 32 input channels): strided, then not.
      {"stride 2, 32 channels in", {2, 32, 8, 8}, {32, 32, 3, 3}, {.stride = 2, .padding = 1}, false, false, false},
      {"40 channels in, bias", {1, 40, 7, 6}, {36, 40, 3, 3}, {.padding = 1}, true, false, true},
      // 96 output channels: three blocks of 32 rows (32 x 128 blocks; 32 and 33 rows above too).
      {"96 channels out", {1, 8, 6, 6}, {96, 8, 3, 3}, {.padding = 1}, true, false, false},
      // The gradient of the weights sums 4 * 40 * 40 = 6400 terms: the direct shader then runs a
      // workgroup per output (another order, so compared with the reference only).
      {"a long weight-gradient sum", {4, 12, 40, 40}, {32, 12, 3, 3}, {.padding = 1}, false, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<double> x(size_t(c.xs.numel())), w(size_t(c.ws.numel())), b(size_t(c.ws[0]));
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = std::sin(0.37 * double(i) + 0.1);
      x[i] = i % 11 == 3 ? (c.positive ? 0.0 : -0.0) : c.positive ? std::fabs(v) : v;
    }
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.53 * double(i) + 0.2);
    for (size_t i = 0; i < b.size(); ++i) b[i] = i % 5 == 1 ? -0.0 : 0.1 * double(i % 7);
    // Infinite weights at the top-left tap (which reads the padding for the first row and column
    // of outputs), a NaN and infinities in the input.
    w[size_t(((1 * c.ws[1] + 2) * 3 + 0) * 3 + 0)] = INFINITY;
    w[size_t(((5 * c.ws[1] + 0) * 3 + 0) * 3 + 0)] = -INFINITY;
    x[size_t(x.size() / 3)] = NAN;
    x[size_t(x.size() / 2)] = INFINITY;
    x[size_t(x.size() - 5)] = -INFINITY;
    // Channel 7's weights all -0 and its bias -0: with x >= 0, outputs whose terms are all -0.
    for (int64_t k = 0; k < c.ws[1] * 9; ++k) w[size_t(7 * c.ws[1] * 9 + k)] = -0.0;
    b[7] = -0.0;
    // The forward (with the case's bias and ReLU), then the gradient of the input for a dy made
    // of the forward's shape (NaN, infinities and -0 included).
    auto run = [&](Device d, DType dt) {
      Array xa = cast(from_vector(x, c.xs, d), dt), wa = cast(from_vector(w, c.ws, d), dt);
      Array ba = c.bias ? cast(from_vector(b, {c.ws[0]}, d), dt) : Array();
      Array y = conv2d(xa, wa, ba, c.opts);
      if (c.relu) y = relu(y);
      std::vector<float> out = y.to_vector<float>();
      std::vector<double> dy(out.begin(), out.end());
      for (size_t i = 0; i < dy.size(); ++i)
        if (std::isnan(dy[i])) dy[i] = i % 2 ? NAN : -0.0;  // fewer NaN, so that finite sums remain
      Array dx = conv2d_backward_data(cast(from_vector(dy, y.shape(), d), dt), wa, c.xs, c.opts);
      for (float v : dx.to_vector<float>()) out.push_back(v);
      // The gradient of the weights sums over the batch and the image, so the forward's NaN would
      // reach almost all of it: its dy has one NaN, one infinity and some -0 (channel 3 all -0).
      std::vector<double> dyw(dy.size());
      const int64_t plane = y.shape()[2] * y.shape()[3];
      for (size_t i = 0; i < dyw.size(); ++i)
        dyw[i] = (int64_t(i) / plane) % y.shape()[1] == 3 || i % 13 == 5 ? -0.0 : std::cos(0.29 * double(i));
      dyw[dyw.size() / 4] = NAN;
      dyw[dyw.size() / 2 + 1] = -INFINITY;
      Array dw = conv2d_backward_weights(xa, cast(from_vector(dyw, y.shape(), d), dt), c.ws, c.opts);
      for (float v : dw.to_vector<float>()) out.push_back(v);
      return out;
    };
    const std::vector<float> gemm = run(kVk, DType::F32);
    ::setenv("EMBER_VULKAN_CONV_DIRECT", "1", 1);
    const std::vector<float> direct = run(kVk, DType::F32);
    ::unsetenv("EMBER_VULKAN_CONV_DIRECT");
    ASSERT_EQ(gemm.size(), direct.size());
    // The long case's weight gradient (the last outputs) sums in another order in the direct shader.
    const size_t same_order = c.xs[0] == 4 ? gemm.size() - size_t(c.ws.numel()) : gemm.size();
    for (size_t i = 0; i < same_order; ++i) {  // (a NaN's sign bit is not defined: x86 and lavapipe vary it)
      if (std::isnan(gemm[i]) && std::isnan(direct[i])) continue;
      ASSERT_EQ(bits({gemm[i]}), bits({direct[i]})) << "output " << i << ": " << gemm[i] << " (implicit GEMM) against "
                                                    << direct[i] << " (direct)";
    }
    const std::vector<float> want = run(Device::reference(), DType::F32);
    ASSERT_EQ(gemm.size(), want.size());
    int64_t specials = 0, negative_zeros = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::isnan(want[i])) {
        ++specials;
        EXPECT_TRUE(std::isnan(gemm[i])) << "output " << i;
      } else if (std::isinf(want[i]) || want[i] == 0) {
        specials += std::isinf(want[i]);
        negative_zeros += want[i] == 0 && std::signbit(want[i]);
        EXPECT_EQ(bits({gemm[i]}), bits({want[i]})) << "output " << i << ": " << gemm[i] << " against " << want[i];
      } else {
        // The long sums (6400 terms up to 1 in size, in f32) differ from the f64 reference by up to
        // 2.3e-5 (measured).
        const double tol = i >= same_order ? 1e-4 : 1e-5;
        EXPECT_NEAR(gemm[i], want[i], tol * (1 + std::fabs(want[i]))) << "output " << i;
      }
    }
    EXPECT_GT(specials, 0);
    if (c.positive) {
      EXPECT_GT(negative_zeros, 0);
    }
  }
}

}  // namespace
}  // namespace ember
