// The CPU backend's f32 convolutions at the shapes where it picks oneDNN's Winograd kernels (3x3,
// stride 1, >= 16 input and output channels; src/backend/cpu/conv_dnnl.cpp) and next to them
// (too few channels, stride 2: direct kernels), forward / backward-data / backward-weights against
// the reference backend's f64 loops, on repeated calls (cached primitives, reused buffers).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "test_util.h"

namespace ember {
namespace {

Array det_on(const Shape& s, double a, double b, Device d, DType dt) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b);
  return cast(from_vector(v, s, d), dt);
}

// Largest |got - want| over the largest |want|: Winograd's transforms round differently from a
// direct sum, so the error is relative to the output's scale, not to each element.
double scaled_error(const Array& got, const Array& want) {
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  EXPECT_EQ(g.size(), w.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
    err = std::max(err, std::fabs(g[i] - w[i]));
    scale = std::max(scale, std::fabs(w[i]));
  }
  return err / scale;
}

struct ConvCase {
  const char* name;
  int64_t N, C, H, W, O;
  Conv2dOptions opts;
};

TEST(ConvDnnlTest, F32MatchesReferenceAroundWinogradShapes) {
  if (!Device::cpu().available()) GTEST_SKIP() << "no cpu backend";
  const ConvCase cases[] = {
      {"winograd_pad1", 3, 32, 12, 10, 48, {.padding = 1}},
      {"winograd_pad0", 2, 16, 9, 11, 16, {}},
      {"winograd_64", 2, 32, 28, 28, 64, {.padding = 1}},
      {"direct_few_channels", 3, 3, 12, 10, 32, {.padding = 1}},
      {"direct_stride2", 2, 32, 12, 10, 32, {.stride = 2, .padding = 1}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Shape xs{c.N, c.C, c.H, c.W}, ws{c.O, c.C, 3, 3};
    auto on = [&](Device d, DType dt) {
      Array x = det_on(xs, 0.37, 0.1, d, dt), w = mul(det_on(ws, 0.53, 0.7, d, dt), 0.2);
      Array b = det_on({c.O}, 0.9, 0.4, d, dt);
      Array y = conv2d(x, w, b, c.opts);
      Array dy = det_on(y.shape(), 0.29, 0.4, d, dt);
      return std::vector<Array>{y, conv2d_backward_data(dy, w, xs, c.opts), conv2d_backward_weights(x, dy, ws, c.opts)};
    };
    const std::vector<Array> want = on(Device::reference(), DType::F64);
    for (int rep = 0; rep < 2; ++rep) {  // the second call runs the cached primitives
      const std::vector<Array> got = on(Device::cpu(), DType::F32);
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(got[k].shape(), want[k].shape());
        // Measured: Winograd ~5e-6 of the output's scale; direct ~1e-6 (mostly the f32 inputs).
        const double tol = std::string(c.name).rfind("direct", 0) == 0 ? 3e-6 : 2e-5;
        EXPECT_LT(scaled_error(got[k], want[k]), tol) << "pass " << k << " (forward, data, weights)";
      }
    }
  }
}

}  // namespace
}  // namespace ember
