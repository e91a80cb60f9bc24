// The ONNX loader (ModelProto -> onnx::Model) and the graph interpreter behind Model::forward.
// Load: parse, convert attributes and initializers, check that every node input is defined
// (ordering the nodes topologically, rejecting cycles), check that every operator is supported,
// then fold the nodes whose inputs are all constants (Constant, ConstantOfShape of a constant
// shape, ...) into buffers. Forward: run the remaining nodes in order on Ember arrays.
#include <algorithm>
#include <filesystem>
#include <set>
#include <unordered_set>

#include "ember/ops.h"
#include "io/read_file.h"
#include "onnx/op_registry.h"
#include "onnx/proto.h"

namespace ember::onnx {

int64_t Graph::opset() const {
  for (const char* d : {"", "ai.onnx"}) {
    auto it = opsets.find(d);
    if (it != opsets.end()) return it->second;
  }
  return 1;
}

namespace {

std::string node_label(const Node& n, size_t index) {
  std::string s = "node ";
  if (n.name.empty()) s.append("#").append(std::to_string(index));
  else s.append("'").append(n.name).append("'");
  return s.append(" (").append(n.op_type).append(")");
}

std::shared_ptr<Graph> convert_subgraph(const ::onnx::GraphProto& gp, const std::string& what, const LoadOptions& opts,
                                        int depth);

Attribute convert_attribute(const ::onnx::AttributeProto& a, const std::string& what, const LoadOptions& opts,
                            int depth) {
  Attribute out;
  using P = ::onnx::AttributeProto;
  switch (a.type()) {
    case P::FLOAT: out.kind = Attribute::Kind::Float; out.f = a.f(); break;
    case P::INT: out.kind = Attribute::Kind::Int; out.i = a.i(); break;
    case P::STRING: out.kind = Attribute::Kind::String; out.s = a.s(); break;
    case P::TENSOR:
      out.kind = Attribute::Kind::Tensor;
      out.t = detail::tensor_to_array(a.t(), what, opts);
      break;
    case P::FLOATS: out.kind = Attribute::Kind::Floats; out.floats.assign(a.floats().begin(), a.floats().end()); break;
    case P::INTS: out.kind = Attribute::Kind::Ints; out.ints.assign(a.ints().begin(), a.ints().end()); break;
    case P::STRINGS: out.kind = Attribute::Kind::Strings; out.strings.assign(a.strings().begin(), a.strings().end()); break;
    case P::GRAPH:
      out.kind = Attribute::Kind::Graph;
      out.graph = convert_subgraph(a.g(), what, opts, depth + 1);
      break;
    case P::GRAPHS: out.kind = Attribute::Kind::Graph; break;
    default: out.kind = Attribute::Kind::Other; break;
  }
  return out;
}

ValueInfo convert_value_info(const ::onnx::ValueInfoProto& v) {
  ValueInfo out;
  out.name = v.name();
  if (!v.type().has_tensor_type()) {
    out.is_tensor = v.type().value_case() == ::onnx::TypeProto::VALUE_NOT_SET;
    return out;
  }
  const auto& tt = v.type().tensor_type();
  out.data_type = tt.elem_type();
  if (tt.has_shape()) {
    out.has_shape = true;
    for (const auto& d : tt.shape().dim()) out.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
  }
  return out;
}

// The values a node reads: its inputs and its subgraphs' captures.
std::vector<std::string> dependencies(const Node& n) {
  std::vector<std::string> d = n.inputs;
  d.insert(d.end(), n.captures.begin(), n.captures.end());
  return d;
}

// Orders nodes so that each comes after the producers of its inputs (ONNX files are usually in
// order already; this keeps that order when they are). Throws on a cycle or an undefined input.
std::vector<Node> topological_order(std::vector<Node> nodes, const std::set<std::string>& available_at_start) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) {
        if (available_at_start.count(o) || producer.count(o))
          throw Error("onnx::load: " + node_label(nodes[i], i) + " writes '" + o +
                      "', which is already defined (each value must have one producer)");
        producer[o] = i;
      }
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& in : dependencies(nodes[i]))
      if (!in.empty() && !available_at_start.count(in) && !producer.count(in))
        throw Error("onnx::load: " + node_label(nodes[i], i) + " reads '" + in +
                    "', which is neither a graph input, an initializer nor a node output");
  // Kahn's algorithm, always taking the earliest ready node.
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> users(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& in : dependencies(nodes[i])) {
      auto it = in.empty() ? producer.end() : producer.find(in);
      if (it != producer.end()) {
        ++pending[i];
        users[it->second].push_back(i);
      }
    }
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.insert(i);
  std::vector<Node> out;
  out.reserve(nodes.size());
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    for (size_t u : users[i])
      if (--pending[u] == 0) ready.insert(u);
    out.push_back(std::move(nodes[i]));
  }
  if (out.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (pending[i] > 0)
        throw Error("onnx::load: the graph has a cycle through " + node_label(nodes[i], i));
  }
  return out;
}

// Ops whose result is not a function of their inputs alone are never folded.
bool foldable(const Node& n) {
  static const std::set<std::string> kNever = {"Dropout", "RandomNormal", "RandomUniform", "RandomNormalLike",
                                               "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (const auto& [name, a] : n.attributes)
    if (a.kind == Attribute::Kind::Graph) return false;  // control flow (its body may read anything)
  return !kNever.count(n.op_type);
}

}  // namespace

std::vector<Array> detail::run_node(const Node& n, int index, int64_t opset, Device device, std::vector<Array> inputs) {
  detail::OpContext ctx(n, index, opset, device, std::move(inputs));
  auto it = detail::op_table().find(n.op_type);
  if (it == detail::op_table().end()) ctx.unsupported("operator " + n.op_type + " is not supported");
  std::vector<Array> outs = it->second.fn(ctx);
  for (size_t k = 0; k < n.outputs.size(); ++k)
    if (!n.outputs[k].empty() && (k >= outs.size() || !outs[k].defined()))
      ctx.unsupported("output " + std::to_string(k) + " ('" + n.outputs[k] + "') is not supported");
  // Shapes are known before anything is computed: a hostile ConstantOfShape / Expand / Tile /
  // Range asking for an absurd size is refused here instead of failing to allocate.
  constexpr uint64_t kMaxValueBytes = uint64_t(16) << 30;
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].defined() && uint64_t(outs[k].numel()) * dtype_size(outs[k].dtype()) > kMaxValueBytes)
      ctx.fail("output " + std::to_string(k) + " would have shape " + outs[k].shape().str() + " (" +
               std::to_string(uint64_t(outs[k].numel()) * dtype_size(outs[k].dtype())) + " bytes, above the 16 GiB limit)");
  return outs;
}

namespace {

// The static values of the forward running on this thread (detail::is_static_value). The arrays
// are held, so that no other node can take a recorded node's address meanwhile.
struct StaticValues {
  std::vector<Array> held;
  std::unordered_set<const void*> nodes;
  void add(const Array& a) {
    if (!a.defined() || !nodes.insert(a.node().get()).second) return;
    held.push_back(a);
  }
};
thread_local StaticValues* t_static = nullptr;

}  // namespace

bool detail::is_static_value(const Array& a) { return t_static && a.defined() && t_static->nodes.count(a.node().get()); }

void detail::run_nodes(const Graph& g, std::map<std::string, Array>& env, int64_t opset, Device device) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<Array> outs;
    bool is_static = false;
    if (is_control_flow(n.op_type)) {
      outs = run_control_flow(n, int(i), env, opset, device);
    } else {
      std::vector<Array> ins;
      for (const auto& in : n.inputs) ins.push_back(in.empty() ? Array() : env.at(in));
      // Static: shapes, and deterministic ops of static values only.
      is_static = n.op_type == "Shape" || n.op_type == "Size";
      if (!is_static && foldable(n)) {
        bool any = false, all = true;
        for (const Array& a : ins)
          if (a.defined()) {
            any = true;
            all = all && is_static_value(a);
          }
        is_static = any && all;
      }
      outs = run_node(n, int(i), opset, device, std::move(ins));
    }
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) {
        env[n.outputs[k]] = outs[k];
        if (is_static && t_static) t_static->add(outs[k]);
      }
  }
}

namespace {

// A NodeProto with its attributes; a subgraph's free variables become the node's captures.
Node convert_node(const ::onnx::NodeProto& np, size_t index, const LoadOptions& opts, int depth) {
  Node n;
  n.name = np.name();
  n.op_type = np.op_type();
  n.domain = np.domain();
  n.inputs.assign(np.input().begin(), np.input().end());
  n.outputs.assign(np.output().begin(), np.output().end());
  for (const auto& a : np.attribute())
    n.attributes[a.name()] =
        convert_attribute(a, "onnx::load: " + node_label(n, index) + " attribute '" + a.name() + "'", opts, depth);
  std::set<std::string> captures;
  for (const auto& [name, a] : n.attributes) {
    if (!a.graph) continue;
    std::set<std::string> local;
    for (const auto& vi : a.graph->inputs) local.insert(vi.name);
    for (const auto& [c, v] : a.graph->constants) local.insert(c);
    for (const auto& sub : a.graph->nodes)
      for (const auto& o : sub.outputs) local.insert(o);
    for (const auto& sub : a.graph->nodes)
      for (const auto& in : dependencies(sub))
        if (!in.empty() && !local.count(in)) captures.insert(in);
    for (const auto& vi : a.graph->outputs)
      if (!local.count(vi.name)) captures.insert(vi.name);  // an output passed through from outside
  }
  n.captures.assign(captures.begin(), captures.end());
  return n;
}

// A subgraph (a Loop's or Scan's body, an If branch): its inputs, outputs, own initializers and
// nodes in order. Names it reads from the enclosing graphs are left to the caller (the node's captures).
std::shared_ptr<Graph> convert_subgraph(const ::onnx::GraphProto& gp, const std::string& what, const LoadOptions& opts,
                                        int depth) {
  if (depth > 16) throw Error(what + ": subgraphs nested more than 16 deep");
  auto g = std::make_shared<Graph>();
  g->name = gp.name();
  std::set<std::string> available;
  for (const auto& init : gp.initializer()) {
    g->constants[init.name()] = detail::tensor_to_array(init, what + ": initializer '" + init.name() + "'", opts);
    available.insert(init.name());
  }
  for (const auto& in : gp.input()) {
    g->inputs.push_back(convert_value_info(in));
    available.insert(in.name());
  }
  for (const auto& out : gp.output()) g->outputs.push_back(convert_value_info(out));
  std::vector<Node> nodes;
  for (int i = 0; i < gp.node_size(); ++i) nodes.push_back(convert_node(gp.node(i), size_t(i), opts, depth));
  std::set<std::string> produced;
  for (const auto& n : nodes)
    for (const auto& o : n.outputs) produced.insert(o);
  for (const auto& n : nodes)  // free variables: defined outside (checked where the node is)
    for (const auto& in : dependencies(n))
      if (!in.empty() && !produced.count(in)) available.insert(in);
  g->nodes = topological_order(std::move(nodes), available);
  return g;
}

// Unsupported operators anywhere in a graph, subgraphs included (the first one found).
void check_support(const Graph& g, int64_t opset, const std::string& where) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (!n.domain.empty() && n.domain != "ai.onnx")
      throw Unsupported("onnx: " + where + node_label(n, i) + ": domain '" + n.domain + "' is not supported (only ai.onnx)");
    if (!is_supported(n.op_type, n.domain, opset)) {
      auto it = detail::op_table().find(n.op_type);
      throw Unsupported("onnx: " + where + node_label(n, i) + ", opset " + std::to_string(opset) + ": operator " +
                        n.op_type +
                        (it == detail::op_table().end() ? " is not supported"
                                                        : " is supported from opset " +
                                                              std::to_string(it->second.min_opset) + " only"));
    }
    for (const auto& [name, a] : n.attributes)
      if (a.graph) check_support(*a.graph, opset, where + node_label(n, i) + " '" + name + "' > ");
  }
}

Model convert_model(const ::onnx::ModelProto& proto, const LoadOptions& opts) {
  Model m;
  Graph& g = m.graph_;
  g.ir_version = proto.ir_version();
  for (const auto& op : proto.opset_import()) g.opsets[op.domain()] = op.version();
  if (g.opsets.empty()) g.opsets[""] = 1;  // IR 1-2 files without opset_import
  const auto& gp = proto.graph();
  g.name = gp.name();

  std::set<std::string> defined;
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) throw Error("onnx::load: an initializer has no name");
    if (defined.count(init.name())) throw Error("onnx::load: initializer '" + init.name() + "' is given twice");
    Array value = detail::tensor_to_array(init, "onnx::load: initializer '" + init.name() + "'", opts);
    m.initializers_[init.name()] = is_floating(value.dtype()) ? nn::make_param(value) : nn::make_buffer(value);
    m.initializer_order_.push_back(init.name());
    defined.insert(init.name());
  }
  for (const auto& in : gp.input()) {
    if (m.initializers_.count(in.name())) continue;  // IR 3: initializers are listed as inputs too
    if (in.name().empty()) throw Error("onnx::load: a graph input has no name");
    if (defined.count(in.name())) throw Error("onnx::load: graph input '" + in.name() + "' is given twice");
    g.inputs.push_back(convert_value_info(in));
    defined.insert(in.name());
  }
  for (const auto& out : gp.output()) g.outputs.push_back(convert_value_info(out));

  std::vector<Node> nodes;
  for (int i = 0; i < gp.node_size(); ++i) nodes.push_back(convert_node(gp.node(i), size_t(i), opts, 0));
  g.nodes = topological_order(std::move(nodes), defined);

  const int64_t opset = g.opset();
  if (opts.check_support) check_support(g, opset, "");
  for (const auto& out : g.outputs) {
    bool produced = defined.count(out.name) != 0;
    for (const auto& n : g.nodes)
      produced = produced || std::find(n.outputs.begin(), n.outputs.end(), out.name) != n.outputs.end();
    if (!produced) throw Error("onnx::load: graph output '" + out.name + "' is not produced by any node");
  }

  // Fold: a node whose inputs are all constants (not parameters, not graph inputs) is run now.
  std::map<std::string, Array> constants;
  for (const auto& [name, ref] : m.initializers_)
    if (ref.is_buffer()) constants[name] = ref.array();
  std::vector<Node> remaining;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    bool all_const = foldable(n) && is_supported(n.op_type, n.domain, opset);
    for (const auto& in : n.inputs) all_const = all_const && (in.empty() || constants.count(in));
    if (!all_const) {
      remaining.push_back(std::move(n));
      continue;
    }
    std::vector<Array> ins;
    for (const auto& in : n.inputs) ins.push_back(in.empty() ? Array() : constants[in]);
    std::vector<Array> outs = detail::run_node(n, int(i), opset, Device::cpu(), std::move(ins));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      outs[k].eval();
      constants[n.outputs[k]] = outs[k];
      m.initializers_[n.outputs[k]] = nn::make_buffer(outs[k]);
      m.initializer_order_.push_back(n.outputs[k]);
    }
  }
  g.nodes = std::move(remaining);
  return m;
}

}  // namespace

void Model::visit(nn::Visitor& v) {
  for (const auto& name : initializer_order_) {
    nn::ParamRef& p = initializers_.at(name);
    if (p.is_buffer()) v.buffer(name, p);
    else v.param(name, p);
  }
}

Model& Model::to(Device device) {
  Module::to(device);
  device_ = device;
  return *this;
}

Array Model::initializer(const std::string& name) const {
  auto it = initializers_.find(name);
  return it == initializers_.end() ? Array() : it->second.array();
}

std::optional<DType> Model::floating_parameter_dtype() const {
  for (const auto& [name, ref] : initializers_)
    if (ref.trainable() || !ref.is_buffer())
      if (ref.array().defined() && is_floating(ref.array().dtype())) return ref.array().dtype();
  return std::nullopt;
}

std::map<std::string, Array> Model::forward(const std::map<std::string, Array>& inputs) {
  std::map<std::string, Array> env;
  for (const auto& [name, ref] : initializers_) env[name] = ref.array();
  // Constant buffers (integer initializers, folded constants) are static; parameters are not.
  StaticValues statics;
  StaticValues* outer = t_static;
  t_static = &statics;
  struct Restore {
    StaticValues* outer;
    ~Restore() { t_static = outer; }
  } restore{outer};
  for (const auto& [name, ref] : initializers_)
    if (ref.is_buffer()) statics.add(ref.array());
  for (const auto& vi : graph_.inputs) {
    auto it = inputs.find(vi.name);
    if (it == inputs.end() || !it->second.defined())
      throw Error("onnx::Model::forward: graph input '" + vi.name + "' is not given");
    Array x = it->second;
    if (vi.data_type != 0) {
      DType want = dtype_from_onnx(vi.data_type, "onnx::Model::forward: graph input '" + vi.name + "'");
      // After model.to(DType::F64) a floating input may come in the parameters' new dtype.
      bool cast_model = is_floating(want) && is_floating(x.dtype()) && x.dtype() == floating_parameter_dtype();
      if (x.dtype() != want && !cast_model)
        throw Error("onnx::Model::forward: graph input '" + vi.name + "' must be " + std::string(dtype_name(want)) +
                    ", got " + std::string(dtype_name(x.dtype())));
    }
    if (vi.has_shape) {
      bool ok = int(vi.dims.size()) == x.rank();
      for (int d = 0; ok && d < x.rank(); ++d) ok = vi.dims[size_t(d)] < 0 || vi.dims[size_t(d)] == x.shape()[d];
      if (!ok) {
        std::string dims;
        for (int64_t d : vi.dims) dims += (dims.empty() ? "" : ", ") + (d < 0 ? std::string("?") : std::to_string(d));
        throw Error("onnx::Model::forward: graph input '" + vi.name + "' must have shape [" + dims + "], got " +
                    x.shape().str());
      }
    }
    if (x.device() != device_) x = to_device(x, device_);
    env[vi.name] = x;
  }
  for (const auto& [name, value] : inputs)
    if (!env.count(name)) throw Error("onnx::Model::forward: '" + name + "' is not a graph input");
  detail::run_nodes(graph_, env, graph_.opset(), device_);
  std::map<std::string, Array> result;
  for (const auto& vi : graph_.outputs) result[vi.name] = env.at(vi.name);
  return result;
}

std::vector<Array> Model::forward(const std::vector<Array>& inputs) {
  if (inputs.size() != graph_.inputs.size())
    throw Error("onnx::Model::forward: the graph has " + std::to_string(graph_.inputs.size()) + " inputs, got " +
                std::to_string(inputs.size()));
  std::map<std::string, Array> named;
  for (size_t i = 0; i < inputs.size(); ++i) named[graph_.inputs[i].name] = inputs[i];
  std::map<std::string, Array> out = forward(named);
  std::vector<Array> result;
  for (const auto& vi : graph_.outputs) result.push_back(out.at(vi.name));
  return result;
}

Model load_from_memory(const std::string& bytes, LoadOptions opts) {
  if (bytes.size() > opts.max_bytes)
    throw Error("onnx::load: the model is " + std::to_string(bytes.size()) + " bytes, above the limit of " +
                std::to_string(opts.max_bytes));
  ::onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes))
    throw Error("onnx::load: not a valid ONNX model (the protobuf data is truncated or malformed; " +
                std::to_string(bytes.size()) + " bytes)");
  if (!proto.has_graph()) throw Error("onnx::load: the model has no graph");
  return convert_model(proto, opts);
}

Model load(const std::string& path, LoadOptions opts) {
  std::vector<uint8_t> bytes = io::detail::read_regular_file(path, "onnx::load", opts.max_bytes);
  if (opts.base_dir.empty()) opts.base_dir = std::filesystem::path(path).parent_path().string();
  if (opts.base_dir.empty()) opts.base_dir = ".";
  try {
    return load_from_memory(std::string(bytes.begin(), bytes.end()), opts);
  } catch (const Unsupported& e) {
    throw Unsupported(path + ": " + e.what());
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

}  // namespace ember::onnx
