// Out-of-line helpers of the typed facade (ember/tensor.h).
#include "ember/tensor.h"

#include <fmt/format.h>

namespace ember::detail {

void kind_mismatch(const char* kind, int rank, const Array& a, Loc loc) {
  throw Error(fmt::format(
      "Tensor<{}, {}>: got a tensor of rank {} and dtype {} (at {}); {}", rank, kind, a.rank(),
      dtype_name(a.dtype()), format_location(loc),
      a.rank() != rank ? "change the rank with reshape/squeeze/unsqueeze"
                       : "the result's dtype does not belong to this kind; convert with to_float()/to_int()/to_bool()"));
}

void check_nested_size(size_t got, int64_t expected, int depth, Loc loc) {
  if (expected >= 0 && int64_t(got) != expected)
    throw Error(fmt::format("from_data: ragged data: a list at depth {} has {} elements, another has {} (at {})",
                            depth, got, expected, format_location(loc)));
}

}  // namespace ember::detail
