// ONNX Resize (opsets 10 to 19; Upsample is the opset-7/9 form): the output sizes and scales from
// the inputs (scales or sizes, keep_aspect_ratio_policy and axes of opset 18, roi), the attributes
// as ResizeOptions, then the core op resize() (src/ops/nn_resize.cpp): modes nearest, linear and
// cubic, every coordinate_transformation_mode, nearest_mode, cubic_coeff_a, exclude_outside,
// antialias and tf_crop_and_resize's extrapolation_value.
#include <algorithm>
#include <cmath>

#include "ember/ops_nn.h"
#include "onnx/op_registry.h"

namespace ember::onnx::detail {
namespace {

// The node's attributes as resize() options (sizes and scales set by the caller).
ResizeOptions resize_options(const OpContext& c) {
  ResizeOptions o;
  const std::string mode = c.attr_string("mode", "nearest");
  if (mode == "nearest") o.mode = ResizeMode::Nearest;
  else if (mode == "linear") o.mode = ResizeMode::Linear;
  else if (mode == "cubic") o.mode = ResizeMode::Cubic;
  else c.unsupported("mode '" + mode + "'");
  const std::string ctm = c.attr_string("coordinate_transformation_mode", c.opset >= 11 ? "half_pixel" : "asymmetric");
  if (ctm == "half_pixel") o.coordinates = ResizeCoordinates::HalfPixel;
  else if (ctm == "pytorch_half_pixel") o.coordinates = ResizeCoordinates::PytorchHalfPixel;
  else if (ctm == "align_corners") o.coordinates = ResizeCoordinates::AlignCorners;
  else if (ctm == "asymmetric") o.coordinates = ResizeCoordinates::Asymmetric;
  else if (ctm == "tf_half_pixel_for_nn") o.coordinates = ResizeCoordinates::TfHalfPixelForNn;
  else if (ctm == "half_pixel_symmetric") o.coordinates = ResizeCoordinates::HalfPixelSymmetric;
  else if (ctm == "tf_crop_and_resize") o.coordinates = ResizeCoordinates::TfCropAndResize;
  else c.unsupported("coordinate_transformation_mode '" + ctm + "'");
  const std::string nearest = c.attr_string("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") o.nearest = NearestRounding::RoundPreferFloor;
  else if (nearest == "round_prefer_ceil") o.nearest = NearestRounding::RoundPreferCeil;
  else if (nearest == "floor") o.nearest = NearestRounding::Floor;
  else if (nearest == "ceil") o.nearest = NearestRounding::Ceil;
  else c.unsupported("nearest_mode '" + nearest + "'");
  o.cubic_coeff_a = c.attr_float("cubic_coeff_a", -0.75);
  o.exclude_outside = c.attr_int("exclude_outside", 0) != 0;
  o.antialias = c.attr_int("antialias", 0) != 0;
  o.extrapolation_value = c.attr_float("extrapolation_value", 0.0);
  return o;
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

  ResizeOptions o = resize_options(c);
  o.sizes = out;
  o.scales = scales;
  o.roi_start = roi_start;
  o.roi_end = roi_end;
  return {resize(x, o)};
}

const Registrar registrar({
    {"Resize", {op_resize, 10}},
    {"Upsample", {op_resize, 7}},
});

}  // namespace
}  // namespace ember::onnx::detail
