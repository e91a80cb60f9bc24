// The CPU backend's library calls beyond matmul (abi.h EMBER_LIB_CONV2D ... INDEX_ADD):
//  - conv_dnnl.cpp: convolution forward / backward-data / backward-weights and max/avg pooling
//    forward with oneDNN in f32 (f16/bf16 converted to f32 and back); f64 through direct loops.
//  - library_loops.cpp: the loops (f64 convolution, max-pool indices, avg-pool backward, sorting,
//    top-k and scans), OpenMP over independent planes or rows, plus strided packing helpers.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/abi.h"

namespace ember::cpu {

int32_t conv_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
                     const void* attrs, ember_status* st);
// Direct f32 convolutions for inputs with few channels, NCHW in and out (conv_small_c.cpp): the
// geometry of x [N, C, H, W], w [O, C, KH, KW], y [N, O, OH, OW] and the padding before each dim.
struct SmallConv {
  int64_t N, C, H, W, O, KH, KW, OH, OW, pad_top, pad_left;
};
// One input channel (grayscale images): against oneDNN with its reorders, [64, 1, 28, 28] with 32
// 3x3 filters took 0.60x the time at 1 thread and 0.65x at 2; an RGB stem ([32, 3, 32, 32], 32
// filters) 1.24x at both, so three channels stay with oneDNN (bench/ab conv2d.*.k3.s1 cases).
constexpr int64_t kSmallConvMaxChannels = 1;
constexpr int kSmallConvMaxTaps = 27;  // C * KH * KW
bool small_channel_conv_fits(const SmallConv& s, const ember_conv_attrs& a);
// `post`: post-ops without tensor operands, applied to each output plane right after its sums
// (nullptr: none).
void small_channel_conv_forward(const SmallConv& s, const float* x, const float* w, const float* bias, float* y,
                                const ember_epilogue_attrs* post);
void small_channel_conv_backward_weights(const SmallConv& s, const float* x, const float* dy, float* dw);
int32_t pool_library(int32_t op, const ember_tensor_desc& in, const ember_tensor_desc& out, const void* attrs,
                     ember_status* st);
// Max pooling forward, indices and backward in the operand's precision (pool_max.cpp); `post`: the
// backward's post-ops (EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE, f32 / f64), applied to each plane
// of dx right after it is computed, with their operands in `in` after dy and x.
int32_t max_pool_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
                         const ember_pool_attrs& a, ember_status* st, const ember_epilogue_attrs* post = nullptr);
int32_t sort_scan_library(int32_t op, const ember_tensor_desc& in, const ember_tensor_desc& out, const void* attrs,
                          ember_status* st);
// EMBER_LIB_FUSED_ATTENTION (attention.cpp): tiled online-softmax attention.
int32_t attention_library(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out, int32_t n_out,
                          const void* attrs, ember_status* st);
int32_t attention_backward_library(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                                   int32_t n_out, const void* attrs, ember_status* st);
// EMBER_LIB_LSTM_RECURRENCE, EMBER_LIB_GRU_RECURRENCE and their backwards (recurrence.cpp): the
// time loop of an LSTM or GRU layer.
int32_t recurrence_library(int32_t op, const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc* out,
                           int32_t n_out, const void* attrs, ember_status* st);
// EMBER_LIB_INDEX_ADD (index_add.cpp): sums of rows at integer positions.
int32_t index_add_library(const ember_tensor_desc* in, int32_t n_in, const ember_tensor_desc& out,
                          const ember_index_attrs& a, ember_status* st);

// ---- helpers shared by the two files ---------------------------------------------------------
int64_t desc_numel(const ember_tensor_desc& d);
bool desc_contiguous(const ember_tensor_desc& d);
// A floating descriptor read into a dense row-major vector of T (float or double).
template <class T>
std::vector<T> pack_dense(const ember_tensor_desc& d);
// A dense row-major vector of T written into a floating descriptor (rounding to its dtype).
template <class T>
void unpack_dense(const std::vector<T>& v, const ember_tensor_desc& d);

// A floating operand as a dense row-major array of T (float or double): the buffer itself when it
// already is one (T's dtype, contiguous), else a packed copy.
template <class T>
struct DenseIn {
  std::vector<T> copy;
  const T* data = nullptr;
  explicit DenseIn(const ember_tensor_desc& d) {
    constexpr int32_t kDtype = sizeof(T) == 8 ? EMBER_F64 : EMBER_F32;
    if (d.dtype == kDtype && desc_contiguous(d)) {
      data = static_cast<const T*>(d.buffer->data) + d.offset;
    } else {
      copy = pack_dense<T>(d);
      data = copy.data();
    }
  }
};
// An output written as a dense row-major array of T: in place when it is one, else through a
// vector that finish() rounds into it.
template <class T>
struct DenseOut {
  const ember_tensor_desc& desc;
  std::vector<T> copy;
  T* data = nullptr;
  explicit DenseOut(const ember_tensor_desc& d) : desc(d) {
    constexpr int32_t kDtype = sizeof(T) == 8 ? EMBER_F64 : EMBER_F32;
    if (d.dtype == kDtype && desc_contiguous(d)) {
      data = static_cast<T*>(d.buffer->data) + d.offset;
    } else {
      copy.resize(size_t(desc_numel(d)));
      data = copy.data();
    }
  }
  void finish() {
    if (!copy.empty()) unpack_dense(copy, desc);
  }
};

// f64 direct loops on dense operands (library_loops.cpp).
void conv2d_f64(const double* x, const double* w, const double* bias, double* y, const int64_t xs[4],
                const int64_t ws[4], const int64_t ys[4], const ember_conv_attrs& a);
void conv2d_backward_data_f64(const double* dy, const double* w, double* dx, const int64_t dxs[4],
                              const int64_t ws[4], const int64_t dys[4], const ember_conv_attrs& a);
void conv2d_backward_weights_f64(const double* x, const double* dy, double* dw, const int64_t xs[4],
                                 const int64_t dws[4], const int64_t dys[4], const ember_conv_attrs& a);
// Pooling in double: f64 forward, max-pool indices, avg-pool backward (library_loops.cpp).
int32_t pool_loops(int32_t op, const ember_tensor_desc& in, const ember_tensor_desc& out, const ember_pool_attrs& a,
                   ember_status* st);

}  // namespace ember::cpu
