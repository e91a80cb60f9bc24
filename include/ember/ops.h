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
  std::optional<uint64_t> seed;
  DType dtype = DType::F32;
  Device device = Device::cpu();
};
Array uniform(const Shape& shape, double low = 0, double high = 1, RandomOptions opts = {},
              Loc loc = Loc::current());
Array normal(const Shape& shape, double mean = 0, double std = 1, RandomOptions opts = {},
             Loc loc = Loc::current());
void manual_seed(uint64_t seed);

// ---- elementwise ---------------------------------------------------------------------------
#define EMBER_DECLARE_BINARY(fn)                                        \
  Array fn(const Array& a, const Array& b, Loc loc = Loc::current());  \
  Array fn(const Array& a, Scalar b, Loc loc = Loc::current());        \
  Array fn(Scalar a, const Array& b, Loc loc = Loc::current());
EMBER_DECLARE_BINARY(add)
EMBER_DECLARE_BINARY(sub)
EMBER_DECLARE_BINARY(mul)
EMBER_DECLARE_BINARY(div)        // true division: integers give f32
EMBER_DECLARE_BINARY(floor_div)  // rounds toward -inf
EMBER_DECLARE_BINARY(rem)        // result has the sign of the divisor (Python's %)
EMBER_DECLARE_BINARY(pow)
EMBER_DECLARE_BINARY(maximum)
EMBER_DECLARE_BINARY(minimum)
EMBER_DECLARE_BINARY(eq)
EMBER_DECLARE_BINARY(ne)
EMBER_DECLARE_BINARY(lt)
EMBER_DECLARE_BINARY(le)
EMBER_DECLARE_BINARY(gt)
EMBER_DECLARE_BINARY(ge)
EMBER_DECLARE_BINARY(logical_and)
EMBER_DECLARE_BINARY(logical_or)
#undef EMBER_DECLARE_BINARY

Array neg(const Array& x, Loc loc = Loc::current());
Array abs(const Array& x, Loc loc = Loc::current());
Array sign(const Array& x, Loc loc = Loc::current());  // -1, 0, 1
Array exp(const Array& x, Loc loc = Loc::current());
Array log(const Array& x, Loc loc = Loc::current());
Array sqrt(const Array& x, Loc loc = Loc::current());
Array tanh(const Array& x, Loc loc = Loc::current());
Array erf(const Array& x, Loc loc = Loc::current());
Array sigmoid(const Array& x, Loc loc = Loc::current());
Array relu(const Array& x, Loc loc = Loc::current());
Array gelu(const Array& x, Loc loc = Loc::current());  // exact (erf) form
Array logical_not(const Array& x, Loc loc = Loc::current());
Array cast(const Array& x, DType dtype, Loc loc = Loc::current());
Array clamp(const Array& x, std::optional<Scalar> lo, std::optional<Scalar> hi,
            Loc loc = Loc::current());
Array clamp(const Array& x, const Array& lo, const Array& hi, Loc loc = Loc::current());
Array where(const Array& cond, const Array& a, const Array& b, Loc loc = Loc::current());
Array where(const Array& cond, const Array& a, Scalar b, Loc loc = Loc::current());
Array where(const Array& cond, Scalar a, const Array& b, Loc loc = Loc::current());

// ---- reductions: dims empty = all dims ---------------------------------------------------
Array sum(const Array& x, std::vector<int> dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array mean(const Array& x, std::vector<int> dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array prod(const Array& x, std::vector<int> dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array max(const Array& x, std::vector<int> dims = {}, bool keepdim = false, Loc loc = Loc::current());
Array min(const Array& x, std::vector<int> dims = {}, bool keepdim = false, Loc loc = Loc::current());
// Index (i64) of the first maximum/minimum along `dim`.
Array argmax(const Array& x, int dim, bool keepdim = false, Loc loc = Loc::current());
Array argmin(const Array& x, int dim, bool keepdim = false, Loc loc = Loc::current());

// ---- composite ops, written with the ops above (so they differentiate and fuse for free) ----
// Numerically stable: the maximum along dim is subtracted first.
Array softmax(const Array& x, int dim, Loc loc = Loc::current());
Array log_softmax(const Array& x, int dim, Loc loc = Loc::current());
Array logsumexp(const Array& x, std::vector<int> dims, bool keepdim = false, Loc loc = Loc::current());

// ---- movement: views, no copies unless a layout forces one ---------------------------------
Array reshape(const Array& x, const Shape& shape, Loc loc = Loc::current());  // one -1 allowed
Array permute(const Array& x, const std::vector<int>& dims, Loc loc = Loc::current());
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

// ---- devices -------------------------------------------------------------------------------
// A copy on another device (realizes x first; the copy goes through host memory for now).
Array to_device(const Array& x, Device device, Loc loc = Loc::current());

// ---- contractions --------------------------------------------------------------------------
// [..., M, K] x [..., K, N] -> [..., M, N]; batch dims broadcast; 1-D operands as in numpy.
Array matmul(const Array& a, const Array& b, Loc loc = Loc::current());

}  // namespace ember
