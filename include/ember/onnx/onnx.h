// ONNX import: ember::onnx::load(path) reads a ModelProto into an onnx::Model, an nn::Module whose
// parameters are the model's floating initializers (other initializers and folded constants are
// buffers) and whose forward runs the graph with Ember's ops on any device. The graph is kept as
// plain structs (Node, Attribute, ValueInfo) without protobuf types, so that a later
// onnx::save(model) can write it back. docs/onnx.md lists the supported operators and opsets.
//
//   auto model = ember::onnx::load("resnet.onnx");
//   model.to(ember::Device::parse("vulkan"));
//   auto outputs = model.forward({{"data", image}});  // name -> Array
//   ember::Array logits = outputs.at("prob");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/array.h"
#include "ember/nn/module.h"

namespace ember::onnx {

// Raised for a valid model that Ember cannot run (an operator, attribute, opset or dtype it does
// not support). The message names the node, the op type, the opset and what is missing.
class Unsupported : public Error {
 public:
  using Error::Error;
};

// The ONNX TensorProto.DataType numbers (only some of them have an Ember dtype).
enum class OnnxType : int32_t {
  Undefined = 0, Float = 1, Uint8 = 2, Int8 = 3, Uint16 = 4, Int16 = 5, Int32 = 6, Int64 = 7,
  String = 8, Bool = 9, Float16 = 10, Double = 11, Uint32 = 12, Uint64 = 13, Complex64 = 14,
  Complex128 = 15, BFloat16 = 16,
};
// "float32", "int8", "float8e4m3fn", ... for any ONNX data type number ("type 99" if unknown).
std::string onnx_type_name(int32_t data_type);
// Ember's dtype for an ONNX data type; throws Unsupported naming `what` when there is none.
DType dtype_from_onnx(int32_t data_type, const std::string& what);
int32_t onnx_type_from_dtype(DType dtype);

// One node attribute, typed as in AttributeProto (graphs attributes are not supported yet).
struct Graph;

struct Attribute {
  enum class Kind { Float, Int, String, Tensor, Floats, Ints, Strings, Graph, Other };
  Kind kind = Kind::Other;
  double f = 0;
  int64_t i = 0;
  std::string s{};
  Array t{};
  std::vector<double> floats{};
  std::vector<int64_t> ints{};
  std::vector<std::string> strings{};
  std::shared_ptr<const Graph> graph{};  // Kind::Graph (a Loop's body); null for GRAPHS lists
};

struct Node {
  std::string name{};  // may be empty in the file; errors then use "#index"
  std::string op_type{};
  std::string domain{};  // "" = ai.onnx
  std::vector<std::string> inputs{};  // "" = an optional input left out
  std::vector<std::string> outputs{};
  std::map<std::string, Attribute> attributes{};
  // Values of the enclosing graph that a subgraph attribute reads by name (a Loop body's free
  // variables): the node runs after their producers, and is never folded at load.
  std::vector<std::string> captures{};
};

// A graph input or output: its name, element type and dims (-1 for a dynamic dim; empty dims with
// has_shape false when the file gives no shape).
struct ValueInfo {
  std::string name{};
  int32_t data_type = 0;  // OnnxType number; 0 when not a tensor or not given
  bool is_tensor = true;  // false for sequence / optional / map types
  bool has_shape = false;
  std::vector<int64_t> dims{};
};

struct Graph {
  std::string name{};
  std::vector<Node> nodes{};  // in topological order (checked at load)
  std::vector<ValueInfo> inputs{};  // true inputs only (initializers that are also listed are left out)
  std::vector<ValueInfo> outputs{};
  int64_t ir_version = 0;
  std::map<std::string, int64_t> opsets{};  // domain ("" = ai.onnx) -> version
  int64_t opset() const;                  // the ai.onnx version
  std::map<std::string, Array> constants{};  // a subgraph's own initializers (the main graph's
                                           // are the Model's parameters and buffers)
};

class Model : public nn::Module {
 public:
  Model() = default;

  void visit(nn::Visitor& v) override;
  std::string type_name() const override { return "onnx::Model"; }

  // Runs the graph. Inputs are matched by name (every graph input must be given) and moved to the
  // model's device; the result maps every graph output name to its value.
  std::map<std::string, Array> forward(const std::map<std::string, Array>& inputs);
  // Positional form: inputs and outputs in the graph's order.
  std::vector<Array> forward(const std::vector<Array>& inputs);

  // Moves parameters, buffers and later inputs to `device`.
  Model& to(Device device);
  using nn::Module::to;  // to(DType) casts the floating parameters and constants
  Device device() const { return device_; }

  const Graph& graph() const { return graph_; }
  // The value of an initializer or folded constant by its ONNX name (undefined if none).
  Array initializer(const std::string& name) const;

  // The dtype of the floating parameters (f64 after to(DType::F64)); none without any. A floating
  // graph input may be given in this dtype instead of the declared one.
  std::optional<DType> floating_parameter_dtype() const;
  // Internal: used by the loader.
  Graph graph_;
  std::map<std::string, nn::ParamRef> initializers_;  // floating: parameters; others: buffers
  std::vector<std::string> initializer_order_;        // for visit()

 private:
  Device device_ = Device::cpu();
};

struct LoadOptions {
  // Folder that external-data locations are relative to (load(path) sets the model's folder).
  std::string base_dir{};
  // Refuse files (and external data) larger than this.
  uint64_t max_bytes = uint64_t(4) << 30;
  // false: load a model with unsupported operators anyway (they are left unfolded and fail at
  // forward), so that tools such as `ember onnx-check` can list them.
  bool check_support = true;
};

Model load(const std::string& path, LoadOptions opts = {});
Model load_from_memory(const std::string& bytes, LoadOptions opts = {});

// A serialized TensorProto (the conformance corpus' input_*.pb / output_*.pb) as an Array.
Array load_tensor(const std::string& path);
Array tensor_from_memory(const std::string& bytes, const std::string& what = "tensor");
// The TensorProto serialization of a value (for `ember onnx-run --output-dir`).
std::string tensor_to_bytes(const Array& value, const std::string& name);

// Operator support, for `ember onnx-check` and the loader's errors.
bool is_supported(const std::string& op_type, const std::string& domain, int64_t opset);
std::vector<std::string> supported_ops();

}  // namespace ember::onnx
