// Kernel launches shared by the lowering files: an iteration space with its arguments, collapsed
// into few long dims and run as a KIR program on a backend; plus buffer and stride helpers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/node.h"
#include "kir/builder.h"

namespace ember {

Backend& backend_for(Device d);
// A fresh contiguous buffer for the node's shape and dtype (its placement, if it has one).
View alloc_contiguous(const Node& n);
// A fresh contiguous buffer for `shape` and `dtype` (a multi-output node's other outputs).
View alloc_contiguous(Device device, const Shape& shape, DType dtype);
bool is_contiguous(const View& v, const Shape& shape);
// Strides of `in` (shape in_shape) read at every point of out_shape (numpy broadcasting).
std::vector<int64_t> broadcast_strides(const Shape& in_shape, const std::vector<int64_t>& strides,
                                       const Shape& out_shape);

// An iteration space (outer dims, then reduce dims) with its arguments.
struct Launch {
  int outer_rank = 0;
  std::vector<int64_t> shape;
  struct Arg {
    std::shared_ptr<DeviceBuffer> buffer;
    int64_t offset = 0;
    std::vector<int64_t> strides;  // over `shape`
    int64_t gather_stride = 0, gather_size = 0;
  };
  std::vector<Arg> args;

  void add(const View& v, std::vector<int64_t> strides) {
    args.push_back({v.buffer, v.offset, std::move(strides), 0, 0});
  }
  // Drops size-1 dims and merges neighbours that every argument walks contiguously, so kernels
  // see few, long dims (a contiguous elementwise op becomes one flat loop).
  void collapse();
  // Collapses, compiles (cached) and runs the program `b` built for these arguments.
  // `structure_hash` is b.structure_hash() when the caller has it (a kernel launched again and
  // again keeps it), else 0: computed here.
  void run(Device device, const kir::Builder& b, const std::string& name, uint64_t structure_hash = 0);
};

// A Full node (pending or ready) folds into its consumers as a constant.
inline bool is_constant(const NodePtr& n) { return n->op == Op::Full; }

// Copies `src` (viewed with `src_view`) into `dst` at every point of `shape`.
void copy_kernel(const Node& src, const View& src_view, const Shape& shape, const View& dst,
                 const std::vector<int64_t>& dst_strides, Device device);
// A contiguous copy of a view.
View materialize(const Node& n, const View& v);

// The lowering of each kind of node (sets node.view); see lower_*.cpp.
void run_elementwise(Node& n);
void run_generator(Node& n);
void run_reduce(Node& n);
void run_gather(Node& n);
void run_scatter_add(Node& n);
void run_cat(Node& n);
void run_matmul(Node& n);
void run_library(Node& n);  // ops of ops_library.def (lower_library.cpp)
void run_movement(Node& n);

}  // namespace ember
