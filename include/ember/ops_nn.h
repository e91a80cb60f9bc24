// Tensor ops of neural networks, composed from the core and library ops (their gradients come
// from those ops' rules): 3-D and transposed convolutions, resampling, normalizations (batch,
// layer, RMS, group, instance), scaled dot-product attention, dropout and embedding lookup. The
// nn layers call them; the ONNX importer and user code can too, without the nn modules. Options
// are aggregates for designated initializers, as in ember/ops_library.h.
// (The nn namespace keeps the names of these functions and option structs for existing code.)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ember/array.h"
#include "ember/ops_library.h"

namespace ember {

// ---- 3-D convolution (src/ops/nn_conv.cpp) -------------------------------------------------------
// The KD depth taps of every output depth are strided depth slices of the (depth-padded) input,
// folded into the channels and the batch of one conv2d.
// A (depth, height, width) triple; one number means all three.
struct IntTriple {
  int64_t d = 0, h = 0, w = 0;
  IntTriple() = default;
  IntTriple(int64_t v) : d(v), h(v), w(v) {}  // NOLINT: implicit, so `.stride = 2` works
  IntTriple(int64_t d_, int64_t h_, int64_t w_) : d(d_), h(h_), w(w_) {}
};

// Zero padding of a 3-D convolution: per dim on both sides (one number or {d, h, w}), or same()
// (stride 1 only: the output has the input's size; an odd total puts the extra plane at the end,
// as PyTorch does).
struct Padding3d {
  IntTriple size = 0;
  bool is_same = false;
  Padding3d() = default;
  Padding3d(int64_t p) : size(p) {}  // NOLINT: implicit on purpose
  Padding3d(int64_t d, int64_t h, int64_t w) : size(d, h, w) {}
  static Padding3d same() {
    Padding3d p;
    p.is_same = true;
    return p;
  }
};

struct Conv3dOptions {
  IntTriple stride = 1;
  Padding3d padding = 0;
  IntTriple dilation = 1;
  int64_t groups = 1;
};

// x [N, C, D, H, W], weight [O, C / groups, KD, KH, KW], bias [O] (optional) -> [N, O, OD, OH, OW]
// with OD = (D + 2 * pad_d - dilation_d * (KD - 1) - 1) / stride_d + 1 (likewise OH, OW).
Array conv3d(const Array& x, const Array& weight, const Array& bias, Conv3dOptions opts = {}, Loc loc = Loc::current());
Array conv3d(const Array& x, const Array& weight, Conv3dOptions opts = {}, Loc loc = Loc::current());

// ---- transposed convolution (src/ops/nn_conv.cpp) -------------------------------------------------
// The adjoint of a convolution (library op conv2d_backward_data). Weights use PyTorch's layout
// [in, out / groups, k...]; the output size per spatial dim is (in - 1) * stride - 2 * padding +
// dilation * (k - 1) + output_padding + 1, as in PyTorch.
struct ConvTranspose2dOptions {
  IntPair stride = 1;
  IntPair padding = 0;         // removed from both sides of each spatial dim of the output
  IntPair output_padding = 0;  // added to one side (bottom / right); < stride or < dilation
  IntPair dilation = 1;
  int64_t groups = 1;
};
struct ConvTranspose1dOptions {
  int64_t stride = 1;
  int64_t padding = 0;
  int64_t output_padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
};

// x [N, C, H, W], weight [C, O / groups, KH, KW], bias [O] (optional) -> [N, O, OH, OW].
Array conv_transpose2d(const Array& x, const Array& weight, const Array& bias, ConvTranspose2dOptions opts = {}, Loc loc = Loc::current());
Array conv_transpose2d(const Array& x, const Array& weight, ConvTranspose2dOptions opts = {}, Loc loc = Loc::current());
// x [N, C, L], weight [C, O / groups, K], bias [O] (optional) -> [N, O, OL].
Array conv_transpose1d(const Array& x, const Array& weight, const Array& bias, ConvTranspose1dOptions opts = {}, Loc loc = Loc::current());
Array conv_transpose1d(const Array& x, const Array& weight, ConvTranspose1dOptions opts = {}, Loc loc = Loc::current());

// ---- resampling (src/ops/nn_resample.cpp) ---------------------------------------------------------
// interpolate() as PyTorch's torch.nn.functional.interpolate for [N, C, L] and [N, C, H, W]:
// nearest (source index floor(dst * scale), computed in single precision as PyTorch does),
// nearest_exact (floor((dst + 0.5) * scale)), linear (3-D) and bilinear (4-D), with or without
// align_corners. Nearest modes are index_selects, the linear modes matmuls with host-built
// interpolation matrices.
enum class InterpolateMode { Nearest, NearestExact, Linear, Bilinear, Bicubic };

struct InterpolateOptions {
  std::vector<int64_t> size{};         // output size per spatial dim (one number: every dim), or empty
  std::vector<double> scale_factor{};  // output = floor(input * factor) per spatial dim (one: every dim), or empty
  InterpolateMode mode = InterpolateMode::Nearest;
  bool align_corners = false;  // linear / bilinear / bicubic only: the corner samples of input and output line up
  bool recompute_scale_factor = false;  // with scale_factor: interpolate with in / out instead of 1 / factor

  std::string to_json() const;
  static InterpolateOptions from_json(const std::string& json);
};

// Exactly one of size and scale_factor must be given.
Array interpolate(const Array& x, const InterpolateOptions& opts, Loc loc = Loc::current());

// The name of a mode as PyTorch spells it ("nearest", "nearest-exact", "linear", "bilinear").
const char* interpolate_mode_name(InterpolateMode mode);

// General separable resizing (ONNX Resize's semantics; src/ops/nn_resize.cpp), along any dims:
// each resized dim is a weighted sum of index_select gathers whose positions and weights are
// computed on the host from the sizes (differentiable, any floating dtype). Dims are resized from
// the last to the first.
enum class ResizeMode : uint8_t { Nearest, Linear, Cubic };
// How output position x maps to a source coordinate (ONNX coordinate_transformation_mode), with
// scale = the dim's scale and in, out its sizes:
//   HalfPixel (x + 0.5) / scale - 0.5; PytorchHalfPixel the same, 0 when out is 1;
//   AlignCorners x (in - 1) / (scale in - 1); Asymmetric x / scale; TfHalfPixelForNn (x + 0.5) / scale;
//   HalfPixelSymmetric HalfPixel about the centre of a fractional output width;
//   TfCropAndResize from roi (outside it: extrapolation_value).
enum class ResizeCoordinates : uint8_t {
  HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNn, HalfPixelSymmetric, TfCropAndResize
};
// Nearest mode's rounding of a fractional source coordinate.
enum class NearestRounding : uint8_t { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
struct ResizeOptions {
  std::vector<int64_t> sizes{};  // the output's size of every dim (x's rank)
  std::vector<double> scales{};  // per dim, the scale the coordinates use; empty: sizes / x's sizes
  ResizeMode mode = ResizeMode::Nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::HalfPixel;
  NearestRounding nearest = NearestRounding::RoundPreferFloor;
  double cubic_coeff_a = -0.75;  // cubic: Keys' a (PyTorch -0.75, TensorFlow -0.5)
  bool exclude_outside = false;  // cubic / linear: taps outside the input weigh 0, the rest renormalized
  bool antialias = false;        // linear / cubic downsampling: the filter stretched by 1 / scale
  std::vector<double> roi_start{}, roi_end{};  // TfCropAndResize, per dim (default 0 and 1)
  double extrapolation_value = 0;              // TfCropAndResize: outside the roi
};
Array resize(const Array& x, const ResizeOptions& opts, Loc loc = Loc::current());

// ---- normalization (src/ops/nn_norm.cpp) ----------------------------------------------------------
// Statistics use the biased variance; under autocast they are computed in f32.
// Function forms; weight/bias may be undefined Arrays.
Array layer_norm(const Array& x, int normalized_dims, const Array& weight, const Array& bias, double eps, Loc loc = Loc::current());
Array rms_norm(const Array& x, int normalized_dims, const Array& weight, double eps, Loc loc = Loc::current());
// Batch normalization with fixed statistics (inference; BatchNorm in eval mode, ONNX's
// BatchNormalization), as PyTorch's CPU kernel computes it: a scale and a shift per channel,
// a = weight / sqrt(var + eps) and b = bias - mean * a, then y = x * a + b. mean, var, weight and
// bias are shaped to broadcast along x's channels ([1, C, 1, ...]); weight and bias may be
// undefined. Per element that is a multiply and an add (not a square root and a division), and
// after a convolution both become its epilogue (oneDNN post-ops on the CPU).
Array batch_norm_inference(const Array& x, const Array& mean, const Array& var, const Array& weight, const Array& bias,
                           double eps);
// x [N, C, *]; weight and bias [C] or undefined Arrays.
Array group_norm(const Array& x, int64_t groups, const Array& weight, const Array& bias, double eps = 1e-5, Loc loc = Loc::current());
Array instance_norm(const Array& x, const Array& weight, const Array& bias, double eps = 1e-5, Loc loc = Loc::current());

// Batch normalization as PyTorch's F.batch_norm, functional: x [N, C, *]; running_mean and
// running_var [C] (or undefined); weight and bias [C] (or undefined). In training the batch's
// statistics normalize x (mean and biased variance over every dim but 1), and when running
// statistics are given the result carries their update: running = (1 - momentum) * running +
// momentum * batch, with the unbiased variance, as PyTorch updates its buffers in place. Out of
// training the running statistics normalize x (batch_norm_inference), and they are required.
struct BatchNormFunctionOptions {
  bool training = false;
  double momentum = 0.1;
  double eps = 1e-5;
  // Synchronized statistics (training only): sums an array over every process of a data-parallel
  // group, differentiably; the batch is then the group's (see nn::BatchNorm::group_sum).
  std::function<Array(const Array&)> group_sum{};
};
struct BatchNormResult {
  Array output{};
  Array running_mean{};  // the updated statistics (training with running statistics), else undefined
  Array running_var{};
};
BatchNormResult batch_norm(const Array& x, const Array& running_mean, const Array& running_var, const Array& weight,
                           const Array& bias, const BatchNormFunctionOptions& opts = {}, Loc loc = Loc::current());

// ---- attention (src/ops/nn_attention.cpp) ---------------------------------------------------------
// PyTorch's torch.nn.functional.scaled_dot_product_attention, composed from matmul, softmax and
// where; long sequences without dropout or masks other than causal go to fused_attention.
struct SdpaOptions {
  // Broadcast to [..., L, S]. bool: true where a query may attend to a key (PyTorch's SDPA
  // convention; MultiheadAttention's masks are the opposite); floating: added to the scores.
  Array attn_mask{};
  double dropout_p = 0;   // dropout on the attention weights, applied only when training
  bool is_causal = false;  // query i attends to keys 0..i (top-left aligned); not with attn_mask
  std::optional<double> scale{};  // unset: 1 / sqrt(E)
  bool training = true;  // false: no dropout
  std::optional<uint64_t> seed{};  // the dropout mask's seed; unset: the next global seed
};

// softmax(q k^T * scale + mask) v. q [..., L, E], k [..., S, E], v [..., S, Ev] (leading dims
// broadcast) -> [..., L, Ev]. A query row with every key masked gives NaN, as in PyTorch.
Array scaled_dot_product_attention(const Array& q, const Array& k, const Array& v, const SdpaOptions& opts = {}, Loc loc = Loc::current());

// The same, also returning the attention weights [..., L, S] (after dropout). Always the
// composed path.
struct SdpaResult {
  Array output{};
  Array weights{};
};
SdpaResult scaled_dot_product_attention_with_weights(const Array& q, const Array& k, const Array& v,
                                                          const SdpaOptions& opts = {}, Loc loc = Loc::current());

// Bool [L, S] mask, true where j <= i (a query attends to itself and earlier keys).
Array causal_mask(int64_t L, int64_t S, Device device = Device::cpu());

// ---- dropout and embedding (src/ops/nn_dropout.cpp, nn_embedding.cpp) -----------------------------
// Zeroes each element with probability p in training and scales the rest by 1 / (1 - p);
// identity otherwise.
// `seed` unset takes the next global seed.
Array dropout(const Array& x, double p, bool training, std::optional<uint64_t> seed = std::nullopt, Loc loc = Loc::current());
// The functional form (PyTorch's F.embedding): rows of `weight` [num, dim] at integer `indices`
// of any shape -> [..., dim]. No gradient flows into row `padding_idx` (negative counts from the
// end). An index outside [0, num) is an error naming it, at the next read.
Array embedding(const Array& indices, const Array& weight, std::optional<int64_t> padding_idx = std::nullopt,
                Loc loc = Loc::current());

}  // namespace ember
