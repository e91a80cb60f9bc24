// Host-side helpers of ember::dist (see host_data.h): byte conversions, the rank-order reduction
// and the exchanged call descriptions.
#include "dist/host_data.h"

#include "scheduler/trace.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "ember/ops.h"

namespace ember::dist::detail {

namespace {

template <class T>
Bytes copy_out(const Array& x) {
  std::vector<T> v = x.template to_vector<T>();
  Bytes b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
T load(const uint8_t* p, size_t i) {
  T v;
  std::memcpy(&v, p + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(uint8_t* p, size_t i, T v) {
  std::memcpy(p + i * sizeof(T), &v, sizeof(T));
}

// NaN propagates through max/min, as in torch.max.
template <class T>
T max_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  }
  return a < b ? b : a;
}
template <class T>
T min_of(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  }
  return b < a ? b : a;
}

// Elements stored as `Stored`, accumulated as `Acc` (f16/bf16: f32), rounded once at the end.
// The op is a template parameter so that the inner loops have no branch on it (they vectorize).
template <ReduceOp Op, class Stored, class Acc, class ToAcc, class FromAcc>
Bytes reduce_with(const std::vector<const uint8_t*>& parts, size_t count, ToAcc to_acc, FromAcc from_acc) {
  Bytes out(count * sizeof(Stored));
  const size_t n = parts.size();
  // The running result lives in `out` itself when the accumulator is the stored type.
  constexpr bool in_place = std::is_same_v<Acc, Stored>;
  std::vector<Acc> scratch(in_place ? 0 : count);
  auto acc_at = [&](size_t i) -> Acc* {
    if constexpr (in_place) return reinterpret_cast<Acc*>(out.data()) + i;
    else return scratch.data() + i;
  };
  for (size_t i = 0; i < count; ++i) *acc_at(i) = to_acc(load<Stored>(parts[0], i));
  for (size_t r = 1; r < n; ++r) {
    const uint8_t* p = parts[r];
    Acc* acc = acc_at(0);
    for (size_t i = 0; i < count; ++i) {
      Acc v = to_acc(load<Stored>(p, i));
      if constexpr (Op == ReduceOp::Sum || Op == ReduceOp::Mean) acc[i] = Acc(acc[i] + v);
      else if constexpr (Op == ReduceOp::Max) acc[i] = max_of(acc[i], v);
      else acc[i] = min_of(acc[i], v);
    }
  }
  for (size_t i = 0; i < count; ++i) {
    Acc a = *acc_at(i);
    if constexpr (Op == ReduceOp::Mean) a = Acc(a / Acc(n));
    store<Stored>(out.data(), i, from_acc(a));
  }
  return out;
}

template <class Stored, class Acc, class ToAcc, class FromAcc>
Bytes reduce_typed(const std::vector<const uint8_t*>& parts, size_t count, ReduceOp op, ToAcc to_acc,
                   FromAcc from_acc) {
  switch (op) {
    case ReduceOp::Sum: return reduce_with<ReduceOp::Sum, Stored, Acc>(parts, count, to_acc, from_acc);
    case ReduceOp::Mean: return reduce_with<ReduceOp::Mean, Stored, Acc>(parts, count, to_acc, from_acc);
    case ReduceOp::Max: return reduce_with<ReduceOp::Max, Stored, Acc>(parts, count, to_acc, from_acc);
    case ReduceOp::Min: return reduce_with<ReduceOp::Min, Stored, Acc>(parts, count, to_acc, from_acc);
  }
  throw Error("dist: unknown reduction");
}

template <class T>
Bytes reduce_plain(const std::vector<const uint8_t*>& parts, size_t count, ReduceOp op) {
  return reduce_typed<T, T>(parts, count, op, [](T v) { return v; }, [](T v) { return v; });
}

}  // namespace

Bytes to_bytes(const Array& x) {
  // Mostly the wait for the input's values (the device computing them): the profiler shows how
  // much of a collective's time overlaps the computation.
  trace::Span span([&](KernelRecord& r) {
    r.name = "dist input to host";
    r.device = "dist";
    r.ops = std::string(dtype_name(x.dtype())) + " " + x.shape().str();
  });
  switch (x.dtype()) {
    case DType::F32: return copy_out<float>(x);
    case DType::F64: return copy_out<double>(x);
    case DType::F16: return copy_out<Half>(x);
    case DType::BF16: return copy_out<BFloat16>(x);
    case DType::I32: return copy_out<int32_t>(x);
    case DType::I64: return copy_out<int64_t>(x);
    case DType::U8: return copy_out<uint8_t>(x);
    case DType::Bool: return copy_out<uint8_t>(x);  // 0 or 1 per element
    case DType::I8: return copy_out<int8_t>(x);
    case DType::I16: return copy_out<int16_t>(x);
    case DType::U16: return copy_out<uint16_t>(x);
    case DType::U32: return copy_out<uint32_t>(x);
    case DType::U64: return copy_out<uint64_t>(x);
  }
  throw Error("dist: unknown dtype");
}

Array from_bytes(const uint8_t* data, size_t size, const Shape& shape, DType dtype, Device device) {
  size_t expected = size_t(shape.numel()) * dtype_size(dtype);
  if (size != expected)
    throw Error("dist: received " + std::to_string(size) + " bytes for " + std::string(dtype_name(dtype)) + " " +
                shape.str() + " (expected " + std::to_string(expected) + ")");
  static const uint8_t kNothing = 0;
  return from_buffer(size ? data : &kNothing, shape, dtype, device);
}

void check_reduce_supported(DType dtype, ReduceOp op, const std::string& what) {
  if (op == ReduceOp::Mean && !is_floating(dtype))
    throw Error(what + ": mean is defined for floating dtypes only, got " + std::string(dtype_name(dtype)) +
                " (use sum and divide)");
}

Bytes reduce_in_rank_order(const std::vector<const uint8_t*>& parts, size_t count, DType dtype, ReduceOp op,
                           const std::string& what) {
  check_reduce_supported(dtype, op, what);
  switch (dtype) {
    case DType::F32: return reduce_plain<float>(parts, count, op);
    case DType::F64: return reduce_plain<double>(parts, count, op);
    case DType::I32: return reduce_plain<int32_t>(parts, count, op);
    case DType::I64: return reduce_plain<int64_t>(parts, count, op);
    case DType::U8: return reduce_plain<uint8_t>(parts, count, op);  // sums wrap modulo 256, as in PyTorch
    case DType::I8: return reduce_plain<int8_t>(parts, count, op);
    case DType::I16: return reduce_plain<int16_t>(parts, count, op);
    case DType::U16: return reduce_plain<uint16_t>(parts, count, op);
    case DType::U32: return reduce_plain<uint32_t>(parts, count, op);
    case DType::U64: return reduce_plain<uint64_t>(parts, count, op);
    case DType::F16:
      return reduce_typed<uint16_t, float>(
          parts, count, op, [](uint16_t h) { return half_to_float(h); }, [](float f) { return float_to_half(f); });
    case DType::BF16:
      return reduce_typed<uint16_t, float>(
          parts, count, op, [](uint16_t h) { return bf16_to_float(h); }, [](float f) { return float_to_bf16(f); });
    case DType::Bool: {
      // Sum and Max: logical or; Min: logical and.
      Bytes out(count);
      for (size_t i = 0; i < count; ++i) {
        bool acc = parts[0][i] != 0;
        for (size_t r = 1; r < parts.size(); ++r) acc = op == ReduceOp::Min ? (acc && parts[r][i]) : (acc || parts[r][i]);
        out[i] = acc ? 1 : 0;
      }
      return out;
    }
  }
  throw Error(what + ": unknown dtype");
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::Barrier: return "barrier";
  }
  return "?";
}

// Layout: seq u64 | kind u8 | op u8 | dtype u8 | rank u8 | root i32 | dims i64 * rank.
Bytes encode(const CallHeader& h) {
  Bytes b(16 + 8 * size_t(h.shape.rank()));
  std::memcpy(b.data(), &h.seq, 8);
  b[8] = uint8_t(h.kind);
  b[9] = uint8_t(h.op);
  b[10] = uint8_t(h.dtype);
  b[11] = uint8_t(h.shape.rank());
  std::memcpy(b.data() + 12, &h.root, 4);
  for (int d = 0; d < h.shape.rank(); ++d) {
    int64_t v = h.shape[d];
    std::memcpy(b.data() + 16 + 8 * size_t(d), &v, 8);
  }
  return b;
}

CallHeader decode(const Bytes& b, int from_rank, const std::string& what) {
  if (b.size() < 16 || b.size() != 16 + 8 * size_t(b[11]) || b[8] > uint8_t(Collective::Barrier) ||
      b[10] >= kNumDTypes || b[9] > uint8_t(ReduceOp::Min))
    throw Error(what + ": malformed call description from rank " + std::to_string(from_rank) + " (" +
                std::to_string(b.size()) + " bytes): is every rank running the same program?");
  CallHeader h;
  std::memcpy(&h.seq, b.data(), 8);
  h.kind = Collective(b[8]);
  h.op = ReduceOp(b[9]);
  h.dtype = DType(b[10]);
  std::memcpy(&h.root, b.data() + 12, 4);
  std::vector<int64_t> dims(b[11]);
  for (size_t d = 0; d < dims.size(); ++d) std::memcpy(&dims[d], b.data() + 16 + 8 * d, 8);
  h.shape = Shape(std::move(dims));
  return h;
}

std::string describe_value(const CallHeader& h) { return std::string(dtype_name(h.dtype)) + " " + h.shape.str(); }

void check_headers(const std::vector<CallHeader>& headers, const std::string& what) {
  const CallHeader& first = headers[0];
  for (size_t r = 1; r < headers.size(); ++r) {
    const CallHeader& h = headers[r];
    std::string ranks = "rank 0 and rank " + std::to_string(r);
    if (h.kind != first.kind || h.seq != first.seq)
      throw Error(what + ": ranks disagree on the call: rank 0 is in " + collective_name(first.kind) + " #" +
                  std::to_string(first.seq) + ", rank " + std::to_string(r) + " in " + collective_name(h.kind) +
                  " #" + std::to_string(h.seq) + " (every rank must make the same collective calls in the same order)");
    if (h.kind == Collective::Barrier) continue;
    if (h.op != first.op)
      throw Error(what + ": " + ranks + " disagree on the reduction: " + reduce_op_name(first.op) + " vs " +
                  reduce_op_name(h.op));
    if (h.root != first.root)
      throw Error(what + ": " + ranks + " disagree on the root: " + std::to_string(first.root) + " vs " +
                  std::to_string(h.root));
    bool shape_must_match = h.kind != Collective::AllGather;
    if (h.dtype != first.dtype || (shape_must_match && !(h.shape == first.shape)))
      throw Error(what + ": rank 0 has " + describe_value(first) + " but rank " + std::to_string(r) + " has " +
                  describe_value(h) + (shape_must_match ? " (shape and dtype must match on every rank)"
                                                        : " (dtypes must match on every rank)"));
  }
}

}  // namespace ember::dist::detail
