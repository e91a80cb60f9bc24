// dropout (include/ember/ops_nn.h): a uniform mask, the kept elements scaled by 1 / (1 - p).
#include <fmt/format.h>

#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ops/call_error.h"

namespace ember {

Array dropout(const Array& x, double p, bool training, std::optional<uint64_t> seed, Loc loc) {
  UserCall call("dropout", loc);
  if (p < 0 || p > 1) throw call_error(fmt::format("dropout: p must be in [0, 1], got {}", p));
  if (!training || p == 0) return x;
  if (p == 1) return mul(x, 0.0);
  Array keep = ge(uniform(x.shape(), 0, 1, {.seed = seed, .dtype = DType::F32, .device = x.device()}), p);
  return where(keep, mul(x, 1.0 / (1.0 - p)), 0.0);
}

}  // namespace ember
