// Host-side helpers of ember::dist: an Array's bytes and back, the deterministic rank-order
// reduction every implementation shares, and the call description ranks exchange before data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/array.h"
#include "ember/dist/communicator.h"

namespace ember::dist::detail {

// The elements of `x` as raw bytes (waits for its value; reads through the library's own
// device-to-host copy).
Bytes to_bytes(const Array& x);
// An array of `shape` and `dtype` on `device` from raw bytes (bytes.size() must match).
Array from_bytes(const uint8_t* data, size_t size, const Shape& shape, DType dtype, Device device);

// Reduces `parts` (one chunk per rank, in rank order, equal sizes) element by element in rank
// order: ((p0 op p1) op p2) ...; Mean divides the sum by parts.size(). Throws naming `what` for
// an op the dtype does not support.
Bytes reduce_in_rank_order(const std::vector<const uint8_t*>& parts, size_t count, DType dtype, ReduceOp op,
                           const std::string& what);
// Throws naming `what` unless `op` is defined on `dtype` (checked before any data moves).
void check_reduce_supported(DType dtype, ReduceOp op, const std::string& what);

enum class Collective : uint8_t { AllReduce, Broadcast, AllGather, ReduceScatter, Barrier };
const char* collective_name(Collective c);

// What a rank says about its call before any data moves.
struct CallHeader {
  uint64_t seq = 0;
  Collective kind = Collective::Barrier;
  ReduceOp op = ReduceOp::Sum;
  int32_t root = 0;
  DType dtype = DType::F32;
  Shape shape;
};
Bytes encode(const CallHeader& h);
CallHeader decode(const Bytes& b, int from_rank, const std::string& what);
// Throws an Error (prefixed by `what`) naming the ranks and values that disagree; `mine` is
// headers[rank]. Shapes must match except for all_gather.
void check_headers(const std::vector<CallHeader>& headers, const std::string& what);
std::string describe_value(const CallHeader& h);  // "float32 [3, 4]"

}  // namespace ember::dist::detail
