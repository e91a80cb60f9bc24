// Typed attributes of the graph's ops: one named struct per family of ops, held by a node in
// OpAttrs::params (op_table/op_table.h). The front end fills them, and the scheduler, the autograd
// rules, the library-call lowering, printing (EMBER_LOG) and the partition cache's keys read them
// by name: no op decodes a list of integers by position.
//
// Which op holds which struct is checked at every read (attrs.get<T>() throws an internal error
// naming both); describe() prints one, and append_key() spells it into a cache key.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "ember/op_options.h"

namespace ember {

// Sum, Mean, Max, Min, Prod, Argmax, ...: the reduced dims, ascending and wrapped; the node's shape
// has them removed (or kept as 1 with keepdim).
struct ReduceAttrs {
  std::vector<int64_t> dims;
};

// Permute: output dim i is input dim order[i].
struct PermuteAttrs {
  std::vector<int64_t> order;
};

// Slice: per input dim, the first element taken and the step (>= 1); the node's shape says how many.
struct SliceAttrs {
  std::vector<int64_t> start, step;
};

// Gather, IndexSelect, ScatterAdd, Cat: the dim they index or join along (wrapped).
struct AxisAttrs {
  int64_t dim = 0;
};

// Conv2d and its two backward ops hold Conv2dOptions, and the pooling ops Pool2dOptions
// (ember/ops_library.h), resolved: padding 'same' turned into numbers, a stride of 0 into the
// kernel size.

// Argsort and TopkIndices: the dim, the order (topk: largest first) and, for topk, k.
struct SortAttrs {
  int64_t dim = 0;
  bool descending = false;
  int64_t k = 0;
};

// Cumsum, Cumprod, CummaxIndices, CumminIndices: the dim, and whether the scan runs backwards.
struct ScanAttrs {
  int64_t dim = 0;
  bool reverse = false;
};

// FusedAttention and its backward: the factor of q k^T and whether the mask is causal.
struct AttentionAttrs {
  double scale = 1;
  bool causal = false;
};

// LstmRecurrence and its backward: whether the steps run from the last time step to the first.
struct RecurrenceAttrs {
  bool reverse = false;
};

// One elementwise op applied after a contraction (EMBER_POST_* of backend/abi.h): kind, the
// operand it reads (an input index of the node; -1 none) and its scalars.
struct PostOp {
  int32_t kind = 0;
  int32_t input = -1;
  double alpha = 0, beta = 0;
};

// MatmulEpilogue, Conv2dEpilogue and MaxPool2dBackwardEpilogue (built by the scheduler,
// src/scheduler/epilogue.cpp): the head op's own attributes and the post-ops folded into it, in
// order.
struct EpilogueAttrs {
  bool has_bias = false;
  Conv2dOptions conv{};  // Conv2dEpilogue only
  std::vector<PostOp> ops;
  Pool2dOptions pool{};  // MaxPool2dBackwardEpilogue only
};

// OutputOf: which output of its input's multi-output node it reads (>= 1; graph/node.h).
struct OutputAttrs {
  int64_t index = 1;
};

// Ops without structural attributes (elementwise ops, reshape, matmul, ...).
using NoAttrs = std::monostate;

using OpParams = std::variant<NoAttrs, ReduceAttrs, PermuteAttrs, SliceAttrs, AxisAttrs, Conv2dOptions,
                              Pool2dOptions, SortAttrs, ScanAttrs, AttentionAttrs, EpilogueAttrs, OutputAttrs,
                              RecurrenceAttrs>;

// The position of struct T in OpParams (what OpInfo::params records for an op).
template <class T, class Variant = OpParams>
struct ParamsIndex;
template <class T, class... Ts>
struct ParamsIndex<T, std::variant<Ts...>> {
  static constexpr uint8_t value = [] {
    uint8_t i = 0;
    bool found = false;
    ((found = found || std::is_same_v<T, Ts>, i += found ? 0 : 1), ...);
    return i;
  }();
  static_assert(value < sizeof...(Ts), "not an OpParams struct");
};
template <class T>
inline constexpr uint8_t kParamsIndex = ParamsIndex<T>::value;

// The struct's name as describe() and errors print it ("SliceAttrs").
const char* params_name(const OpParams& p);
// The name of the struct at position `index` of OpParams.
const char* params_name_at(size_t index);
// "dims [1, 2]", "stride (2, 2), padding (top 1, left 1, bottom 0, right 0), ...", "" for none.
std::string describe(const OpParams& p);
// Appends the struct's type and every field to `key` (the partition cache's key; two values with
// the same key are equal).
void append_key(const OpParams& p, std::vector<int64_t>& key);
// The struct as a JSON object {"type": "Conv2dOptions", "stride": [1, 1], ...} (graph dumps;
// what an exporter writes), and back: params_from_json(params_json(p)) == p. A malformed or
// unknown text throws ember::Error naming the field.
std::string params_json(const OpParams& p);
OpParams params_from_json(const std::string& json);
// Throws the internal error of a node whose params are not the struct its op needs.
[[noreturn]] void wrong_params(const OpParams& p, const char* expected);

}  // namespace ember
