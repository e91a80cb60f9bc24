// Automatic mixed precision: inside an autocast scope, each op runs in the dtype its autocast
// policy states (src/ops/autocast_policy.def, listed in docs/semantics.md): contractions (matmul,
// conv, attention) cast their f32 operands to the low dtype (bf16 or f16; backends accumulate in
// f32), precision-sensitive ops (exp/log/pow, accumulating reductions, softmax, norms' statistics,
// losses) cast low-precision operands up to f32, and every other op follows its inputs (the usual
// promotion). The casts are ordinary lazy cast nodes: they fuse into kernels like any elementwise
// op and are differentiated like any op, so gradients reach f32 parameters in f32.
//
//   {
//     auto scope = ember::autocast({.dtype = DType::BF16});
//     Array loss = nn::cross_entropy(model.forward(x), y);
//   }
//
// The mode is thread-local (as grad mode); scopes nest, and {.enabled = false} switches autocast
// off inside an enclosing scope. Backward passes run with autocast off: the backward of each op
// uses the dtypes its forward pass chose.
#pragma once

#include <optional>

#include "ember/array.h"
#include "ember/dtype.h"

namespace ember {

struct AutocastOptions {
  DType dtype = DType::BF16;  // the low dtype: BF16 or F16
  bool enabled = true;
};

// What an op does with its floating operands inside an autocast scope.
enum class AutocastPolicy : uint8_t {
  Low,     // f32 operands are cast to the low dtype (contractions)
  F32,     // bf16/f16 operands are cast to f32 (precision-sensitive ops)
  Follow,  // operands stay as they are (the usual promotion decides)
};
const char* autocast_policy_name(AutocastPolicy p);  // "low", "f32", "follow"

// The low dtype of the innermost enabled scope of this thread, or nullopt outside autocast.
std::optional<DType> autocast_dtype();

// Sets the thread's autocast state for its lifetime and restores the previous one.
class [[nodiscard]] AutocastGuard {
 public:
  explicit AutocastGuard(AutocastOptions opts);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  std::optional<DType> previous_;
};

// An autocast scope: `auto scope = autocast({.dtype = DType::F16});`. Throws ember::Error for a
// dtype other than BF16 or F16.
[[nodiscard]] inline AutocastGuard autocast(AutocastOptions opts = {}) { return AutocastGuard(opts); }

// For composite functions outside the op table (losses, norms) that follow the F32 policy: x
// cast to f32 when autocast is on and x is bf16/f16, else x itself.
Array autocast_f32(const Array& x, Loc loc = Loc::current());
// For composites that follow the Low policy (a layer's bias added to a contraction's output): x
// cast to the low dtype when autocast is on and x is f32, else x itself.
Array autocast_low(const Array& x, Loc loc = Loc::current());

}  // namespace ember
