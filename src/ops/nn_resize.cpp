// resize() (include/ember/ops_nn.h): ONNX Resize's separable interpolation as a tensor op, which
// the ONNX importer (src/onnx/ops_resize.cpp) and interpolate's bicubic mode call. For each resized
// dim the source positions and weights are computed on the host (they depend only on the sizes and
// the options), then the dim is a weighted sum of index_select gathers: nearest (2 taps, one of
// weight 1, rounded as `nearest` says), linear (2 taps), cubic (4 taps, Keys' kernel with
// cubic_coeff_a, exclude_outside); antialias stretches a downsampling filter over 1 / scale times
// as many taps, normalized to sum 1. Dims are resized from the last to the first, as ONNX's
// reference nests them, so extrapolated values propagate the same way.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ops/call_error.h"

namespace ember {

namespace {

constexpr const char* kOp = "resize";

struct Taps {
  std::vector<std::vector<int64_t>> index;  // [tap][output position]
  std::vector<std::vector<double>> weight;
  std::vector<bool> outside;  // TfCropAndResize: the position maps outside the input
};

double source_coordinate(ResizeCoordinates mode, double x, double scale, int64_t in, int64_t out, double roi_start,
                         double roi_end) {
  const double out_width = scale * double(in);  // the reference's (possibly fractional) width
  switch (mode) {
    case ResizeCoordinates::HalfPixel: return (x + 0.5) / scale - 0.5;
    case ResizeCoordinates::PytorchHalfPixel: return out_width > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoordinates::AlignCorners: return out_width == 1 ? 0.0 : x * double(in - 1) / (out_width - 1);
    case ResizeCoordinates::Asymmetric: return x / scale;
    case ResizeCoordinates::TfHalfPixelForNn: return (x + 0.5) / scale;
    case ResizeCoordinates::HalfPixelSymmetric: {
      const double adjustment = double(out) / out_width;
      const double center = double(in) / 2;
      return center * (1 - adjustment) + (x + 0.5) / scale - 0.5;
    }
    case ResizeCoordinates::TfCropAndResize:
      if (out_width > 1)
        return roi_start * double(in - 1) + x * (roi_end - roi_start) * double(in - 1) / (out_width - 1);
      return 0.5 * (roi_start + roi_end) * double(in - 1);
  }
  return 0;
}

// Keys' cubic kernel at distance d >= 0 with parameter a.
double cubic(double d, double a) {
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

Taps make_taps(const ResizeOptions& o, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  const double A = o.cubic_coeff_a;
  // Antialiasing only changes a downsampled dim: the filter's support grows to 1 / scale taps on
  // each side (ONNX's reference: the first tap offset is floor(-support / scale) + 1).
  const bool antialias = o.antialias && o.mode != ResizeMode::Nearest && scale < 1;
  const double support = o.mode == ResizeMode::Cubic ? 2 : 1;
  const int first_offset = antialias ? int(std::floor(-support / scale)) + 1 : (o.mode == ResizeMode::Cubic ? -1 : 0);
  const int n = 2 - 2 * first_offset;  // taps first_offset .. 1 - first_offset around the base
  Taps t;
  t.index.assign(size_t(n), std::vector<int64_t>(size_t(out)));
  t.weight.assign(size_t(n), std::vector<double>(size_t(out)));
  t.outside.assign(size_t(out), false);
  for (int64_t p = 0; p < out; ++p) {
    const double x = source_coordinate(o.coordinates, double(p), scale, in, out, roi_start, roi_end);
    if (o.coordinates == ResizeCoordinates::TfCropAndResize && (x < 0 || x > double(in - 1))) t.outside[size_t(p)] = true;
    // As the reference: an integral x has ratio 1 against the point below it.
    const double fl = std::floor(x);
    int64_t base = int64_t(fl);
    double r = x - fl;
    if (r == 0) {
      base -= 1;
      r = 1;
    }
    std::vector<double> w(static_cast<size_t>(n));
    if (antialias) {
      // Tap k sits at offset first_offset + k from the base; its weight is the filter at the
      // distance scaled down by the scale.
      double total = 0;
      for (int k = 0; k < n; ++k) {
        const double d = std::fabs(scale * (double(first_offset + k) - r));
        w[size_t(k)] = o.mode == ResizeMode::Linear ? std::max(0.0, 1 - d) : cubic(d, A);
        total += w[size_t(k)];
      }
      for (double& v : w) v /= total;
    } else if (o.mode == ResizeMode::Linear) {
      w = {1 - r, r};
    } else if (o.mode == ResizeMode::Nearest) {
      bool up = false;
      switch (o.nearest) {
        case NearestRounding::RoundPreferFloor: up = r > 0.5; break;
        case NearestRounding::RoundPreferCeil: up = r >= 0.5; break;
        case NearestRounding::Floor: up = false; break;
        case NearestRounding::Ceil: up = true; break;
      }
      if (r == 1) up = true;
      w = {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
    } else {
      w = {cubic(r + 1, A), cubic(r, A), cubic(1 - r, A), cubic(2 - r, A)};
    }
    const int64_t first = base + first_offset;
    double total = 0;
    for (int k = 0; k < n; ++k) {
      const int64_t idx = first + k;
      if (o.exclude_outside && (idx < 0 || idx >= in)) w[size_t(k)] = 0;
      total += w[size_t(k)];
    }
    for (int k = 0; k < n; ++k) {
      t.index[size_t(k)][size_t(p)] = std::clamp<int64_t>(first + k, 0, in - 1);
      t.weight[size_t(k)][size_t(p)] = o.exclude_outside && total != 0 ? w[size_t(k)] / total : w[size_t(k)];
    }
  }
  return t;
}

// The per-dim list `v` (named `what`) has one entry per dim of x, or is empty when `optional`.
template <class T>
void check_per_dim(const std::vector<T>& v, const char* what, const Shape& shape, bool optional) {
  if ((optional && v.empty()) || v.size() == size_t(shape.rank())) return;
  throw call_error(fmt::format("{}: {} has {} entries; the input {} has {} dims", kOp, what, v.size(), shape.str(),
                               shape.rank()));
}

}  // namespace

Array resize(const Array& x, const ResizeOptions& o, Loc loc) {
  UserCall call("resize", loc);
  if (!x.defined()) throw call_error(fmt::format("{}: the input is undefined", kOp));
  if (!is_floating(x.dtype()))
    throw call_error(fmt::format("{}: needs a floating input, got {}; cast it first", kOp, dtype_name(x.dtype())));
  const Shape& xs = x.shape();
  const int r = xs.rank();
  check_per_dim(o.sizes, "sizes", xs, false);
  check_per_dim(o.scales, "scales", xs, true);
  check_per_dim(o.roi_start, "roi_start", xs, true);
  check_per_dim(o.roi_end, "roi_end", xs, true);
  for (int d = 0; d < r; ++d) {
    if (o.sizes[size_t(d)] < 0)
      throw call_error(fmt::format("{}: sizes[{}] is {}, must not be negative", kOp, d, o.sizes[size_t(d)]));
    if (!o.scales.empty() && !(o.scales[size_t(d)] > 0 && std::isfinite(o.scales[size_t(d)])))
      throw call_error(fmt::format("{}: scales[{}] is {}, must be positive and finite", kOp, d, o.scales[size_t(d)]));
    if (xs[d] == 0 && o.sizes[size_t(d)] > 0)
      throw call_error(fmt::format("{}: dim {} of the input {} is empty; it cannot be resized to {}", kOp, d, xs.str(),
                                   o.sizes[size_t(d)]));
  }
  if (!std::isfinite(o.cubic_coeff_a))
    throw call_error(fmt::format("{}: cubic_coeff_a must be finite, got {}", kOp, o.cubic_coeff_a));
  Array y = x;
  for (int d = r - 1; d >= 0; --d) {
    const int64_t in = xs[d], out = o.sizes[size_t(d)];
    const double scale = o.scales.empty() ? (in > 0 ? double(out) / double(in) : 1.0) : o.scales[size_t(d)];
    const double roi_start = o.roi_start.empty() ? 0.0 : o.roi_start[size_t(d)];
    const double roi_end = o.roi_end.empty() ? 1.0 : o.roi_end[size_t(d)];
    if (out == in && scale == 1.0 && roi_start == 0.0 && roi_end == 1.0) continue;
    if (out == 0 || in == 0) {  // nothing to interpolate: an empty result of the right shape
      std::vector<int64_t> shape(y.shape().begin(), y.shape().end());
      shape[size_t(d)] = out;
      y = zeros(Shape(shape), {y.dtype(), y.device()});
      continue;
    }
    const Taps t = make_taps(o, in, out, scale, roi_start, roi_end);
    std::vector<int64_t> view(size_t(r), 1);
    view[size_t(d)] = out;
    Array acc;
    for (size_t k = 0; k < t.index.size(); ++k) {
      Array picked = index_select(y, d, from_vector(t.index[k], Shape{out}, y.device()));
      Array w = cast(reshape(from_vector(t.weight[k], Shape{out}, y.device()), Shape(view)), y.dtype());
      Array term = mul(picked, w);
      acc = acc.defined() ? add(acc, term) : term;
    }
    if (std::find(t.outside.begin(), t.outside.end(), true) != t.outside.end()) {
      std::vector<bool> outside(t.outside.begin(), t.outside.end());
      Array mask = reshape(from_vector(outside, Shape{out}, y.device()), Shape(view));
      acc = where(mask, full_like(acc, o.extrapolation_value), acc);
    }
    y = acc;
  }
  return y;
}

}  // namespace ember
