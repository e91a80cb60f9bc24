// Array: the untyped tensor handle (dynamic rank, runtime dtype and device). Cheap to copy: it
// shares one immutable graph node. Ops (ember/ops.h) check their inputs at the call and return
// a new lazy Array; data is computed when it is read or eval() is called.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/device.h"
#include "ember/dtype.h"
#include "ember/error.h"
#include "ember/shape.h"

namespace ember {

struct Node;  // internal graph node (src/graph/node.h)
namespace autograd {
struct GradNode;  // internal backward node (src/autograd/grad_node.h)
}
class Gradients;
class Array;

struct BackwardOptions {
  bool retain_graph = false;  // keep saved tensors so backward can run again through this graph
  bool create_graph = false;  // record the backward ops, so gradients can be differentiated again
  // ember::grad only (as torch.autograd.grad): an input that `output` does not depend on is an
  // error naming its index, unless allow_unused (its gradient is then an undefined Array, PyTorch's
  // None) or materialize_grads (zeros of its shape; implies allow_unused).
  bool allow_unused = false;
  bool materialize_grads = false;
  // Array::backward / backward_into: called during the backward walk as soon as a leaf's gradient
  // is final (every path to it has been walked), with the leaf's node (compare with
  // param.grad_node().get()) and its gradient (with backward_into, the running sum). Like every
  // result the gradient is lazy: the hook may start its evaluation, e.g. an all-reduce, while the
  // walk records the rest of the backward graph (dist::DataParallel does).
  std::function<void(const autograd::GradNode* leaf, const Array& grad)> leaf_gradient_ready{};
};

// A C++ number used as an operand. It is "weakly typed": it adopts the tensor's dtype unless it
// belongs to a higher category (see promote_with_scalar).
struct Scalar {
  DTypeCategory category = DTypeCategory::Floating;
  double f = 0;   // the value as a double
  int64_t i = 0;  // the value as an integer (exact for integral scalars)

  template <class T>
    requires std::is_arithmetic_v<T>
  Scalar(T v)  // NOLINT: implicit on purpose, so `x + 1` works
      : category(scalar_category<T>()), f(double(v)), i(to_int64(v)) {}

 private:
  // A floating value outside int64's range (inf, 1e300) or NaN would make the cast undefined
  // behaviour: saturate instead (NaN gives 0). `i` is only read for integral scalars anyway.
  template <class T>
  static constexpr int64_t to_int64(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      if (v != v) return 0;
      if (v >= T(9223372036854775807.0)) return INT64_MAX;
      if (v <= T(-9223372036854775808.0)) return INT64_MIN;
    }
    return static_cast<int64_t>(v);
  }
};

struct TensorOptions {
  std::optional<DType> dtype{};  // unset: f32 for Array functions, the kind's default for Tensor<D, K>
  Device device = Device::cpu();
};

class Array {
 public:
  Array() = default;
  explicit Array(std::shared_ptr<Node> node, std::shared_ptr<autograd::GradNode> grad = nullptr)
      : node_(std::move(node)), grad_(std::move(grad)) {}

  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const;
  int rank() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  int64_t size(int dim) const;  // negative dims count from the end
  DType dtype() const;
  Device device() const;

  // Computes the value (and everything it depends on) now. Returns *this for chaining.
  const Array& eval() const;
  bool is_evaluated() const;

  // Host copies. The element type converts like cast(); reading waits for the value.
  template <class T>
  std::vector<T> to_vector() const {
    if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no data()
      std::vector<uint8_t> bytes(static_cast<size_t>(numel()));
      read_host(DType::Bool, bytes.data());
      return std::vector<bool>(bytes.begin(), bytes.end());
    } else {
      return read_host_vector<T>(dtype_of<T>());
    }
  }
  template <class T>
  T item() const {
    check_single_element();
    T v{};
    read_host(dtype_of<T>(), &v);
    return v;
  }
  // The elements' bytes in the array's own dtype, row-major (numel() * dtype_size(dtype())
  // bytes; bool as 0/1 bytes): what a file format or a wire transfer stores.
  std::vector<uint8_t> to_bytes() const { return read_host_vector<uint8_t>(dtype()); }
  // Prints like PyTorch: "tensor([[1., 2.], [3., 4.]])".
  std::string str() const;

  // ---- autograd (see ember/autograd.h) ----
  // A handle to the same data that is a leaf of differentiation (a parameter): gradients with
  // respect to it can be read from the Gradients of a backward pass. Floating dtypes only.
  Array require_grad(bool on = true) const;
  // True for leaves made with require_grad() and for results computed from them.
  bool requires_grad() const { return grad_ != nullptr; }
  // The same data without history: gradients do not flow through it.
  Array detach() const { return Array(node_); }
  // Gradients of this one-element tensor with respect to every leaf it depends on.
  Gradients backward(BackwardOptions opts = {}) const;
  // Vector-Jacobian product: `grad_output` has this tensor's shape.
  Gradients backward(const Array& grad_output, BackwardOptions opts = {}) const;
  // Adds the gradients of this pass into `into` (gradient accumulation).
  void backward_into(Gradients& into, BackwardOptions opts = {}) const;
  // This leaf's gradient in `grads` (an undefined Array if it has none).
  Array grad(const Gradients& grads) const;

  const std::shared_ptr<Node>& node() const { return node_; }
  const std::shared_ptr<autograd::GradNode>& grad_node() const { return grad_; }

 private:
  void read_host(DType as, void* dst) const;
  // Reads the value as `as` in chunks, each appended by `append(context, chunk, bytes)`. A new
  // vector is filled this way instead of zero-filled and then copied over: one pass over fresh
  // memory instead of two. `reserved` (the destination's reserved, untouched memory, or null) is
  // given transparent huge pages where it is large (far fewer page faults).
  void read_host_chunks(DType as, void* reserved, void (*append)(void* context, const void* chunk, size_t bytes),
                        void* context) const;
  template <class T>
  std::vector<T> read_host_vector(DType as) const {
    std::vector<T> out;
    const size_t bytes = size_t(numel()) * dtype_size(as);
    out.reserve(bytes / sizeof(T));
    read_host_chunks(as, out.data(), [](void* v, const void* chunk, size_t n) {
      const T* first = static_cast<const T*>(chunk);
      static_cast<std::vector<T>*>(v)->insert(static_cast<std::vector<T>*>(v)->end(), first, first + n / sizeof(T));
    }, &out);
    return out;
  }
  void check_single_element() const;
  std::shared_ptr<Node> node_;
  std::shared_ptr<autograd::GradNode> grad_;  // backward history (null: no gradient flows)
};

std::ostream& operator<<(std::ostream& os, const Array& a);

// Realizes several arrays together (one scheduling pass).
void eval(const std::vector<Array>& arrays);
// eval(), then waits until every array is computed (as a read would, without copying), and
// throws the error of one that failed. On an idle device the calling thread runs the work itself
// instead of handing it to the device's worker and waiting: what latency-bound loops (batch-1
// inference) want. Keep one thread doing this: on the CPU, parallel kernels started from two
// threads each keep an OpenMP team, and libgomp then stops spinning between kernels.
void eval_and_wait(const std::vector<Array>& arrays);

}  // namespace ember
