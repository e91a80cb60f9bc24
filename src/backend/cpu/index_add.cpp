// EMBER_LIB_INDEX_ADD (abi.h): sums of rows at integer positions, the gradient of an embedding
// lookup or an index_select. The core's dense scatter compares every index with every target
// position (S * N * row work: 16 ms of a GPT step's 143 ms for a 96-entry table at 1 thread);
// this call adds each source row into its target once (N * row). Each task owns a slice of the
// columns and walks the index in order, so duplicates are summed in index order whatever the
// thread count: the result is deterministic and equal to the reference backend's, bit for bit.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/library.h"
#include "backend/cpu/parallel_for.h"
#include "backend/cpu/program.h"

namespace ember::cpu {

namespace {

using ember::host::set_status;

// out [M, S, K] = 0, then out[m, index[n], :] += src[m, n, :] for n = 0 .. N - 1 (T: float for
// f32 / f16 / bf16, double for f64; src and out dense row-major).
template <class T>
void add_rows(const T* src, const std::vector<int64_t>& index, T* out, int64_t M, int64_t S, int64_t K) {
  const int64_t N = int64_t(index.size());
  std::fill(out, out + M * S * K, T(0));
  // Slices of 64 columns (four cache lines of f32): a 256-wide embedding gives four tasks.
  constexpr int64_t kSlice = 64;
  const int64_t slices = (K + kSlice - 1) / kSlice;
  parallel_for(M * N * K >= (int64_t(1) << 15) && M * slices > 1, M * slices, [&](int64_t task) {
    const int64_t m = task / slices, k0 = (task % slices) * kSlice, k1 = std::min(K, k0 + kSlice);
    const T* from = src + m * N * K;
    T* to = out + m * S * K;
    for (int64_t n = 0; n < N; ++n) {
      const T* row = from + n * K;
      T* target = to + index[size_t(n)] * K;
#pragma omp simd
      for (int64_t k = k0; k < k1; ++k) target[k] += row[k];
    }
  });
}

template <class T>
void run(const ember_tensor_desc& src, const std::vector<int64_t>& index, const ember_tensor_desc& out, int64_t M,
         int64_t S, int64_t K) {
  DenseIn<T> in(src);
  DenseOut<T> result(out);
  add_rows(in.data, index, result.data, M, S, K);
  result.finish();
}

}  // namespace

int32_t index_add_library(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
                          const ember_index_attrs& a, ember_status* st) {
  if (n_in != 2) return set_status(st, EMBER_ERR_INVALID, "index_add: %d inputs, expected src and index", n_in);
  const ember_tensor_desc& src = in[0];
  const ember_tensor_desc& idx = in[1];
  const int r = src.rank, dim = a.dim;
  if (r < 1 || r > 8 || out.rank != r || dim < 0 || dim >= r)
    return set_status(st, EMBER_ERR_INVALID, "index_add: bad ranks (src %d, out %d) or dim %d", r, out.rank, dim);
  if (!is_float_dtype(uint8_t(src.dtype)) || out.dtype != src.dtype || idx.dtype != EMBER_I64 || idx.rank != 1 ||
      idx.shape[0] != src.shape[dim])
    return set_status(st, EMBER_ERR_INVALID, "index_add: src and out must share a floating dtype and index be i64 [%lld]",
                      static_cast<long long>(src.shape[dim]));
  int64_t M = 1, K = 1;
  for (int d = 0; d < r; ++d) {
    if (d != dim && src.shape[d] != out.shape[d])
      return set_status(st, EMBER_ERR_INVALID, "index_add: src and out differ in dim %d (%lld, %lld)", d,
                        static_cast<long long>(src.shape[d]), static_cast<long long>(out.shape[d]));
    if (d < dim) M *= out.shape[d];
    if (d > dim) K *= out.shape[d];
  }
  const int64_t S = out.shape[dim], N = src.shape[dim];
  // Every index is checked before anything is written.
  std::vector<int64_t> index(static_cast<size_t>(N));
  const auto* pi = static_cast<const int64_t*>(idx.buffer->data) + idx.offset;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t v = pi[n * idx.strides[0]];
    if (v < 0 || v >= S)
      return set_status(st, EMBER_ERR_INVALID, "index_add: index %lld at position %lld is out of range for a dimension of size %lld",
                        static_cast<long long>(v), static_cast<long long>(n), static_cast<long long>(S));
    index[size_t(n)] = v;
  }
  if (src.dtype == EMBER_F64) run<double>(src, index, out, M, S, K);
  else run<float>(src, index, out, M, S, K);
  return EMBER_OK;
}

}  // namespace ember::cpu
