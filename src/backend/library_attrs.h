// The size of each library call's attrs struct (abi.h), for code that copies a call to run it
// later: the host plugins' asynchronous queue (common/host_queue.h) and the core's work recorder
// (work_recorder.h, ops/capture.cpp); and each call's number of outputs, for the plugins' checks. Header-only and C-ABI-only, so plugins can use it
// without linking libember.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/abi.h"

namespace ember {

// Bytes of the attrs struct that library call `op` takes, 0 for none (MATMUL).
inline size_t library_attrs_size(int32_t op) {
  switch (op) {
    case EMBER_LIB_CONV2D: case EMBER_LIB_CONV2D_BACKWARD_DATA: case EMBER_LIB_CONV2D_BACKWARD_WEIGHTS:
      return sizeof(ember_conv_attrs);
    case EMBER_LIB_MAX_POOL2D: case EMBER_LIB_MAX_POOL2D_INDICES: case EMBER_LIB_AVG_POOL2D:
    case EMBER_LIB_AVG_POOL2D_BACKWARD: case EMBER_LIB_MAX_POOL2D_BACKWARD:
      return sizeof(ember_pool_attrs);
    case EMBER_LIB_ARGSORT: case EMBER_LIB_TOPK: return sizeof(ember_sort_attrs);
    case EMBER_LIB_CUMSUM: case EMBER_LIB_CUMPROD: case EMBER_LIB_CUMMAX_INDICES: case EMBER_LIB_CUMMIN_INDICES:
      return sizeof(ember_scan_attrs);
    case EMBER_LIB_FUSED_ATTENTION: case EMBER_LIB_FUSED_ATTENTION_BACKWARD: return sizeof(ember_attention_attrs);
    case EMBER_LIB_MATMUL_EPILOGUE: case EMBER_LIB_CONV2D_EPILOGUE: case EMBER_LIB_MAX_POOL2D_BACKWARD_EPILOGUE:
      return sizeof(ember_epilogue_attrs);
    case EMBER_LIB_LSTM_RECURRENCE: case EMBER_LIB_LSTM_RECURRENCE_BACKWARD: case EMBER_LIB_GRU_RECURRENCE:
    case EMBER_LIB_GRU_RECURRENCE_BACKWARD:
      return sizeof(ember_recurrence_attrs);
    case EMBER_LIB_INDEX_ADD: return sizeof(ember_index_attrs);
    default: return 0;
  }
}

// Whether library call `op` may have `n_out` outputs (abi.h): fused attention two, its backward
// three, the LSTM and GRU recurrences and their backwards three, MAX_POOL2D one or two (the values and their
// indices), every other call one.
inline bool library_output_count_ok(int32_t op, int32_t n_out) {
  switch (op) {
    case EMBER_LIB_FUSED_ATTENTION: return n_out == 2;
    case EMBER_LIB_FUSED_ATTENTION_BACKWARD: return n_out == 3;
    case EMBER_LIB_LSTM_RECURRENCE: case EMBER_LIB_LSTM_RECURRENCE_BACKWARD: case EMBER_LIB_GRU_RECURRENCE:
    case EMBER_LIB_GRU_RECURRENCE_BACKWARD:
      return n_out == 3;
    case EMBER_LIB_MAX_POOL2D: return n_out == 1 || n_out == 2;
    default: return n_out == 1;
  }
}

}  // namespace ember
