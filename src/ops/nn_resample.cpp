// interpolate() (include/ember/ops_nn.h): nearest modes gather source indices along each spatial
// dim (index_select), linear modes multiply by [out, in] interpolation matrices built on the host,
// bicubic is resize() (src/ops/nn_resize.cpp) with Keys' a = -0.75 and PyTorch's coordinates; all
// are existing differentiable ops.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <optional>

#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ops/call_error.h"

namespace ember {

const char* interpolate_mode_name(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::Nearest: return "nearest";
    case InterpolateMode::NearestExact: return "nearest-exact";
    case InterpolateMode::Linear: return "linear";
    case InterpolateMode::Bilinear: return "bilinear";
    case InterpolateMode::Bicubic: return "bicubic";
  }
  return "?";
}

namespace {

constexpr const char* kOp = "interpolate";

// One spatial dim: input and output sizes, and the scale factor the user gave (kept only when
// the interpolation uses it, i.e. not recomputed).
struct DimPlan {
  int64_t in = 0, out = 0;
  std::optional<double> factor;
};

bool is_nearest(InterpolateMode m) { return m == InterpolateMode::Nearest || m == InterpolateMode::NearestExact; }

std::string sizes_text(const std::vector<int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }
std::string scales_text(const std::vector<double>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::vector<DimPlan> plan(const Array& x, const InterpolateOptions& o) {
  if (!x.defined()) throw call_error(fmt::format("{}: the input is undefined", kOp));
  if (!is_floating(x.dtype()))
    throw call_error(fmt::format("{}: needs a floating input, got {}", kOp, dtype_name(x.dtype())));
  const int r = x.rank();
  const char* mode = interpolate_mode_name(o.mode);
  if (r != 3 && r != 4)
    throw call_error(fmt::format("{}: input must be 3-D [N, C, L] or 4-D [N, C, H, W], got {}", kOp, x.shape().str()));
  if (o.mode == InterpolateMode::Linear && r != 3)
    throw call_error(fmt::format("{}: mode '{}' needs a 3-D input [N, C, L], got {}", kOp, mode, x.shape().str()));
  if ((o.mode == InterpolateMode::Bilinear || o.mode == InterpolateMode::Bicubic) && r != 4)
    throw call_error(fmt::format("{}: mode '{}' needs a 4-D input [N, C, H, W], got {}", kOp, mode, x.shape().str()));
  if (o.align_corners && is_nearest(o.mode))
    throw call_error(fmt::format("{}: align_corners only applies to the linear modes, not '{}'", kOp, mode));
  const bool has_size = !o.size.empty(), has_scale = !o.scale_factor.empty();
  if (has_size == has_scale)
    throw call_error(fmt::format("{}: give exactly one of size ({}) and scale_factor ({})", kOp, sizes_text(o.size),
                            scales_text(o.scale_factor)));
  if (has_size && o.recompute_scale_factor)
    throw call_error(fmt::format("{}: recompute_scale_factor needs a scale_factor, not a size", kOp));
  const size_t spatial = size_t(r - 2);
  const size_t given = has_size ? o.size.size() : o.scale_factor.size();
  if (given != 1 && given != spatial)
    throw call_error(fmt::format("{}: {} has {} entries; the input {} has {} spatial dims", kOp,
                            has_size ? "size" : "scale_factor", given, x.shape().str(), spatial));
  std::vector<DimPlan> dims(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    DimPlan& d = dims[i];
    d.in = x.size(int(i) + 2);
    if (d.in < 1) throw call_error(fmt::format("{}: input {} has an empty spatial dim", kOp, x.shape().str()));
    if (has_size) {
      d.out = o.size[given == 1 ? 0 : i];
      if (d.out < 1) throw call_error(fmt::format("{}: size {} must be positive", kOp, sizes_text(o.size)));
    } else {
      const double f = o.scale_factor[given == 1 ? 0 : i];
      if (!(f > 0) || !std::isfinite(f))
        throw call_error(fmt::format("{}: scale_factor {} must be positive and finite", kOp, scales_text(o.scale_factor)));
      d.out = static_cast<int64_t>(std::floor(double(d.in) * f));
      if (d.out < 1)
        throw call_error(fmt::format("{}: scale_factor {} gives an empty output for input {}", kOp,
                                scales_text(o.scale_factor), x.shape().str()));
      if (!o.recompute_scale_factor) d.factor = f;
    }
  }
  return dims;
}

// Source index of each output position for the nearest modes. As PyTorch, the scale and the
// products are single precision; same size and exact doubling take the exact shortcut.
std::vector<int64_t> nearest_index(const DimPlan& d, bool exact) {
  std::vector<int64_t> idx(static_cast<size_t>(d.out));
  const float scale = d.factor ? static_cast<float>(1.0 / *d.factor) : static_cast<float>(d.in) / float(d.out);
  for (int64_t j = 0; j < d.out; ++j) {
    int64_t src;
    if (!exact && d.out == d.in) src = j;
    else if (!exact && d.out == 2 * d.in) src = j / 2;
    else {
      const float pos = exact ? (static_cast<float>(j) + 0.5f) * scale : static_cast<float>(j) * scale;
      src = std::min(static_cast<int64_t>(std::floor(pos)), d.in - 1);
    }
    idx[static_cast<size_t>(j)] = src;
  }
  return idx;
}

// [out, in] (or its transpose) linear interpolation weights: output j reads source position
// s = j * (in - 1) / (out - 1) with align_corners, else max((j + 0.5) * scale - 0.5, 0), split
// between floor(s) and the next index by the fraction.
Array linear_matrix(const DimPlan& d, bool align_corners, bool transposed, DType dtype, Device device) {
  std::vector<double> m(static_cast<size_t>(d.in * d.out), 0.0);
  double scale;
  if (align_corners) scale = d.out > 1 ? double(d.in - 1) / double(d.out - 1) : 0.0;
  else scale = d.factor ? 1.0 / *d.factor : double(d.in) / double(d.out);
  for (int64_t j = 0; j < d.out; ++j) {
    double s = align_corners ? scale * double(j) : std::max(scale * (double(j) + 0.5) - 0.5, 0.0);
    const int64_t i0 = std::min(static_cast<int64_t>(s), d.in - 1);
    const int64_t i1 = i0 < d.in - 1 ? i0 + 1 : i0;
    const double lam = std::min(s - double(i0), 1.0);
    auto at = [&](int64_t i) -> double& {
      return m[static_cast<size_t>(transposed ? i * d.out + j : j * d.in + i)];
    };
    at(i0) += 1.0 - lam;
    at(i1) += lam;
  }
  Shape shape = transposed ? Shape{d.in, d.out} : Shape{d.out, d.in};
  return cast(from_vector(m, shape, device), dtype);
}

}  // namespace

Array interpolate(const Array& x, const InterpolateOptions& o, Loc loc) {
  UserCall call("interpolate", loc);
  const std::vector<DimPlan> dims = plan(x, o);
  const int r = x.rank();
  if (is_nearest(o.mode)) {
    Array y = x;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i].in == dims[i].out && !dims[i].factor) continue;  // the identity index
      std::vector<int64_t> idx = nearest_index(dims[i], o.mode == InterpolateMode::NearestExact);
      y = index_select(y, int(i) + 2, from_vector(idx, Shape{dims[i].out}, x.device()));
    }
    return y;
  }
  if (o.mode == InterpolateMode::Bicubic) {
    // PyTorch's bicubic: source (j + 0.5) / factor - 0.5 (not clamped: the taps are), or
    // j (in - 1) / (out - 1) with align_corners; indices clamped to the input, a = -0.75.
    ResizeOptions ro{.mode = ResizeMode::Cubic,
                     .coordinates = o.align_corners ? ResizeCoordinates::AlignCorners : ResizeCoordinates::HalfPixel,
                     .cubic_coeff_a = -0.75};
    ro.sizes = {x.size(0), x.size(1), dims[0].out, dims[1].out};
    ro.scales = {1.0, 1.0};
    for (const DimPlan& d : dims)
      ro.scales.push_back(d.factor && !o.align_corners ? *d.factor : double(d.out) / double(d.in));
    return resize(x, ro);
  }
  // Linear modes: the last dim multiplies from the right by [in, out], the height (4-D) from
  // the left by [out, in] (broadcast over N and C).
  Array y = matmul(x, linear_matrix(dims.back(), o.align_corners, true, x.dtype(), x.device()));
  if (r == 4) y = matmul(linear_matrix(dims[0], o.align_corners, false, x.dtype(), x.device()), y);
  return y;
}

}  // namespace ember
