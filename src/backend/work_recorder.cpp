// This thread's work recorder (backend/work_recorder.h) and the attrs sizes of library calls.
#include "backend/work_recorder.h"

namespace ember {

namespace {
thread_local WorkRecorder* t_recorder = nullptr;
}

WorkRecorder* active_work_recorder() { return t_recorder; }
void set_active_work_recorder(WorkRecorder* r) { t_recorder = r; }

WorkRecorderScope::WorkRecorderScope(WorkRecorder* r) : previous_(t_recorder) { t_recorder = r; }
WorkRecorderScope::~WorkRecorderScope() { t_recorder = previous_; }

size_t library_attrs_size(int32_t op) {
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
    case EMBER_LIB_MATMUL_EPILOGUE: case EMBER_LIB_CONV2D_EPILOGUE: return sizeof(ember_epilogue_attrs);
    default: return 0;  // MATMUL
  }
}

}  // namespace ember
