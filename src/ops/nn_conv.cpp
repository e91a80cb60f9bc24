// 3-D and transposed convolutions (include/ember/ops_nn.h), composed from existing ops.
// conv3d: depth padding (pad), strided depth slices per kernel-depth tap (slice, stack), a
// permute/reshape that folds the taps into the channels (group-major, as the grouped weight
// expects) and the output depths into the batch, and one conv2d over (H, W).
// conv_transpose1d/2d: the data-gradient of a convolution (library op conv2d_backward_data).
// Autodiff comes from those ops.
#include <fmt/format.h>

#include <algorithm>

#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ops/call_error.h"

namespace ember {

namespace {

std::string triple_text(const IntTriple& t) { return fmt::format("({}, {}, {})", t.d, t.h, t.w); }

struct Pads {
  int64_t lo[3], hi[3];
};

}  // namespace

Array conv3d(const Array& x, const Array& weight, const Array& bias, Conv3dOptions o, Loc loc) {
  UserCall call("conv3d", loc);
  const char* op = "conv3d";
  if (!x.defined() || !weight.defined()) throw call_error(fmt::format("{}: input and weight must be defined", op));
  if (x.rank() != 5) throw call_error(fmt::format("{}: input must be 5-D [N, C, D, H, W], got {}", op, x.shape().str()));
  if (weight.rank() != 5)
    throw call_error(fmt::format("{}: weight must be 5-D [O, C / groups, KD, KH, KW], got {}", op, weight.shape().str()));
  if (!is_floating(x.dtype()) || !is_floating(weight.dtype()))
    throw call_error(fmt::format("{}: needs floating input and weight, got {} and {}", op, dtype_name(x.dtype()),
                            dtype_name(weight.dtype())));
  if (o.groups < 1) throw call_error(fmt::format("{}: groups must be at least 1, got {}", op, o.groups));
  const int64_t stride[3] = {o.stride.d, o.stride.h, o.stride.w};
  const int64_t dil[3] = {o.dilation.d, o.dilation.h, o.dilation.w};
  for (int i = 0; i < 3; ++i)
    if (stride[i] < 1 || dil[i] < 1)
      throw call_error(fmt::format("{}: stride {} and dilation {} must be at least 1", op, triple_text(o.stride),
                              triple_text(o.dilation)));
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  const int64_t N = xs[0], C = xs[1], O = ws[0], g = o.groups;
  if (C % g != 0 || O % g != 0)
    throw call_error(fmt::format("{}: groups {} must divide the input channels {} and the output channels {}", op, g, C, O));
  if (ws[1] * g != C)
    throw call_error(fmt::format("{}: channel mismatch: input {} has {} channels, weight {} expects {} ({} per group x {} "
                            "groups)",
                            op, xs.str(), C, ws.str(), ws[1] * g, ws[1], g));
  for (int i = 0; i < 3; ++i)
    if (ws[2 + i] < 1) throw call_error(fmt::format("{}: weight {} has an empty kernel dim", op, ws.str()));

  Pads p{};
  const int64_t given[3] = {o.padding.size.d, o.padding.size.h, o.padding.size.w};
  if (o.padding.is_same && (stride[0] != 1 || stride[1] != 1 || stride[2] != 1))
    throw call_error(fmt::format("{}: padding 'same' needs stride 1, got {}", op, triple_text(o.stride)));
  for (int i = 0; i < 3; ++i) {
    if (o.padding.is_same) {
      const int64_t total = dil[i] * (ws[2 + i] - 1);
      p.lo[i] = total / 2;
      p.hi[i] = total - p.lo[i];
    } else {
      if (given[i] < 0)
        throw call_error(fmt::format("{}: padding must not be negative, got {}", op, triple_text(o.padding.size)));
      p.lo[i] = p.hi[i] = given[i];
    }
  }
  int64_t out[3];
  for (int i = 0; i < 3; ++i) {
    const int64_t span = xs[2 + i] + p.lo[i] + p.hi[i] - dil[i] * (ws[2 + i] - 1) - 1;
    out[i] = span < 0 ? 0 : span / stride[i] + 1;
    if (out[i] < 1)
      throw call_error(fmt::format("{}: kernel ({}, {}, {}) with dilation {} is larger than the padded input ({}, {}, {})",
                              op, ws[2], ws[3], ws[4], triple_text(o.dilation), xs[2] + p.lo[0] + p.hi[0],
                              xs[3] + p.lo[1] + p.hi[1], xs[4] + p.lo[2] + p.hi[2]));
  }
  if (bias.defined() && (bias.rank() != 1 || bias.size(0) != O))
    throw call_error(fmt::format("{}: bias must have shape [{}] (the output channels), got {}", op, O, bias.shape().str()));

  const int64_t KD = ws[2], OD = out[0], H = xs[3], W = xs[4];
  Array xp = (p.lo[0] || p.hi[0]) ? pad(x, {0, 0, 0, 0, p.lo[0], p.hi[0]}) : x;
  std::vector<Array> taps;
  taps.reserve(static_cast<size_t>(KD));
  for (int64_t kd = 0; kd < KD; ++kd) {
    const int64_t start = kd * dil[0];
    taps.push_back(slice(xp, 2, start, start + (OD - 1) * stride[0] + 1, stride[0]));  // [N, C, OD, H, W]
  }
  Array t = stack(taps, 2);                                 // [N, C, KD, OD, H, W]
  t = reshape(t, Shape{N, g, C / g, KD, OD, H, W});         // channels split into groups
  t = permute(t, {0, 4, 1, 3, 2, 5, 6});                    // [N, OD, g, KD, C / g, H, W]
  t = reshape(t, Shape{N * OD, C * KD, H, W});
  Array w2 = reshape(permute(weight, {0, 2, 1, 3, 4}), Shape{O, KD * (C / g), ws[3], ws[4]});
  Conv2dOptions o2{.stride = {stride[1], stride[2]},
                   .padding = Padding2d(p.lo[1], p.hi[1], p.lo[2], p.hi[2]),
                   .dilation = {dil[1], dil[2]},
                   .groups = g};
  Array y = conv2d(t, w2, bias, o2);  // [N * OD, O, OH, OW]
  y = reshape(y, Shape{N, OD, O, out[1], out[2]});
  return permute(y, {0, 2, 1, 3, 4});
}

Array conv3d(const Array& x, const Array& weight, Conv3dOptions opts, Loc loc) {
  UserCall call("conv3d", loc); return conv3d(x, weight, Array(), opts); }


namespace {

std::string pair_text(IntPair p) { return fmt::format("({}, {})", p.h, p.w); }

// The output size of one spatial dim, split into the part conv2d_backward_data produces (the
// largest size whose forward convolution has exactly `in` outputs) and the zero rows/columns
// past it (output_padding >= stride, allowed when output_padding < dilation).
struct DimPlan {
  int64_t direct = 0, extra = 0;
};
DimPlan plan_dim(int64_t in, int64_t k, int64_t s, int64_t p, int64_t op, int64_t d) {
  const int64_t base = (in - 1) * s - 2 * p + d * (k - 1) + 1;
  const int64_t direct_op = std::min(op, s - 1);
  return {base + direct_op, op - direct_op};
}

}  // namespace

Array conv_transpose2d(const Array& x, const Array& weight, const Array& bias, ConvTranspose2dOptions o, Loc loc) {
  UserCall call("conv_transpose2d", loc);
  const char* op = "conv_transpose2d";
  if (!x.defined() || !weight.defined()) throw call_error(fmt::format("{}: input and weight must be defined", op));
  if (x.rank() != 4) throw call_error(fmt::format("{}: input must be 4-D [N, C, H, W], got {}", op, x.shape().str()));
  if (weight.rank() != 4)
    throw call_error(fmt::format("{}: weight must be 4-D [in, out / groups, KH, KW], got {}", op, weight.shape().str()));
  if (!is_floating(x.dtype()) || !is_floating(weight.dtype()))
    throw call_error(fmt::format("{}: needs floating input and weight, got {} and {}", op, dtype_name(x.dtype()),
                            dtype_name(weight.dtype())));
  if (o.groups < 1) throw call_error(fmt::format("{}: groups must be at least 1, got {}", op, o.groups));
  if (o.stride.h < 1 || o.stride.w < 1 || o.dilation.h < 1 || o.dilation.w < 1)
    throw call_error(fmt::format("{}: stride {} and dilation {} must be at least 1", op, pair_text(o.stride),
                            pair_text(o.dilation)));
  if (o.padding.h < 0 || o.padding.w < 0 || o.output_padding.h < 0 || o.output_padding.w < 0)
    throw call_error(fmt::format("{}: padding {} and output_padding {} must not be negative", op, pair_text(o.padding),
                            pair_text(o.output_padding)));
  if (o.output_padding.h >= std::max(o.stride.h, o.dilation.h) ||
      o.output_padding.w >= std::max(o.stride.w, o.dilation.w))
    throw call_error(fmt::format("{}: output_padding {} must be smaller than the stride {} or the dilation {}", op,
                            pair_text(o.output_padding), pair_text(o.stride), pair_text(o.dilation)));
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  const int64_t C = xs[1];
  if (ws[0] != C)
    throw call_error(fmt::format("{}: input {} has {} channels, weight {} expects {} (dim 0)", op, xs.str(), C, ws.str(),
                            ws[0]));
  if (C % o.groups != 0)
    throw call_error(fmt::format("{}: groups {} must divide the input channels {}", op, o.groups, C));
  const int64_t O = ws[1] * o.groups;
  const DimPlan ph = plan_dim(xs[2], ws[2], o.stride.h, o.padding.h, o.output_padding.h, o.dilation.h);
  const DimPlan pw = plan_dim(xs[3], ws[3], o.stride.w, o.padding.w, o.output_padding.w, o.dilation.w);
  if (ws[2] < 1 || ws[3] < 1 || xs[2] < 1 || xs[3] < 1 || ph.direct < 1 || pw.direct < 1)
    throw call_error(fmt::format("{}: input {}, weight {}, padding {}: the output size ({}, {}) is not positive", op,
                            xs.str(), ws.str(), pair_text(o.padding), ph.direct + ph.extra, pw.direct + pw.extra));
  if (bias.defined() && (bias.rank() != 1 || bias.size(0) != O))
    throw call_error(fmt::format("{}: bias must have shape [{}] (the output channels), got {}", op, O, bias.shape().str()));

  Conv2dOptions fwd{.stride = o.stride, .padding = Padding2d(o.padding.h, o.padding.w), .dilation = o.dilation,
                    .groups = o.groups};
  Array y = conv2d_backward_data(x, weight, Shape{xs[0], O, ph.direct, pw.direct}, fwd);
  if (ph.extra > 0 || pw.extra > 0) y = pad(y, {0, pw.extra, 0, ph.extra});
  if (bias.defined()) y = add(y, reshape(cast(bias, y.dtype()), Shape{1, O, 1, 1}));
  return y;
}

Array conv_transpose2d(const Array& x, const Array& weight, ConvTranspose2dOptions opts, Loc loc) {
  UserCall call("conv_transpose2d", loc);
  return conv_transpose2d(x, weight, Array(), opts);
}

Array conv_transpose1d(const Array& x, const Array& weight, const Array& bias, ConvTranspose1dOptions o, Loc loc) {
  UserCall call("conv_transpose1d", loc);
  const char* op = "conv_transpose1d";
  if (!x.defined() || !weight.defined()) throw call_error(fmt::format("{}: input and weight must be defined", op));
  if (x.rank() != 3) throw call_error(fmt::format("{}: input must be 3-D [N, C, L], got {}", op, x.shape().str()));
  if (weight.rank() != 3)
    throw call_error(fmt::format("{}: weight must be 3-D [in, out / groups, K], got {}", op, weight.shape().str()));
  if (o.output_padding >= std::max(o.stride, o.dilation))
    throw call_error(fmt::format("{}: output_padding {} must be smaller than the stride {} or the dilation {}", op,
                            o.output_padding, o.stride, o.dilation));
  ConvTranspose2dOptions o2{.stride = {1, o.stride}, .padding = {0, o.padding}, .output_padding = {0, o.output_padding},
                            .dilation = {1, o.dilation}, .groups = o.groups};
  try {
    return squeeze(conv_transpose2d(unsqueeze(x, 2), unsqueeze(weight, 2), bias, o2), 2);
  } catch (const Error& e) {
    // Name this op; the 2-D message's shapes carry the extra unit dim.
    throw Error(fmt::format("{} (as a 2-D transposed convolution over [N, C, 1, L]): {}", op, e.what()));
  }
}

Array conv_transpose1d(const Array& x, const Array& weight, ConvTranspose1dOptions opts, Loc loc) {
  UserCall call("conv_transpose1d", loc);
  return conv_transpose1d(x, weight, Array(), opts);
}

}  // namespace ember
