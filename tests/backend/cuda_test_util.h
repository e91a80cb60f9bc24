// What the CUDA kernel tests share (cuda_emulation_test.cpp: the kernels on the CPU under a shim;
// cuda_driver_test.cpp: the same kernels on a GPU through the driver API): the launch words of a
// harness launch, the outer points of a reduction, and the comparison of a generated program's
// results with the reference's.
#pragma once

#include <vector>

#include "backend/common/emit_gpu.h"
#include "backend/kir_harness.h"
#include "backend/kir_program_gen.h"

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

// One generated program run as a CUDA kernel (`got`, and the text of its error word, empty when
// none) against the reference's results (`want`): counts it as compared, or adds a failure that
// shows the program, its launch and the reduction mode.
inline void expect_kernel_matches(ProgramGen& g, const std::string& name, bool tree, const std::string& kernel_error,
                                  const std::vector<std::vector<uint8_t>>& got,
                                  const std::vector<std::vector<uint8_t>>& want, int& compared, int& failures) {
  const std::string context = name + (tree ? " (a block per outer point)" : "") + "\n" +
                              kir::to_string(g.b.program(name)) + g.describe();
  if (!kernel_error.empty()) {
    ADD_FAILURE() << "the kernel reports '" << kernel_error << "'\n" << context;
    ++failures;
    return;
  }
  ++compared;
  if (const std::string m = first_output_mismatch(g, got, want); !m.empty()) {
    ADD_FAILURE() << m << "\n" << context;
    ++failures;
  }
}

}  // namespace ember::testing
