// Merging a KIR launch's dims before a GPU kernel runs it (Vulkan, CUDA): the kernels unravel
// each point's offsets dim by dim, so fewer dims mean fewer divisions.
#pragma once

#include <vector>

#include "backend/abi.h"

namespace ember::plugin {

// The launch with adjacent dims merged where every argument's strides allow it (d and d + 1
// merge when stride[d] == stride[d + 1] * shape[d + 1] for all arguments, those without a
// buffer too: an IOTA reads its argument's offsets) and size-1 dims dropped, separately among
// the outer and the reduce dims: the shaders then divide less.
inline ember_kir_launch coalesce(const ember_kir_launch& in, std::vector<ember_kir_arg>& args) {
  ember_kir_launch out = in;
  args.assign(in.args, in.args + in.n_args);
  out.args = args.data();
  int rank = 0;
  auto merge_range = [&](int lo, int hi) {
    const int start = rank;
    for (int d = lo; d < hi; ++d) {
      if (in.shape[d] == 1 && hi - lo > 1) continue;  // contributes nothing
      if (rank > start) {
        bool ok = true;
        for (int32_t a = 0; a < in.n_args && ok; ++a)
          ok = args[size_t(a)].strides[rank - 1] == in.args[a].strides[d] * in.shape[d];  // IOTA args have no buffer
        if (ok) {
          out.shape[rank - 1] *= in.shape[d];
          for (int32_t a = 0; a < in.n_args; ++a) args[size_t(a)].strides[rank - 1] = in.args[a].strides[d];
          continue;
        }
      }
      out.shape[rank] = in.shape[d];
      for (int32_t a = 0; a < in.n_args; ++a) args[size_t(a)].strides[rank] = in.args[a].strides[d];
      ++rank;
    }
    if (rank == start && hi > lo) {  // all dims were size 1: keep one
      out.shape[rank] = 1;
      for (int32_t a = 0; a < in.n_args; ++a) args[size_t(a)].strides[rank] = 0;
      ++rank;
    }
    return rank - start;
  };
  out.outer_rank = merge_range(0, in.outer_rank);
  out.reduce_rank = merge_range(in.outer_rank, in.outer_rank + in.reduce_rank);
  return out;
}

}  // namespace ember::plugin
