// Free functions over Array. Every op checks shapes and dtypes when it is called (errors name
// the op, the values and the caller's line) and returns a lazy result. docs/ops.md lists them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/array.h"
#include "ember/ops_library.h"

namespace ember {

// ---- creation ------------------------------------------------------------------------------
Array full(const Shape& shape, Scalar value, TensorOptions opts = {}, Loc loc = Loc::current());
Array zeros(const Shape& shape, TensorOptions opts = {}, Loc loc = Loc::current());
Array ones(const Shape& shape, TensorOptions opts = {}, Loc loc = Loc::current());
// [start, end) in steps of `step`; the dtype defaults to i64 when all three are integers.
Array arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = std::nullopt,
             Device device = Device::cpu(), Loc loc = Loc::current());
// Copies `data` (numel(shape) elements of `dtype`) from the host.
Array from_buffer(const void* data, const Shape& shape, DType dtype, Device device = Device::cpu(),
                  Loc loc = Loc::current());
template <class T>
Array from_vector(const std::vector<T>& data, const Shape& shape, Device device = Device::cpu(),
                  Loc loc = Loc::current()) {
  if (static_cast<int64_t>(data.size()) != shape.numel())
    throw Error("from_data: got " + std::to_string(data.size()) + " values for shape " + shape.str() + " (" +
                std::to_string(shape.numel()) + " elements) (at " + format_location(loc) + ")");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());
    return from_buffer(bytes.data(), shape, DType::Bool, device, loc);
  } else {
    return from_buffer(data.data(), shape, dtype_of<T>(), device, loc);
  }
}

// Random numbers from a counter-based generator (Philox4x32-10): element i of a draw with seed
// s is a pure function of (s, i), so results do not depend on threads or backends. Without a
// seed, each call takes the next seed from the global generator (see manual_seed).
struct RandomOptions {
  std::optional<uint64_t> seed{};
  DType dtype = DType::F32;
  Device device = Device::cpu();
};
Array uniform(const Shape& shape, double low = 0, double high = 1, RandomOptions opts = {},
              Loc loc = Loc::current());
Array normal(const Shape& shape, double mean = 0, double std = 1, RandomOptions opts = {},
             Loc loc = Loc::current());
void manual_seed(uint64_t seed);

// Shapes and dtypes taken from another tensor (on its device); dtype unset = x's dtype.
Array zeros_like(const Array& x, std::optional<DType> dtype = std::nullopt, Loc loc = Loc::current());
Array ones_like(const Array& x, std::optional<DType> dtype = std::nullopt, Loc loc = Loc::current());
Array full_like(const Array& x, Scalar value, std::optional<DType> dtype = std::nullopt, Loc loc = Loc::current());
// `steps` points from start to end inclusive (default f32; integer dtypes truncate the values).
Array linspace(Scalar start, Scalar end, int64_t steps, TensorOptions opts = {}, Loc loc = Loc::current());
// [n, m] (m defaults to n) with ones on the main diagonal (default f32).
Array eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions opts = {}, Loc loc = Loc::current());
// index's shape + [num_classes], 1 at each index (default i64). An index outside
// [0, num_classes) raises an Error at read (the lookup is bounds-checked).
Array one_hot(const Array& index, int64_t num_classes, std::optional<DType> dtype = std::nullopt,
              Loc loc = Loc::current());
// 1 with probability p (element i: uniform draw i of the seed < p), else 0; the result has p's
// dtype (p floating) and device. The scalar form draws `shape` elements of opts.dtype (any dtype).
Array bernoulli(const Array& p, std::optional<uint64_t> seed = std::nullopt, Loc loc = Loc::current());
Array bernoulli(const Shape& shape, double p, RandomOptions opts = {}, Loc loc = Loc::current());
// torch.multinomial: num_samples category indices (i64) for each row of probs, [C] or [N, C]
// non-negative weights (not necessarily normalized), giving [num_samples] or [N, num_samples].
// With replacement each draw is independent; without, an index appears at most once per row and
// the order is that of successive draws. Computed on probs' device: with replacement by inverse
// CDF (a cumulative sum and a count against uniforms, O(N * num_samples * C) comparisons),
// without by the exponential race (the num_samples smallest of -log(u) / w, a top-k). The checks
// read a few reductions to the host (one synchronization): weights must be finite and
// non-negative, each row's sum positive, and without replacement num_samples at most C and at
// most the row's number of non-zero weights; the error names the op, the row and the value.
Array multinomial(const Array& probs, int64_t num_samples, bool replacement = false,
                  std::optional<uint64_t> seed = std::nullopt, Loc loc = Loc::current());
struct RandintOptions {
  std::optional<uint64_t> seed{};
  DType dtype = DType::I64;
  Device device = Device::cpu();
};
// Uniform integers in [low, high): floor(low + (high - low) * u) with u the f64 (53-bit) uniform.
Array randint(int64_t low, int64_t high, const Shape& shape, RandintOptions opts = {}, Loc loc = Loc::current());
// A random permutation of 0..n-1: a Fisher-Yates shuffle on the host driven by the f64 uniforms of
// the seed (so the same on every backend). It reads those uniforms to the host (synchronizes).
Array randperm(int64_t n, RandintOptions opts = {}, Loc loc = Loc::current());

// ---- elementwise ---------------------------------------------------------------------------
// Every unary and binary op of the table ember/elementwise_ops.def: fn(x) for unary ops, and
// fn(a, b), fn(a, scalar), fn(scalar, a) for binary ones. Semantics, dtypes and accuracy of each:
// docs/ops.md. In brief: div is true division (integers give f32); floor_div rounds toward -inf;
// rem has the sign of the divisor (Python's %), fmod the sign of the dividend (C's fmod); atan2
// is atan2(y, x); bitwise ops take integers and bool; shifts take integers, counts outside
// [0, bits) give 0 (left) or the sign fill (right; u8: 0); rounding returns integers unchanged
// and round is half to even; predicates give bool. Float math of integer inputs gives f32.
#define EMBER_DECLARE_UNARY_Plain(fn) Array fn(const Array& x, Loc loc = Loc::current());
#define EMBER_DECLARE_UNARY_Rounding(fn) EMBER_DECLARE_UNARY_Plain(fn)
#define EMBER_DECLARE_UNARY_Params(fn)  // with parameters: declared below
#define EMBER_DECLARE_UNARY_Cast(fn)    // cast(x, dtype): declared below
#define EMBER_UNARY_OP(Name, fn, rule, form, ...) EMBER_DECLARE_UNARY_##form(fn)
#define EMBER_BINARY_OP(Name, fn, ...)                                 \
  Array fn(const Array& a, const Array& b, Loc loc = Loc::current()); \
  Array fn(const Array& a, Scalar b, Loc loc = Loc::current());       \
  Array fn(Scalar a, const Array& b, Loc loc = Loc::current());
#include "ember/elementwise_ops.def"
#undef EMBER_DECLARE_UNARY_Plain
#undef EMBER_DECLARE_UNARY_Rounding
#undef EMBER_DECLARE_UNARY_Params
#undef EMBER_DECLARE_UNARY_Cast

// The unary ops with parameters (form Params in the table).
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold (as PyTorch).
Array softplus(const Array& x, double beta = 1, double threshold = 20, Loc loc = Loc::current());
Array leaky_relu(const Array& x, double slope = 0.01, Loc loc = Loc::current());
Array elu(const Array& x, double alpha = 1, Loc loc = Loc::current());  // x > 0 ? x : alpha (e^x - 1)
Array cast(const Array& x, DType dtype, Loc loc = Loc::current());
// x with `value` where mask (broadcast to x's shape) is true.
Array mask_fill(const Array& x, const Array& mask, Scalar value, Loc loc = Loc::current());
Array clamp(const Array& x, std::optional<Scalar> lo, std::optional<Scalar> hi,
            Loc loc = Loc::current());
Array clamp(const Array& x, const Array& lo, const Array& hi, Loc loc = Loc::current());
Array where(const Array& cond, const Array& a, const Array& b, Loc loc = Loc::current());
Array where(const Array& cond, const Array& a, Scalar b, Loc loc = Loc::current());
Array where(const Array& cond, Scalar a, const Array& b, Loc loc = Loc::current());

// ---- reductions: dims empty = all dims ---------------------------------------------------
Array sum(const Array& x, Axes dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array mean(const Array& x, Axes dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array prod(const Array& x, Axes dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array max(const Array& x, Axes dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array min(const Array& x, Axes dims = {}, bool keepdim = false, Loc loc = Loc::current());
// Index (i64) of the first maximum/minimum along `dim`.
Array argmax(const Array& x, int dim, bool keepdim = false, Loc loc = Loc::current());
Array argmin(const Array& x, int dim, bool keepdim = false, Loc loc = Loc::current());
// Whether any / all elements are nonzero (bool; over zero elements: false / true).
Array any(const Array& x, Axes dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array all(const Array& x, Axes dims = {}, bool keepdim = false, Loc loc = Loc::current());
// Variance sum((x - mean)^2) / (n - correction) and its square root (floating inputs).
Array var(const Array& x, Axes dims = {}, int64_t correction = 1, bool keepdim = false,
          Loc loc = Loc::current());
Array std(const Array& x, Axes dims = {}, int64_t correction = 1, bool keepdim = false,
          Loc loc = Loc::current());
// The extreme along dim and its index (the first one; the first NaN wins). The gradient of the
// values goes to that index only (as PyTorch's max(dim)). ValuesIndices: ember/ops_library.h.
ValuesIndices max_with_indices(const Array& x, int dim, bool keepdim = false, Loc loc = Loc::current());
ValuesIndices min_with_indices(const Array& x, int dim, bool keepdim = false, Loc loc = Loc::current());

// ---- composite ops, written with the ops above (so they differentiate and fuse for free) ----
// Numerically stable: the maximum along dim is subtracted first.
Array softmax(const Array& x, int dim, Loc loc = Loc::current());
Array log_softmax(const Array& x, int dim, Loc loc = Loc::current());
Array logsumexp(const Array& x, Axes dims, bool keepdim = false, Loc loc = Loc::current());

// ---- movement: views, no copies unless a layout forces one ---------------------------------
Array reshape(const Array& x, const Shape& shape, Loc loc = Loc::current());  // one -1 allowed
Array permute(const Array& x, const Axes& dims, Loc loc = Loc::current());
Array transpose(const Array& x, int dim0, int dim1, Loc loc = Loc::current());
// Elements start, start+step, ... < end along dim (negative start/end count from the end,
// clamped to the size as in Python).
Array slice(const Array& x, int dim, int64_t start, int64_t end, int64_t step = 1,
            Loc loc = Loc::current());
Array expand(const Array& x, const Shape& shape, Loc loc = Loc::current());  // -1 keeps a size
Array squeeze(const Array& x, int dim, Loc loc = Loc::current());
Array unsqueeze(const Array& x, int dim, Loc loc = Loc::current());
Array flatten(const Array& x, int start_dim = 0, int end_dim = -1, Loc loc = Loc::current());
Array contiguous(const Array& x, Loc loc = Loc::current());
Array cat(const std::vector<Array>& xs, int dim, Loc loc = Loc::current());
Array broadcast_to(const Array& x, const Shape& shape, Loc loc = Loc::current());
Array swap_dims(const Array& x, int dim0, int dim1, Loc loc = Loc::current());  // = transpose
// Moves dim `source` to position `destination`, keeping the order of the others.
Array movedim(const Array& x, int source, int destination, Loc loc = Loc::current());
Array narrow(const Array& x, int dim, int64_t start, int64_t length, Loc loc = Loc::current());
// The entry `index` of dim (negative counts from the end), with that dim removed (a view).
Array select(const Array& x, int dim, int64_t index, Loc loc = Loc::current());
// Reverses the order along each of dims (a gather with a reversed index: it copies).
Array flip(const Array& x, Axes dims, Loc loc = Loc::current());
// Shifts elements by `shift` along dim, wrapping around (positive: towards higher indices).
Array roll(const Array& x, int64_t shift, int dim, Loc loc = Loc::current());
// Joins tensors of one shape along a new dim.
Array stack(const std::vector<Array>& xs, int dim = 0, Loc loc = Loc::current());
// Pieces of `size` along dim (the last may be smaller) / pieces of the given sizes (views).
std::vector<Array> split(const Array& x, int64_t size, int dim = 0, Loc loc = Loc::current());
std::vector<Array> split(const Array& x, const std::vector<int64_t>& sizes, int dim = 0, Loc loc = Loc::current());
// `chunks` pieces of ceil(size / chunks) along dim (fewer if the dim is too short, as PyTorch).
std::vector<Array> chunk(const Array& x, int64_t chunks, int dim = 0, Loc loc = Loc::current());
// PyTorch's repeat: repeats.size() >= rank; leading extra entries add dims. tile (numpy): a
// shorter reps is padded with 1s in front.
Array repeat(const Array& x, const std::vector<int64_t>& repeats, Loc loc = Loc::current());
Array tile(const Array& x, const std::vector<int64_t>& reps, Loc loc = Loc::current());
// pads = (before, after) pairs starting from the LAST dim, as torch.nn.functional.pad. Constant
// mode allows negative pads (cropping); Reflect needs pads < the dim's size; Replicate a nonempty dim.
enum class PadMode { Constant, Reflect, Replicate };
Array pad(const Array& x, const std::vector<int64_t>& pads, PadMode mode = PadMode::Constant, Scalar value = 0,
          Loc loc = Loc::current());
// Lower / upper triangle of the last two dims (diagonal k: 0 main, > 0 above, < 0 below); zeros elsewhere.
Array tril(const Array& x, int64_t diagonal = 0, Loc loc = Loc::current());
Array triu(const Array& x, int64_t diagonal = 0, Loc loc = Loc::current());

// ---- indexing ------------------------------------------------------------------------------
// out[i][j] = x[i][index[i][j]] for dim 1 (index: integer, same rank as x).
Array gather(const Array& x, int dim, const Array& index, Loc loc = Loc::current());
// Picks the entries `index` (1-D, integer) along dim.
Array index_select(const Array& x, int dim, const Array& index, Loc loc = Loc::current());
// x with src added at the positions index names along dim: out[i][index[i][j]] += src[i][j] for
// dim 1. index and src have one shape, no larger than x's in the other dims. Duplicates add up.
Array scatter_add(const Array& x, int dim, const Array& index, const Array& src, Loc loc = Loc::current());
// Adds the slices of src (size len(index) along dim) into x at the positions index (1-D) names.
Array index_add(const Array& x, int dim, const Array& index, const Array& src, Loc loc = Loc::current());
// x with src written at the positions index names along dim (shapes as scatter_add). When an index
// repeats, the LAST src element in row-major order wins (deterministic on every backend).
Array scatter(const Array& x, int dim, const Array& index, const Array& src, Loc loc = Loc::current());
Array scatter(const Array& x, int dim, const Array& index, Scalar value, Loc loc = Loc::current());
// x with the region slice(x, dim, start, end, step) replaced by value (broadcast to the region).
// Gradients: x gets g with the region zeroed, value the region of g (summed over broadcasting).
Array slice_assign(const Array& x, int dim, int64_t start, int64_t end, int64_t step, const Array& value,
                   Loc loc = Loc::current());
Array slice_assign(const Array& x, int dim, int64_t start, int64_t end, const Array& value, Loc loc = Loc::current());
// x with select(x, dim, index) replaced by value.
Array select_assign(const Array& x, int dim, int64_t index, const Array& value, Loc loc = Loc::current());
// Elements of x (as if flattened) at index (any shape; negative counts from the end).
Array take(const Array& x, const Array& index, Loc loc = Loc::current());
// out[i...] = x[indices[i..., 0], ..., indices[i..., m-1], ...]: index's last dim (size m <= rank)
// addresses the first m dims of x. Out-of-range indices raise an Error at read.
Array gather_nd(const Array& x, const Array& indices, Loc loc = Loc::current());
// x with updates (indices.shape[:-1] + x.shape[m:]) written at those positions; repeats: last wins.
Array scatter_nd(const Array& x, const Array& indices, const Array& updates, Loc loc = Loc::current());
// Data-dependent shapes: these read the mask/input to the host (they synchronize).
// The elements of x where mask (broadcast with x) is true, as a 1-D tensor in row-major order.
Array masked_select(const Array& x, const Array& mask, Loc loc = Loc::current());
// [count, rank] i64 coordinates of the nonzero elements (row-major order).
Array nonzero(const Array& x, Loc loc = Loc::current());
Array argwhere(const Array& x, Loc loc = Loc::current());  // = nonzero

// ---- devices -------------------------------------------------------------------------------
// A copy on another device (realizes x first; the copy goes through host memory for now).
Array to_device(const Array& x, Device device, Loc loc = Loc::current());

// ---- contractions --------------------------------------------------------------------------
// [..., M, K] x [..., K, N] -> [..., M, N]; batch dims broadcast; 1-D operands as in numpy.
Array matmul(const Array& a, const Array& b, Loc loc = Loc::current());
Array dot(const Array& a, const Array& b, Loc loc = Loc::current());    // 1-D . 1-D -> rank 0
Array outer(const Array& a, const Array& b, Loc loc = Loc::current());  // [n] x [m] -> [n, m]
Array mv(const Array& a, const Array& b, Loc loc = Loc::current());     // [n, k] x [k] -> [n]
Array bmm(const Array& a, const Array& b, Loc loc = Loc::current());    // [b, n, k] x [b, k, m], no broadcasting

}  // namespace ember
