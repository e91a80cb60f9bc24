// Launches larger than a binding: a KIR argument is bound as the window of its buffer that the
// launch touches (access_ranges.h), from a start aligned to the device's offset alignment, and a
// window may be at most the device's largest storage binding (maxStorageBufferRange: 128 MiB on
// lavapipe, 1-4 GiB on most GPUs) although a buffer may be larger. A launch whose windows are too
// large runs as pieces: an outer dim is halved, and the second half's arguments start that many
// rows further on, until every piece's windows fit. Outer dims only: one output point's reduction
// stays in one piece (its order is the reference's), and an argument whose window at one output
// point is already too large is refused.
// Header-only and free of Vulkan types (for the unit tests).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/vulkan/access_ranges.h"

namespace ember::vk {

// What the split needs to know of one argument of a launch.
struct ArgLayout {
  uint32_t elem_bytes = 0;    // 0: unknown dtype (its range is the whole buffer)
  uint64_t buffer_bytes = 0;  // 0: no buffer (an IOTA argument: its offset still counts)
  bool uniform = false;       // read only by LOAD_UNIFORM: the same element at every point
};

// The bytes argument `arg` binds: its range widened down to an `alignment` boundary; empty when
// it has no buffer or touches nothing.
inline ByteRange arg_window(const ember_kir_launch& l, const ember_kir_arg& arg, const ArgLayout& layout,
                            uint64_t alignment) {
  if (layout.buffer_bytes == 0) return {};
  const ByteRange r = kir_arg_range(l, arg, layout.elem_bytes, layout.buffer_bytes);
  if (r.end <= r.begin) return {};
  return {r.begin / alignment * alignment, r.end};
}

// Calls run(piece) for pieces of `l` that together cover each of its points once and whose every
// argument window is at most `max_binding` bytes (`l` itself when it fits). Returns EMBER_OK,
// the first error `run` returns, or EMBER_ERR_UNSUPPORTED with *why when no split of the outer
// dims makes an argument fit.
template <class Run>
int32_t run_in_pieces(const ember_kir_launch& l, const std::vector<ArgLayout>& layout, uint64_t max_binding,
                      uint64_t alignment, Run&& run, std::string* why) {
  int over = -1;
  uint64_t over_bytes = 0;
  for (int32_t a = 0; a < l.n_args && over < 0; ++a) {
    const ByteRange w = arg_window(l, l.args[a], layout[size_t(a)], alignment);
    if (w.end - w.begin > max_binding) over = a, over_bytes = w.end - w.begin;
  }
  if (over < 0) return run(l);
  // The outer dim that moves the argument furthest: halving it about halves the window.
  int dim = -1;
  double widest = 0;  // elements (a double: the comparison only picks a dim, and cannot overflow)
  for (int d = 0; d < l.outer_rank; ++d) {
    const double span = double(l.shape[d] > 1 ? l.shape[d] - 1 : 0) * std::fabs(double(l.args[over].strides[d]));
    if (span > widest) widest = span, dim = d;
  }
  if (dim < 0) {
    if (why)
      *why = "argument " + std::to_string(over) + " spans " + std::to_string(over_bytes) +
             " bytes at a single output point, more than the device's largest storage binding (" +
             std::to_string(max_binding) + " bytes)";
    return EMBER_ERR_UNSUPPORTED;
  }
  const int64_t first = l.shape[dim] / 2;
  std::vector<ember_kir_arg> args(l.args, l.args + l.n_args);
  ember_kir_launch piece = l;
  piece.args = args.data();
  piece.shape[dim] = first;
  if (int32_t rc = run_in_pieces(piece, layout, max_binding, alignment, run, why); rc != EMBER_OK) return rc;
  piece.shape[dim] = l.shape[dim] - first;
  for (int32_t a = 0; a < l.n_args; ++a)
    if (!layout[size_t(a)].uniform) args[size_t(a)].offset += first * args[size_t(a)].strides[dim];
  return run_in_pieces(piece, layout, max_binding, alignment, run, why);
}

}  // namespace ember::vk
