// Library-backed ops: convolution, pooling, sorting and scans (declared here, included by
// ember/ops.h). Each runs as one backend library call (oneDNN on the CPU where it applies), or is
// a composite of such calls and other ops. Options are aggregates meant for designated
// initializers: conv2d(x, w, b, {.stride = 2, .padding = 1}), max_pool2d(h, {.kernel = 2}).
// docs/ops.md lists dtypes, semantics and gradients.
#pragma once

#include <cstdint>
#include <optional>

#include "ember/array.h"
#include "ember/op_options.h"

namespace ember {

// ---- convolution (floating dtypes; operands promoted to one dtype) ---------------------------
// x [N, C, H, W], weight [O, C / groups, KH, KW], bias [O] -> [N, O, OH, OW] (cross-correlation,
// as every framework computes it). OH = (H + top + bottom - dilation * (KH - 1) - 1) / stride + 1.
Array conv2d(const Array& x, const Array& weight, const Array& bias, Conv2dOptions opts = {},
             Loc loc = Loc::current());
Array conv2d(const Array& x, const Array& weight, Conv2dOptions opts = {}, Loc loc = Loc::current());
// x [N, C, L], weight [O, C / groups, K], bias [O] -> [N, O, OL] (a conv2d with H = 1).
Array conv1d(const Array& x, const Array& weight, const Array& bias, Conv1dOptions opts = {},
             Loc loc = Loc::current());
Array conv1d(const Array& x, const Array& weight, Conv1dOptions opts = {}, Loc loc = Loc::current());
// The two halves of conv2d's backward pass (what its gradient uses), as ops of their own:
// the gradient with respect to the input (of shape input_shape) and to the weight.
Array conv2d_backward_data(const Array& grad_out, const Array& weight, const Shape& input_shape,
                           Conv2dOptions opts = {}, Loc loc = Loc::current());
Array conv2d_backward_weights(const Array& x, const Array& grad_out, const Shape& weight_shape,
                              Conv2dOptions opts = {}, Loc loc = Loc::current());

// ---- pooling (floating dtypes; x [N, C, H, W] or [C, H, W]; Pool2dOptions in ember/op_options.h)
// Padding never wins the maximum; a NaN in a window is its maximum.
Array max_pool2d(const Array& x, Pool2dOptions opts, Loc loc = Loc::current());
Array avg_pool2d(const Array& x, Pool2dOptions opts, Loc loc = Loc::current());
// Index h * W + w (i64) of the first maximum of each window, as PyTorch's return_indices gives.
Array max_pool2d_indices(const Array& x, Pool2dOptions opts, Loc loc = Loc::current());
struct ValuesIndices;  // below, with sorting
// Both at once, from one library call (PyTorch's max_pool2d(return_indices=True)): the maxima and
// the index h * W + w (i64) of each; the gradient flows through the values as max_pool2d's.
ValuesIndices max_pool2d_with_indices(const Array& x, Pool2dOptions opts, Loc loc = Loc::current());
// The gradient of max_pool2d: grad_out [N, C, OH, OW] added at the first maximum of each window
// of x [N, C, H, W] (the positions max_pool2d_indices gives); the result has x's shape.
Array max_pool2d_backward(const Array& grad_out, const Array& x, Pool2dOptions opts, Loc loc = Loc::current());
// The adjoint of avg_pool2d (its gradient): grad_out spread back over each window.
Array avg_pool2d_backward(const Array& grad_out, const Shape& input_shape, Pool2dOptions opts,
                          Loc loc = Loc::current());
// Averages over windows [floor(i * H / OH), ceil((i + 1) * H / OH)) (PyTorch's definition); a
// composite of two matmuls with averaging matrices, so it differentiates for free.
Array adaptive_avg_pool2d(const Array& x, IntPair output_size, Loc loc = Loc::current());
// x [N, C, L] or [C, L] (a 2-D pool with H = 1).
Array max_pool1d(const Array& x, Pool1dOptions opts, Loc loc = Loc::current());
Array avg_pool1d(const Array& x, Pool1dOptions opts, Loc loc = Loc::current());
// PyTorch's shorthand: max_pool2d(x, 2) is a kernel (and stride) of 2 in every spatial dim.
inline Array max_pool2d(const Array& x, int64_t kernel, Loc loc = Loc::current()) {
  return max_pool2d(x, Pool2dOptions{.kernel = kernel}, loc);
}
inline Array avg_pool2d(const Array& x, int64_t kernel, Loc loc = Loc::current()) {
  return avg_pool2d(x, Pool2dOptions{.kernel = kernel}, loc);
}
inline Array max_pool1d(const Array& x, int64_t kernel, Loc loc = Loc::current()) {
  return max_pool1d(x, Pool1dOptions{.kernel = kernel}, loc);
}
inline Array avg_pool1d(const Array& x, int64_t kernel, Loc loc = Loc::current()) {
  return avg_pool1d(x, Pool1dOptions{.kernel = kernel}, loc);
}

// ---- sorting (any dtype) -------------------------------------------------------------------
struct ValuesIndices {
  Array values{};
  Array indices{};  // i64
};
// Stable (equal values keep their order) along dim; NaN is greater than every number (last in
// ascending order, first in descending order), as in PyTorch. values = gather(x, dim, indices).
ValuesIndices sort(const Array& x, int dim = -1, bool descending = false, Loc loc = Loc::current());
Array argsort(const Array& x, int dim = -1, bool descending = false, Loc loc = Loc::current());
// The k largest (or smallest) along dim, in sorted order (the first k of the stable sort, so ties
// go to the lower index). `sorted = false` is accepted; the result is sorted anyway.
ValuesIndices topk(const Array& x, int64_t k, int dim = -1, bool largest = true, bool sorted = true,
                   Loc loc = Loc::current());
struct UniqueResult {
  Array values{};   // sorted distinct values of x (1-D, x's dtype); all NaNs count as one value
  Array inverse{};  // i64, x's shape: the position of each element of x in values
  Array counts{};   // i64, values' shape: how often each value occurs
};
// The output size depends on the data, so unique realizes x and reads it to the host: it
// synchronizes with x's device (like item() or to_vector()). Not differentiable.
UniqueResult unique(const Array& x, Loc loc = Loc::current());

// ---- scans along a dim ---------------------------------------------------------------------
// Integer and bool inputs give i64 (as PyTorch); floats keep their dtype (accumulated in f64).
Array cumsum(const Array& x, int dim, Loc loc = Loc::current());
Array cumprod(const Array& x, int dim, Loc loc = Loc::current());
// Running maximum/minimum and the index where it was attained (the latest of equal values; a
// NaN, once seen, stays), as PyTorch's cummax/cummin. Any dtype.
ValuesIndices cummax(const Array& x, int dim, Loc loc = Loc::current());
ValuesIndices cummin(const Array& x, int dim, Loc loc = Loc::current());

// ---- fused attention (src/ops/fused_attention.cpp) ----------------------------------------------
struct FusedAttentionOptions {
  std::optional<double> scale{};  // multiplies q k^T; default 1 / sqrt(E)
  bool causal = false;          // query i sees keys j <= i (top-left aligned, as PyTorch's is_causal)
  Array mask{};                   // optional, broadcast to [..., L, S]: additive (floating) or bool
                                // (true = attend); combined with `causal` when both are given
};
struct AttentionResult {
  Array out{};  // [..., L, Ev]
  Array lse{};  // [..., L]: logsumexp of each query's scores
};
// softmax(q k^T * scale [+ mask]) v for q [..., L, E], k [..., S, E], v [..., S, Ev] (the same
// leading dims), floating dtypes (f16/bf16 computed in f32). One library call that never holds
// an L x S buffer: the backend tiles queries and keys with an online softmax (running maximum and
// sum per query). A query that sees no key gets NaN. The gradient is a second tiled library call
// that recomputes the probabilities from the saved logsumexp (no L x S buffer either); with
// create_graph, or when the mask needs a gradient, it is built from plain ops instead (L x S).
Array fused_attention(const Array& q, const Array& k, const Array& v, FusedAttentionOptions opts = {},
                      Loc loc = Loc::current());
AttentionResult fused_attention_lse(const Array& q, const Array& k, const Array& v, FusedAttentionOptions opts = {},
                                    Loc loc = Loc::current());
// Whether `device` runs fused_attention and its gradient on `dtype` as library calls (where it
// does not, nn::scaled_dot_product_attention uses plain ops).
bool fused_attention_available(Device device, DType dtype);

// ---- the LSTM and GRU recurrences (src/ops/recurrence.cpp) -------------------------------------
struct TimeLoopOptions {
  bool reverse = false;  // run the steps from the last time step to the first (a backward direction)
};
struct LstmRecurrenceResult {
  Array h{};  // [L, N, H]: the hidden state after each step (h[t] for time step t)
  Array c{};  // [L, N, H]: the cell state after each step
};
// The time loop of one LSTM layer and direction as one library call: from gi [L, N, 4H] (the input
// projection x W_ih^T plus both biases, gate rows i, f, g, o as PyTorch), h0, c0 [N, H] and the
// recurrent weight w_hh [4H, H], step t computes a = gi[t] + h w_hh^T, c = sigmoid(a_f) * c +
// sigmoid(a_i) * tanh(a_g), h = sigmoid(a_o) * tanh(c). Floating dtypes (f16 / bf16 computed in
// f32), all four operands of one dtype and device. The gradient (gi, h0, c0 and w_hh) is a second
// library call that runs backwards through time from the saved gates, plus one product for w_hh;
// with create_graph it is built from plain ops instead. nn::LSTM uses it where the device has it.
LstmRecurrenceResult lstm_recurrence(const Array& gi, const Array& h0, const Array& c0, const Array& w_hh,
                                     TimeLoopOptions opts = {}, Loc loc = Loc::current());
// Whether `device` runs lstm_recurrence and its gradient on `dtype` as library calls.
bool lstm_recurrence_available(Device device, DType dtype);

// The time loop of one GRU layer and direction as one library call: from gi [L, N, 3H] (x W_ih^T
// + b_ih, gate rows r, z, n as PyTorch), h0 [N, H], w_hh [3H, H] and b_hh [3H], step t computes
// b = h w_hh^T + b_hh, r = sigmoid(gi_r + b_r), z = sigmoid(gi_z + b_z), n = tanh(gi_n + r * b_n),
// h = n + z * (h - n); the result is h after every step, [L, N, H]. Dtypes, devices and gradients
// as lstm_recurrence (the gradient reaches gi, h0, w_hh and b_hh).
Array gru_recurrence(const Array& gi, const Array& h0, const Array& w_hh, const Array& b_hh,
                     TimeLoopOptions opts = {}, Loc loc = Loc::current());
// Whether `device` runs gru_recurrence and its gradient on `dtype` as library calls.
bool gru_recurrence_available(Device device, DType dtype);

}  // namespace ember
