// Lowering of contractions to backend library calls (oneDNN on the CPU).
#include <fmt/format.h>

#include <algorithm>
#include <cassert>

#include "ember/error.h"
#include "ops/dtype_rules.h"
#include "scheduler/launch.h"

namespace ember {

void run_matmul(Node& n) {
  const Node& a = *n.inputs[0];
  const Node& b = *n.inputs[1];
  n.view = alloc_contiguous(n);
  if (n.shape.numel() == 0) return;
  int r = n.shape.rank();
  auto desc = [&](const Node& x, const View& v, int64_t rows, int64_t cols) {
    ember_tensor_desc d{};
    d.buffer = v.buffer->handle;
    d.offset = v.offset;
    d.dtype = int32_t(x.dtype);
    d.rank = r;
    Shape want = n.shape;
    want[r - 2] = rows;
    want[r - 1] = cols;
    std::vector<int64_t> s = broadcast_strides(x.shape, v.strides, want);
    // A size-1 matrix dim keeps its own stride (any value works; keep a valid one).
    for (int i = 0; i < r; ++i) {
      d.shape[i] = want[i];
      d.strides[i] = s[size_t(i)];
    }
    return d;
  };
  int64_t K = a.shape[a.shape.rank() - 1];
  ember_tensor_desc ins[2] = {desc(a, a.view, n.shape[r - 2], K), desc(b, b.view, K, n.shape[r - 1])};
  ember_tensor_desc out = desc(n, n.view, n.shape[r - 2], n.shape[r - 1]);
  backend_for(n.device).library_call(EMBER_LIB_MATMUL, ins, 2, &out, 1, nullptr);
}

void run_library(Node& n) {
  switch (n.op) {
    default: throw Error(fmt::format("{}: no lowering for this library op", n.where()));
  }
}

}  // namespace ember
