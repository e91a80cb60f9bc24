// The bytes of a buffer that one launch can touch, for the Vulkan plugin's barrier decisions
// (hazards.h). A KIR argument's range follows from its offset, strides and the launch shape (and
// its gather axis), a library call's tensor from its descriptor; whatever cannot be bounded (an
// unknown dtype, arithmetic that overflows) is the whole buffer, so that a doubtful case costs a barrier, never a race. Ranges are widened to 4-byte
// words: a driver that emulates 8- or 16-bit stores with read-modify-writes of 32-bit words would
// otherwise race on a word that two neighbouring ranges share.
// Header-only and free of Vulkan types (for the unit tests).
#pragma once

#include <cstdint>

#include "backend/abi.h"

namespace ember::vk {

// Bytes of one element of a storage dtype as the shaders address it (emit_glsl.cpp stores every
// dtype at its natural size); 0 for a dtype this table does not know.
inline uint32_t storage_bytes(int32_t dtype) {  // 0: not a dtype (the whole buffer is assumed)
  return dtype >= 0 && dtype < EMBER_NUM_DTYPES ? uint32_t(ember_dtype_bytes(dtype)) : 0;
}

struct ByteRange {
  uint64_t begin = 0, end = 0;
};

// [begin, end) widened outward to 4-byte words and clipped to the buffer.
inline ByteRange word_range(uint64_t begin, uint64_t end, uint64_t buffer_bytes) {
  ByteRange r{begin / 4 * 4, (end + 3) / 4 * 4};
  if (r.end > buffer_bytes) r.end = buffer_bytes;
  if (r.begin > r.end) r.begin = r.end;
  return r;
}

// The elements [lo, hi] (inclusive) that `offset` plus any point of `shape` times `strides` can
// reach; false on overflow.
inline bool element_span(int64_t offset, const int64_t* shape, const int64_t* strides, int rank, int64_t* lo,
                         int64_t* hi) {
  *lo = *hi = offset;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] <= 1 || strides[d] == 0) continue;
    int64_t span = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &span)) return false;
    if (__builtin_add_overflow(span >= 0 ? *hi : *lo, span, span >= 0 ? hi : lo)) return false;
  }
  return true;
}

// Elements [lo, hi] of `elem_bytes` each as bytes of a buffer of `buffer_bytes` (whole on overflow).
inline ByteRange element_bytes(int64_t lo, int64_t hi, uint32_t elem_bytes, uint64_t buffer_bytes) {
  if (lo < 0) lo = 0;  // a malformed launch: the shader cannot address below the buffer either
  if (hi < lo) return ByteRange{};
  uint64_t begin = 0, end = 0;
  if (__builtin_mul_overflow(uint64_t(lo), uint64_t(elem_bytes), &begin) ||
      __builtin_mul_overflow(uint64_t(hi) + 1, uint64_t(elem_bytes), &end))
    return ByteRange{0, buffer_bytes};
  return word_range(begin, end, buffer_bytes);
}

// The bytes of a buffer of `buffer_bytes` that argument `arg` of `launch` can touch, elements of
// `elem_bytes` (0: unknown, the whole buffer).
inline ByteRange kir_arg_range(const ember_kir_launch& launch, const ember_kir_arg& arg, uint32_t elem_bytes,
                               uint64_t buffer_bytes) {
  const ByteRange whole{0, buffer_bytes};
  const int rank = launch.outer_rank + launch.reduce_rank;
  if (elem_bytes == 0 || rank < 0 || rank > EMBER_MAX_ITER_RANK) return whole;
  int64_t lo = 0, hi = 0;
  if (!element_span(arg.offset, launch.shape, arg.strides, rank, &lo, &hi)) return whole;
  if (arg.gather_size > 1) {  // the gathered axis: index in [0, gather_size) times its stride
    int64_t span = 0;
    if (__builtin_mul_overflow(arg.gather_size - 1, arg.gather_stride, &span)) return whole;
    if (__builtin_add_overflow(span >= 0 ? hi : lo, span, span >= 0 ? &hi : &lo)) return whole;
  }
  return element_bytes(lo, hi, elem_bytes, buffer_bytes);
}

// The bytes of a buffer of `buffer_bytes` that a library call's tensor covers (its offset, shape
// and strides); nothing for a tensor without elements. Library shaders address their tensors only
// through these descriptors (an output placed in a slab of a larger buffer must not spill out of
// it), passes included.
inline ByteRange tensor_range(const ember_tensor_desc& t, uint64_t buffer_bytes) {
  const uint32_t elem_bytes = storage_bytes(t.dtype);
  if (elem_bytes == 0 || t.rank < 0 || t.rank > 8) return ByteRange{0, buffer_bytes};
  for (int d = 0; d < t.rank; ++d)
    if (t.shape[d] <= 0) return ByteRange{};
  int64_t lo = 0, hi = 0;
  if (!element_span(t.offset, t.shape, t.strides, t.rank, &lo, &hi)) return ByteRange{0, buffer_bytes};
  return element_bytes(lo, hi, elem_bytes, buffer_bytes);
}

}  // namespace ember::vk
