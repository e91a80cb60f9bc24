// The ONNX operator table: op type -> the function that builds its outputs from Ember ops. Each
// family file (ops_elementwise.cpp, ops_reduce.cpp, ops_shape.cpp, ops_nn.cpp) registers its
// operators with a static Registrar; an entry handles the opset differences itself (it reads
// ctx.opset). OpContext gives typed attribute access and errors that name the node.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ember/onnx/onnx.h"
#include "ember/ops.h"

namespace ember::onnx::detail {

class OpContext {
 public:
  OpContext(const Node& node, int node_index, int64_t opset, Device device, std::vector<Array> inputs)
      : opset(opset), device(device), node_(node), index_(node_index), inputs_(std::move(inputs)) {}

  const Node& node() const { return node_; }
  int index() const { return index_; }
  const int64_t opset;
  const Device device;

  int num_inputs() const { return int(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[size_t(i)].defined(); }
  // Input i; an Error naming the node if it is absent.
  const Array& input(int i) const;
  // Input i read to the host as integers / doubles (shape, axes, sizes inputs).
  std::vector<int64_t> ints_input(int i) const;
  std::vector<double> floats_input(int i) const;

  bool has_attr(const std::string& name) const { return node_.attributes.count(name) != 0; }
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  double attr_float(const std::string& name, double fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name) const;  // empty if absent
  std::vector<double> attr_floats(const std::string& name) const;
  const Attribute* attr(const std::string& name) const;

  // "node 'n' (Add, opset 14)": the prefix of every message about this node.
  std::string where() const;
  [[noreturn]] void fail(const std::string& message) const;         // Error
  [[noreturn]] void unsupported(const std::string& message) const;  // Unsupported
  // An axis attribute/input wrapped into [0, rank) with a clear error.
  int axis(int64_t axis, int rank) const;

 private:
  const Node& node_;
  int index_;
  std::vector<Array> inputs_;
};

using OpFn = std::function<std::vector<Array>(const OpContext&)>;

struct OpEntry {
  OpFn fn;
  int64_t min_opset = 1;  // older versions of the operator are reported unsupported
};

std::map<std::string, OpEntry>& op_table();

struct Registrar {
  Registrar(std::initializer_list<std::pair<const char*, OpEntry>> entries);
};

// Runs one node through its table entry (control flow excepted) and checks its outputs.
std::vector<Array> run_node(const Node& n, int index, int64_t opset, Device device, std::vector<Array> inputs);
// Runs a graph's nodes in order over `env` (name -> value, the enclosing scopes' values
// included), adding every node's outputs.
void run_nodes(const Graph& g, std::map<std::string, Array>& env, int64_t opset, Device device);
// If, Loop and Scan (control_flow.cpp): they run subgraphs with the enclosing values in scope.
bool is_control_flow(const std::string& op_type);
std::vector<Array> run_control_flow(const Node& n, int index, const std::map<std::string, Array>& env, int64_t opset,
                                    Device device);

// Static values: those that depend only on the graph inputs' shapes and on constants (Shape and
// Size outputs, constant buffers, and what deterministic ops compute from them alone). Tracked
// during Model::forward; reading one to the host (ints_input) does not stop a captured forward
// from being recorded (ember/capture.h, SignatureOnlyScope), since it is the same on every call
// with the same input shapes.
bool is_static_value(const Array& a);

// Shared helpers.
Array scalar_like(double value, DType dtype, Device device);
// numpy-style broadcasting for a list of operands (Sum, Max, Mean, ...).
Shape broadcast_all(const std::vector<Array>& xs, const char* op);

}  // namespace ember::onnx::detail
