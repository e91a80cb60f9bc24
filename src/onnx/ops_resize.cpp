// ONNX Resize (opsets 10 to 19; Upsample is the opset-7/9 form) as separable interpolation: for
// each resized axis the source positions and weights are computed on the host (they depend only
// on the sizes and attributes), then the axis is a weighted sum of index_select gathers. Modes
// nearest (2 taps, the nearest_mode rounding), linear (2 taps) and cubic (4 taps, cubic_coeff_a,
// exclude_outside); every coordinate_transformation_mode; tf_crop_and_resize's roi and
// extrapolation_value; keep_aspect_ratio_policy and axes (opset 18). Axes are interpolated from
// the last to the first, as ONNX's reference nests them, so extrapolated values propagate the
// same way. antialias (linear and cubic, opset 18) stretches the filter by 1 / scale when
// downsampling, over as many taps as its support covers, normalized to sum 1.
#include <algorithm>
#include <cmath>

#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

struct Taps {
  std::vector<std::vector<int64_t>> index;  // [tap][output position]
  std::vector<std::vector<double>> weight;
  std::vector<bool> outside;  // tf_crop_and_resize: the position maps outside the input
};

double source_coordinate(const OpContext& c, const std::string& mode, double x, double scale, int64_t in, int64_t out,
                         double roi_start, double roi_end) {
  const double out_width = scale * double(in);  // the reference's (possibly fractional) width
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return out_width > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners") return out_width == 1 ? 0.0 : x * double(in - 1) / (out_width - 1);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (mode == "half_pixel_symmetric") {
    double adjustment = double(out) / out_width;
    double center = double(in) / 2;
    double offset = center * (1 - adjustment);
    return offset + (x + 0.5) / scale - 0.5;
  }
  if (mode == "tf_crop_and_resize") {
    if (out_width > 1) return roi_start * double(in - 1) + x * (roi_end - roi_start) * double(in - 1) / (out_width - 1);
    return 0.5 * (roi_start + roi_end) * double(in - 1);
  }
  c.unsupported("coordinate_transformation_mode '" + mode + "'");
}

Taps make_taps(const OpContext& c, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  const std::string mode = c.attr_string("mode", "nearest");
  const std::string ctm = c.attr_string("coordinate_transformation_mode", c.opset >= 11 ? "half_pixel" : "asymmetric");
  const std::string nearest_mode = c.attr_string("nearest_mode", "round_prefer_floor");
  const double A = c.attr_float("cubic_coeff_a", -0.75);
  const bool exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  if (mode != "nearest" && mode != "linear" && mode != "cubic") c.unsupported("mode '" + mode + "'");
  // Antialiasing only changes a downsampled axis: the filter's support grows to 1 / scale taps
  // on each side (ONNX's reference: the first tap offset is floor(-support / scale) + 1).
  const bool antialias = c.attr_int("antialias", 0) != 0 && mode != "nearest" && scale < 1;
  const double support = mode == "cubic" ? 2 : 1;
  const int first_offset = antialias ? int(std::floor(-support / scale)) + 1 : (mode == "cubic" ? -1 : 0);
  const int n = 2 - 2 * first_offset;  // taps first_offset .. 1 - first_offset around the base
  Taps t;
  t.index.assign(size_t(n), std::vector<int64_t>(size_t(out)));
  t.weight.assign(size_t(n), std::vector<double>(size_t(out)));
  t.outside.assign(size_t(out), false);
  for (int64_t o = 0; o < out; ++o) {
    double x = source_coordinate(c, ctm, double(o), scale, in, out, roi_start, roi_end);
    if (ctm == "tf_crop_and_resize" && (x < 0 || x > double(in - 1))) t.outside[size_t(o)] = true;
    // As the reference: an integral x has ratio 1 against the point below it.
    double fl = std::floor(x);
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
        double v;
        if (mode == "linear") v = std::max(0.0, 1 - d);
        else if (d <= 1) v = ((A + 2) * d - (A + 3)) * d * d + 1;
        else if (d < 2) v = ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
        else v = 0;
        w[size_t(k)] = v;
        total += v;
      }
      for (double& v : w) v /= total;
    } else if (mode == "linear") {
      w = {1 - r, r};
    } else if (mode == "nearest") {
      bool up;
      if (r == 1) up = true;
      else if (nearest_mode == "round_prefer_floor") up = r > 0.5;
      else if (nearest_mode == "round_prefer_ceil") up = r >= 0.5;
      else if (nearest_mode == "floor") up = false;
      else if (nearest_mode == "ceil") up = true;
      else c.unsupported("nearest_mode '" + nearest_mode + "'");
      w = {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
    } else {
      double r1 = r + 1, s = 1 - r, s1 = s + 1;
      w = {((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A, ((A + 2) * r - (A + 3)) * r * r + 1,
           ((A + 2) * s - (A + 3)) * s * s + 1, ((A * s1 - 5 * A) * s1 + 8 * A) * s1 - 4 * A};
    }
    const int64_t first = base + first_offset;
    double total = 0;
    for (int k = 0; k < n; ++k) {
      int64_t idx = first + k;
      if (exclude_outside && (idx < 0 || idx >= in)) w[size_t(k)] = 0;
      total += w[size_t(k)];
    }
    for (int k = 0; k < n; ++k) {
      t.index[size_t(k)][size_t(o)] = std::clamp<int64_t>(first + k, 0, in - 1);
      t.weight[size_t(k)][size_t(o)] = exclude_outside && total != 0 ? w[size_t(k)] / total : w[size_t(k)];
    }
  }
  return t;
}

std::vector<Array> op_resize(const OpContext& c) {
  const Array& x = c.input(0);
  const int r = x.rank();
  if (!is_floating(x.dtype())) c.unsupported("resizing " + std::string(dtype_name(x.dtype())) + " tensors");
  std::vector<int64_t> axes_attr = c.attr_ints("axes");
  std::vector<int> axes;
  if (axes_attr.empty())
    for (int d = 0; d < r; ++d) axes.push_back(d);
  for (int64_t a : axes_attr) axes.push_back(c.axis(a, r));
  const size_t na = axes.size();

  std::vector<double> scales(size_t(r), 1.0), roi_start(size_t(r), 0.0), roi_end(size_t(r), 1.0);
  std::vector<int64_t> out(x.shape().begin(), x.shape().end());
  const bool is_upsample = c.node().op_type == "Upsample";
  int scales_input = c.opset >= 11 && !is_upsample ? 2 : 1;
  std::vector<double> sc;
  if (is_upsample && c.opset < 9) sc = c.attr_floats("scales");
  else if (c.has_input(scales_input) && c.input(scales_input).numel() > 0) sc = c.floats_input(scales_input);
  std::vector<int64_t> sizes;
  if (c.opset >= 11 && !is_upsample && c.has_input(3) && c.input(3).numel() > 0) sizes = c.ints_input(3);
  if (c.opset >= 11 && !is_upsample && c.has_input(1) && c.input(1).numel() > 0) {
    std::vector<double> roi = c.floats_input(1);
    if (roi.size() != 2 * na) c.fail("roi must hold 2 values per resized axis");
    for (size_t i = 0; i < na; ++i) {
      roi_start[size_t(axes[i])] = roi[i];
      roi_end[size_t(axes[i])] = roi[i + na];
    }
  }
  if (!sizes.empty()) {
    if (sizes.size() != na) c.fail("sizes must hold one value per resized axis");
    std::string policy = c.attr_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        out[size_t(axes[i])] = sizes[i];
        scales[size_t(axes[i])] = double(sizes[i]) / double(x.shape()[axes[i]]);
      }
    } else {
      double s = policy == "not_larger" ? INFINITY : 0;
      for (size_t i = 0; i < na; ++i) {
        double si = double(sizes[i]) / double(x.shape()[axes[i]]);
        s = policy == "not_larger" ? std::min(s, si) : std::max(s, si);
      }
      for (size_t i = 0; i < na; ++i) {
        out[size_t(axes[i])] = int64_t(std::nearbyint(s * double(x.shape()[axes[i]])));
        scales[size_t(axes[i])] = s;
      }
    }
  } else if (!sc.empty()) {
    if (sc.size() != na) c.fail("scales must hold one value per resized axis");
    for (size_t i = 0; i < na; ++i) {
      if (sc[i] <= 0) c.fail("scales must be positive");
      scales[size_t(axes[i])] = sc[i];
      out[size_t(axes[i])] = int64_t(std::floor(double(x.shape()[axes[i]]) * sc[i]));
    }
  } else {
    c.fail("needs scales or sizes");
  }

  const double extrapolation = c.attr_float("extrapolation_value", 0.0);
  Array y = x;
  for (int d = r - 1; d >= 0; --d) {
    const int64_t in = x.shape()[d], o = out[size_t(d)];
    if (o == in && scales[size_t(d)] == 1.0 && roi_start[size_t(d)] == 0.0 && roi_end[size_t(d)] == 1.0) continue;
    Taps t = make_taps(c, in, o, scales[size_t(d)], roi_start[size_t(d)], roi_end[size_t(d)]);
    std::vector<int64_t> view(size_t(r), 1);
    view[size_t(d)] = o;
    Array acc;
    for (size_t k = 0; k < t.index.size(); ++k) {
      Array picked = index_select(y, d, from_vector(t.index[k], Shape{o}, y.device()));
      Array w = cast(reshape(from_vector(t.weight[k], Shape{o}, y.device()), Shape(view)), y.dtype());
      Array term = mul(picked, w);
      acc = acc.defined() ? add(acc, term) : term;
    }
    if (std::find(t.outside.begin(), t.outside.end(), true) != t.outside.end()) {
      std::vector<bool> outside(t.outside.begin(), t.outside.end());
      Array mask = reshape(from_vector(outside, Shape{o}, y.device()), Shape(view));
      acc = where(mask, full_like(acc, extrapolation), acc);
    }
    y = acc;
  }
  return {y};
}

const Registrar registrar({
    {"Resize", {op_resize, 10}},
    {"Upsample", {op_resize, 7}},
});

}  // namespace
}  // namespace ember::onnx::detail
