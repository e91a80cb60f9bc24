// embedding (include/ember/ops_nn.h): rows of a table at integer indices (index_select), with
// no gradient into the padding row.
#include <fmt/format.h>

#include "ember/ops.h"
#include "ember/ops_nn.h"
#include "ops/nn_embedding.h"

namespace ember {

Array embedding_lookup(const UserCall& call, const Array& indices, const Array& weight, std::optional<int64_t> padding_idx) {
  if (!is_integral(indices.dtype()))
    throw call.error(fmt::format("indices must be integers, got {}", dtype_name(indices.dtype())));
  if (weight.rank() != 2) throw call.error(fmt::format("weight must be [num, dim], got {}", weight.shape().str()));
  const int64_t num = weight.size(0);
  if (padding_idx) {
    if (*padding_idx < -num || *padding_idx >= num)
      throw call.error(fmt::format("padding_idx {} out of range for {} entries", *padding_idx, num));
    if (*padding_idx < 0) *padding_idx += num;
  }
  std::vector<int64_t> out_dims = indices.shape().dims();
  out_dims.push_back(weight.size(1));
  Array flat = reshape(indices, {-1});
  Array rows = index_select(weight, 0, flat);
  if (padding_idx) {
    // Same values, but no gradient flows into the padding row.
    Array is_pad = reshape(eq(flat, *padding_idx), {-1, 1});
    rows = where(is_pad, rows.detach(), rows);
  }
  return reshape(rows, Shape(out_dims));
}

Array embedding(const Array& indices, const Array& weight, std::optional<int64_t> padding_idx, Loc loc) {
  UserCall call("embedding", loc);
  return embedding_lookup(call, indices, weight, padding_idx);
}

}  // namespace ember
