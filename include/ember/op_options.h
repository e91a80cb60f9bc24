// The option structs of the convolution and pooling ops (ember/ops_library.h): plain data, also
// what the op table stores as those nodes' attributes, so the layers below the op front end
// include this header and not the op API. Aggregates meant for designated initializers:
// conv2d(x, w, b, {.stride = 2, .padding = 1}), max_pool2d(h, {.kernel = 2}).
#pragma once

#include <cstdint>

namespace ember {

// A (height, width) pair; one number means both.
struct IntPair {
  int64_t h = 0, w = 0;
  IntPair() = default;
  IntPair(int64_t v) : h(v), w(v) {}  // NOLINT: implicit, so `.stride = 2` works
  IntPair(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};

// Zero padding of a 2-D convolution: one number (all sides), {h, w} (symmetric per dim), four
// numbers (top, bottom, left, right), or Padding2d::same() (stride 1 only: the output has the
// input's size; an odd total puts the extra row/column at the bottom/right, as PyTorch does).
struct Padding2d {
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  bool is_same = false;
  Padding2d() = default;
  Padding2d(int64_t p) : top(p), bottom(p), left(p), right(p) {}  // NOLINT: implicit on purpose
  Padding2d(int64_t ph, int64_t pw) : top(ph), bottom(ph), left(pw), right(pw) {}
  Padding2d(int64_t t, int64_t b, int64_t l, int64_t r) : top(t), bottom(b), left(l), right(r) {}
  static Padding2d same() {
    Padding2d p;
    p.is_same = true;
    return p;
  }
};

// Zero padding of a 1-D convolution: one number (both sides), {left, right}, or same().
struct Padding1d {
  int64_t left = 0, right = 0;
  bool is_same = false;
  Padding1d() = default;
  Padding1d(int64_t p) : left(p), right(p) {}  // NOLINT: implicit on purpose
  Padding1d(int64_t l, int64_t r) : left(l), right(r) {}
  static Padding1d same() {
    Padding1d p;
    p.is_same = true;
    return p;
  }
};

struct Conv2dOptions {
  IntPair stride = 1;
  Padding2d padding = 0;
  IntPair dilation = 1;
  int64_t groups = 1;
};
struct Conv1dOptions {
  int64_t stride = 1;
  Padding1d padding = 0;
  int64_t dilation = 1;
  int64_t groups = 1;
};

// Pooling windows (max_pool2d, avg_pool2d and their 1-D forms).
struct Pool2dOptions {
  IntPair kernel = 1;
  IntPair stride = 0;   // 0 = the kernel size (PyTorch's default)
  IntPair padding = 0;  // per side, at most half the kernel
  bool count_include_pad = true;  // avg pooling: divide by the whole window, padding included
};
struct Pool1dOptions {
  int64_t kernel = 1;
  int64_t stride = 0;
  int64_t padding = 0;
  bool count_include_pad = true;
};

}  // namespace ember
