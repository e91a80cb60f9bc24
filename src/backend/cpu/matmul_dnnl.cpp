// Matrix multiplication for the CPU backend (EMBER_LIB_MATMUL, see abi.h): a [..., M, K] times
// b [..., K, N] into a contiguous out [..., M, N], batch dims already broadcast (stride 0 allowed).
//  - f32 with M <= 4: dot-product / row-update loops (gemv.cpp);
//  - f32: oneDNN matmul on strided 2-D descriptors (transposed operands are read in place; other
//    layouts are packed first). A batch that shares b and walks a contiguously is folded into M;
//    other batches loop over their entries with one cached primitive.
//  - f16/bf16: operands converted to f32, oneDNN, result rounded to nearest even.
//  - f64 (accumulated in f64) and integers (accumulated in i64, wrapping): a row-blocked loop.
#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "backend/common/host_memory.h"
#include "backend/cpu/gemv.h"
#include "backend/cpu/matmul.h"
#include "ember/dtype.h"

namespace ember::cpu {

using ember::host::set_status;

namespace {

size_t elem_bytes(int32_t dt) {
  switch (dt) {
    case EMBER_F64: case EMBER_I64: return 8;
    case EMBER_F32: case EMBER_I32: return 4;
    case EMBER_F16: case EMBER_BF16: return 2;
    default: return 1;
  }
}

// A 2-D operand: element (i, j) at data[i * rs + j * cs].
template <class T>
struct Mat {
  T* data;
  int64_t rs, cs;
};

// ---- oneDNN f32 -----------------------------------------------------------------------------
dnnl::engine& engine() {
  // Never destroyed (like the caches below): work may still run on a queue thread during exit.
  static dnnl::engine& e = *new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return e;
}

// Strides oneDNN accepts for a plain 2-D tensor (row- or column-major with a leading dimension);
// size-1 dims get a canonical stride. False if the layout is not plain.
bool plain_strides(int64_t rows, int64_t cols, int64_t& rs, int64_t& cs) {
  if (cols == 1) cs = 1;
  if (rows == 1) rs = cs == 1 ? std::max<int64_t>(cols, 1) : 1;
  if (rows == 1 && cols == 1) rs = cs = 1;
  return (cs == 1 && rs >= cols) || (rs == 1 && cs >= rows);
}

using Key = std::array<int64_t, 9>;

dnnl::matmul primitive(const Key& key) {
  static std::mutex& mutex = *new std::mutex;
  static std::map<Key, dnnl::matmul>& cache = *new std::map<Key, dnnl::matmul>;
  std::lock_guard lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  using dt = dnnl::memory::data_type;
  const int64_t M = key[0], N = key[1], K = key[2];
  dnnl::memory::desc a({M, K}, dt::f32, {key[3], key[4]});
  dnnl::memory::desc b({K, N}, dt::f32, {key[5], key[6]});
  dnnl::memory::desc c({M, N}, dt::f32, {key[7], key[8]});
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
  dnnl::matmul prim(pd);
  if (cache.size() > 256) cache.clear();
  cache.emplace(key, prim);
  return prim;
}

// Packs a strided matrix into a row-major one.
template <class T, class D, class F>
void pack(Mat<const T> m, int64_t rows, int64_t cols, D* out, F convert) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[i * cols + j] = convert(m.data[i * m.rs + j * m.cs]);
}

// C (plain, f32) = A B with oneDNN; operands in other layouts are packed.
void gemm_f32(int64_t M, int64_t N, int64_t K, Mat<const float> A, Mat<const float> B, Mat<float> C) {
  // A few rows (batch-1 inference, matrix-vector): plain loops beat oneDNN's per-call setup.
  if (M <= 4 && small_m_gemm_f32(M, N, K, A.data, A.rs, A.cs, B.data, B.rs, B.cs, C.data, C.rs)) return;
  std::vector<float> pa, pb;
  if (!plain_strides(M, K, A.rs, A.cs)) {
    pa.resize(size_t(M * K));
    pack(A, M, K, pa.data(), [](float x) { return x; });
    A = {pa.data(), K, 1};
  }
  if (!plain_strides(K, N, B.rs, B.cs)) {
    pb.resize(size_t(K * N));
    pack(B, K, N, pb.data(), [](float x) { return x; });
    B = {pb.data(), N, 1};
  }
  plain_strides(M, N, C.rs, C.cs);
  dnnl::matmul prim = primitive({M, N, K, A.rs, A.cs, B.rs, B.cs, C.rs, C.cs});
  using dt = dnnl::memory::data_type;
  dnnl::memory am({{M, K}, dt::f32, {A.rs, A.cs}}, engine(), const_cast<float*>(A.data));
  dnnl::memory bm({{K, N}, dt::f32, {B.rs, B.cs}}, engine(), const_cast<float*>(B.data));
  dnnl::memory cm({{M, N}, dt::f32, {C.rs, C.cs}}, engine(), C.data);
  dnnl::stream s(engine());
  prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.wait();
}

// ---- loops for f64 and integers ---------------------------------------------------------------
// kBool: bytes are booleans (read as != 0, stored as 0/1).
template <class T, class Acc, bool kBool = false>
void gemm_loop(int64_t M, int64_t N, int64_t K, Mat<const T> A, Mat<const T> B, Mat<T> C) {
  [[maybe_unused]] const bool par = M > 1 && M * N * K >= (int64_t(1) << 18) && !omp_in_parallel();
#pragma omp parallel if (par)
  {
    std::vector<Acc> acc(static_cast<size_t>(N));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < M; ++i) {
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k = 0; k < K; ++k) {
        const T* b = B.data + k * B.rs;
        if constexpr (kBool) {
          const Acc a = Acc(A.data[i * A.rs + k * A.cs] != 0);
          for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += a * Acc(b[j * B.cs] != 0);
          continue;
        }
        const Acc a = Acc(A.data[i * A.rs + k * A.cs]);
        if (B.cs == 1) {
          for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += a * Acc(b[j]);
        } else {
          for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += a * Acc(b[j * B.cs]);
        }
      }
      for (int64_t j = 0; j < N; ++j) {
        if constexpr (kBool) C.data[i * C.rs + j * C.cs] = acc[size_t(j)] != 0;
        else C.data[i * C.rs + j * C.cs] = T(acc[size_t(j)]);
      }
    }
  }
}

template <class T>
Mat<T> mat(void* base, int64_t offset, int64_t rs, int64_t cs) {
  return {static_cast<T*>(base) + offset, rs, cs};
}

// One 2-D product at the given element offsets.
void gemm_one(int32_t dt, int64_t M, int64_t N, int64_t K, const ember_tensor_desc& a, int64_t oa,
              int64_t ars, int64_t acs, const ember_tensor_desc& b, int64_t ob, const ember_tensor_desc& c,
              int64_t oc, int64_t crs) {
  const int r = c.rank;
  const int64_t brs = b.strides[r - 2], bcs = b.strides[r - 1], ccs = c.strides[r - 1];
  void *da = a.buffer->data, *db = b.buffer->data, *dc = c.buffer->data;
  switch (dt) {
    case EMBER_F32:
      gemm_f32(M, N, K, mat<const float>(da, oa, ars, acs), mat<const float>(db, ob, brs, bcs),
               mat<float>(dc, oc, crs, ccs));
      break;
    case EMBER_F16: case EMBER_BF16: {
      std::vector<float> pa(size_t(M * K)), pb(size_t(K * N)), pc(size_t(M * N));
      auto to_f = [dt](uint16_t h) { return dt == EMBER_F16 ? ember::half_to_float(h) : ember::bf16_to_float(h); };
      pack(mat<const uint16_t>(da, oa, ars, acs), M, K, pa.data(), to_f);
      pack(mat<const uint16_t>(db, ob, brs, bcs), K, N, pb.data(), to_f);
      gemm_f32(M, N, K, {pa.data(), K, 1}, {pb.data(), N, 1}, {pc.data(), N, 1});
      Mat<uint16_t> C = mat<uint16_t>(dc, oc, crs, ccs);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          float v = pc[size_t(i * N + j)];
          C.data[i * C.rs + j * C.cs] = dt == EMBER_F16 ? ember::float_to_half(v) : ember::float_to_bf16(v);
        }
      break;
    }
    case EMBER_F64:
      gemm_loop<double, double>(M, N, K, mat<const double>(da, oa, ars, acs), mat<const double>(db, ob, brs, bcs),
                                mat<double>(dc, oc, crs, ccs));
      break;
    case EMBER_I64:
      gemm_loop<int64_t, uint64_t>(M, N, K, mat<const int64_t>(da, oa, ars, acs),
                                   mat<const int64_t>(db, ob, brs, bcs), mat<int64_t>(dc, oc, crs, ccs));
      break;
    case EMBER_I32:
      gemm_loop<int32_t, uint64_t>(M, N, K, mat<const int32_t>(da, oa, ars, acs),
                                   mat<const int32_t>(db, ob, brs, bcs), mat<int32_t>(dc, oc, crs, ccs));
      break;
    case EMBER_U8:
      gemm_loop<uint8_t, uint64_t>(M, N, K, mat<const uint8_t>(da, oa, ars, acs),
                                   mat<const uint8_t>(db, ob, brs, bcs), mat<uint8_t>(dc, oc, crs, ccs));
      break;
    default:  // bool
      gemm_loop<uint8_t, uint64_t, true>(M, N, K, mat<const uint8_t>(da, oa, ars, acs),
                                         mat<const uint8_t>(db, ob, brs, bcs), mat<uint8_t>(dc, oc, crs, ccs));
      break;
  }
}

// Fills an output with zeros (K = 0).
void zero_fill(const ember_tensor_desc& c, int64_t batches) {
  const int r = c.rank;
  const size_t es = elem_bytes(c.dtype);
  char* data = static_cast<char*>(c.buffer->data);
  for (int64_t bt = 0; bt < batches; ++bt) {
    int64_t oc = c.offset, rem = bt;
    for (int d = r - 3; d >= 0; --d) {
      oc += (rem % c.shape[d]) * c.strides[d];
      rem /= c.shape[d];
    }
    for (int64_t i = 0; i < c.shape[r - 2]; ++i)
      for (int64_t j = 0; j < c.shape[r - 1]; ++j)
        std::memset(data + size_t(oc + i * c.strides[r - 2] + j * c.strides[r - 1]) * es, 0, es);
  }
}

bool in_bounds(const ember_tensor_desc& t) {
  int64_t lo = t.offset, hi = t.offset;
  for (int d = 0; d < t.rank; ++d) {
    if (t.shape[d] == 0) return true;
    const int64_t ext = (t.shape[d] - 1) * t.strides[d];
    (ext > 0 ? hi : lo) += ext;
  }
  return lo >= 0 && size_t(hi + 1) * elem_bytes(t.dtype) <= t.buffer->bytes;
}

// If dims [0, r-1) of t (batch dims and rows) walk memory as one strided dim, its stride.
bool fold_rows(const ember_tensor_desc& t, int64_t& stride) {
  const int r = t.rank;
  int64_t s = 0, extent = 1;
  bool have = false;
  for (int d = r - 2; d >= 0; --d) {
    if (t.shape[d] == 1) continue;
    if (!have) {
      s = t.strides[d];
      have = true;
    } else if (t.strides[d] != s * extent) {
      return false;
    }
    extent *= t.shape[d];
  }
  stride = have ? s : 1;
  return true;
}

}  // namespace

int32_t matmul(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
               ember_status* st) {
  if (n_in != 2 || n_out != 1 || !in || !out)
    return set_status(st, EMBER_ERR_INVALID, "matmul: expects 2 inputs and 1 output, got %d and %d", n_in, n_out);
  const ember_tensor_desc &a = in[0], &b = in[1], &c = out[0];
  const int r = c.rank;
  if (r < 2 || r > 8 || a.rank != r || b.rank != r)
    return set_status(st, EMBER_ERR_INVALID, "matmul: ranks %d, %d -> %d (need equal ranks from 2 to 8)", a.rank,
                      b.rank, c.rank);
  if (a.dtype != c.dtype || b.dtype != c.dtype || c.dtype < EMBER_F32 || c.dtype > EMBER_BOOL)
    return set_status(st, EMBER_ERR_INVALID, "matmul: dtypes %d, %d -> %d must be equal", a.dtype, b.dtype, c.dtype);
  const int64_t M = c.shape[r - 2], N = c.shape[r - 1], K = a.shape[r - 1];
  bool ok = a.shape[r - 2] == M && b.shape[r - 2] == K && b.shape[r - 1] == N;
  int64_t batches = 1;
  for (int d = 0; d < r - 2; ++d) {
    ok = ok && a.shape[d] == c.shape[d] && b.shape[d] == c.shape[d];
    batches *= c.shape[d];
  }
  if (!ok) return set_status(st, EMBER_ERR_INVALID, "matmul: operand shapes do not match [..., M, K] x [..., K, N]");
  if (batches * M * N == 0) return EMBER_OK;
  if (!a.buffer || !b.buffer || !c.buffer)
    return set_status(st, EMBER_ERR_INVALID, "matmul: missing buffer");
  if (!in_bounds(a) || !in_bounds(b) || !in_bounds(c))
    return set_status(st, EMBER_ERR_INVALID, "matmul: an operand view reaches outside its buffer");
  if (K == 0) {
    zero_fill(c, batches);
    return EMBER_OK;
  }
  try {
    // b shared by every batch entry and a, out walking their batch and row dims as one: fold the
    // batch into M (one large product instead of many small ones).
    bool b_shared = true;
    for (int d = 0; d < r - 2; ++d) b_shared = b_shared && (b.strides[d] == 0 || c.shape[d] == 1);
    int64_t ars = 0, crs = 0;
    if (batches > 1 && b_shared && fold_rows(a, ars) && fold_rows(c, crs)) {
      gemm_one(c.dtype, batches * M, N, K, a, a.offset, ars, a.strides[r - 1], b, b.offset, c, c.offset, crs);
      return EMBER_OK;
    }
    for (int64_t bt = 0; bt < batches; ++bt) {
      int64_t oa = a.offset, ob = b.offset, oc = c.offset, rem = bt;
      for (int d = r - 3; d >= 0; --d) {
        const int64_t i = rem % c.shape[d];
        rem /= c.shape[d];
        oa += i * a.strides[d];
        ob += i * b.strides[d];
        oc += i * c.strides[d];
      }
      gemm_one(c.dtype, M, N, K, a, oa, a.strides[r - 2], a.strides[r - 1], b, ob, c, oc, c.strides[r - 2]);
    }
  } catch (const dnnl::error& e) {
    return set_status(st, EMBER_ERR_INTERNAL, "matmul: oneDNN failed: %s (status %d)", e.what(), int(e.status));
  } catch (const std::bad_alloc&) {
    return set_status(st, EMBER_ERR_OUT_OF_MEMORY, "matmul: out of memory");
  }
  return EMBER_OK;
}

}  // namespace ember::cpu
