// What the CUDA kernel tests share (cuda_emulation_test.cpp: the kernels on the CPU under a shim;
// cuda_driver_test.cpp: the same kernels on a GPU through the driver API): the launch words of a
// harness launch, and the choice of reduction mode for a generated program.
#pragma once

#include <vector>

#include "backend/common/emit_gpu.h"
#include "backend/kir_harness.h"

namespace ember::testing {

// The launch words (emit_gpu.h's layout, shared by both GPU targets) for a harness launch; the
// launch id is 7, which a test expects back in the error word.
inline std::vector<long long> cuda_launch_words(const HLaunch& h, bool tree) {
  using W = emit::GpuLaunchWords;
  std::vector<long long> w(size_t(W::words(int(h.args.size()))), 0);
  const int rank = h.outer_rank + h.reduce_rank;
  long long points = 1;
  for (int d = 0; d < (h.reduce_rank > 0 ? h.outer_rank : rank); ++d) points *= h.shape[size_t(d)];
  w[W::kPoints] = points;
  w[W::kRank] = rank;
  w[W::kOuterRank] = h.outer_rank;
  w[W::kLaunchId] = 7;
  w[W::kMode] = tree ? 1 : 0;
  for (int d = 0; d < rank; ++d) w[size_t(W::kShape + d)] = h.shape[size_t(d)];
  for (size_t a = 0; a < h.args.size(); ++a) {
    const size_t base = size_t(W::kArgs + W::kPerArg * int(a));
    w[base + W::kOffset] = h.args[a].offset;
    for (size_t d = 0; d < h.args[a].strides.size(); ++d) w[base + W::kStrides + d] = h.args[a].strides[d];
    w[base + W::kGatherStride] = h.args[a].gather_stride;
    w[base + W::kGatherSize] = h.args[a].gather_size;
  }
  return w;
}

// The product of the outer dims: the reduction's outer points.
inline long long cuda_outer_points(const HLaunch& h) {
  long long outer = 1;
  for (int d = 0; d < h.outer_rank; ++d) outer *= h.shape[size_t(d)];
  return outer;
}

}  // namespace ember::testing
