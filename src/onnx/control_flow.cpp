// ONNX control flow: If, Loop and Scan. A subgraph runs with the enclosing graph's values in
// scope (by name, as ONNX scoping says) plus its own initializers and the inputs the operator
// binds (Loop: the iteration number, the condition and the loop-carried values; Scan: the state
// and one slice of each scan input). Conditions and trip counts are read on the host, so control
// flow is unrolled into the lazy graph as it runs: the result is differentiable like any other
// Ember ops, and a branch or iteration that does not run costs nothing.
#include <algorithm>
#include <string>
#include <vector>

#include "onnx/op_registry.h"

namespace ember::onnx::detail {

namespace {

// A hostile or buggy model could loop forever (no trip count, a condition that stays true).
constexpr int64_t kMaxIterations = int64_t(1) << 24;

std::vector<Array> op_outside_executor(const OpContext& c) {
  c.fail(c.node().op_type + " runs in the graph executor (run_nodes), not as a plain operator");
}

// If from opset 1, Loop from 1, Scan from 9 (opset 8's Scan had a batch axis; not supported).
const Registrar registrar({{"If", {op_outside_executor, 1}},
                           {"Loop", {op_outside_executor, 1}},
                           {"Scan", {op_outside_executor, 9}}});

bool read_condition(const Array& v, const OpContext& c, const std::string& what) {
  if (v.numel() != 1) c.fail(what + " must hold one value, got shape " + v.shape().str());
  return cast(v, DType::Bool).to_vector<bool>()[0];
}

const Graph& graph_attr(const OpContext& c, const char* name) {
  const Attribute* a = c.attr(name);
  if (!a || !a->graph) c.fail(std::string("needs a '") + name + "' graph attribute");
  return *a->graph;
}

// Runs `body` with `bound` (its first inputs, in order) over the enclosing scope and returns
// all of its outputs.
std::vector<Array> run_body(const Graph& body, const std::vector<Array>& bound, const std::map<std::string, Array>& env,
                            const OpContext& c) {
  std::map<std::string, Array> scope = env;
  for (const auto& [name, value] : body.constants)
    scope[name] = value.device() == c.device ? value : to_device(value, c.device);
  for (size_t k = 0; k < bound.size(); ++k) scope[body.inputs[k].name] = bound[k];
  run_nodes(body, scope, c.opset, c.device);
  std::vector<Array> outs;
  for (const auto& o : body.outputs) {
    auto it = scope.find(o.name);
    if (it == scope.end()) c.fail("subgraph '" + body.name + "' output '" + o.name + "' is not produced");
    outs.push_back(it->second);
  }
  return outs;
}

std::vector<Array> run_if(const OpContext& c, const std::map<std::string, Array>& env) {
  const bool cond = read_condition(c.input(0), c, "cond");
  const char* which = cond ? "then_branch" : "else_branch";
  const Graph& branch = graph_attr(c, which);
  if (!branch.inputs.empty())
    c.fail(std::string(which) + " has " + std::to_string(branch.inputs.size()) + " inputs; an If branch takes none");
  if (branch.outputs.size() < c.node().outputs.size())
    c.fail(std::string(which) + " has " + std::to_string(branch.outputs.size()) + " outputs; the node has " +
           std::to_string(c.node().outputs.size()));
  return run_body(branch, {}, env, c);
}

std::vector<Array> run_loop(const OpContext& c, const std::map<std::string, Array>& env) {
  const Graph& body = graph_attr(c, "body");
  const size_t n_carried = c.num_inputs() >= 2 ? size_t(c.num_inputs() - 2) : 0;
  if (body.inputs.size() != n_carried + 2)
    c.fail("the body has " + std::to_string(body.inputs.size()) + " inputs; expected " + std::to_string(n_carried + 2) +
           " (iteration number, condition and " + std::to_string(n_carried) + " loop-carried values)");
  if (body.outputs.size() < n_carried + 1)
    c.fail("the body has " + std::to_string(body.outputs.size()) + " outputs; expected at least " +
           std::to_string(n_carried + 1) + " (condition and the loop-carried values)");
  const size_t n_scan = body.outputs.size() - 1 - n_carried;
  if (c.node().outputs.size() > n_carried + n_scan)
    c.fail("has " + std::to_string(c.node().outputs.size()) + " outputs; the body gives " +
           std::to_string(n_carried + n_scan));

  const bool has_trip = c.has_input(0), has_cond = c.has_input(1);
  int64_t trips = kMaxIterations;
  if (has_trip) {
    std::vector<int64_t> m = c.ints_input(0);
    if (m.size() != 1) c.fail("M (the trip count) must hold one value");
    trips = m[0];
    if (trips > kMaxIterations)
      c.unsupported("a trip count of " + std::to_string(trips) + " (above " + std::to_string(kMaxIterations) + ")");
  }
  if (!has_trip && !has_cond) c.fail("has neither a trip count nor a condition: it would never end");
  bool cond = has_cond ? read_condition(c.input(1), c, "cond") : true;

  std::vector<Array> carried;
  for (size_t k = 0; k < n_carried; ++k) carried.push_back(c.input(int(k) + 2));
  std::vector<std::vector<Array>> scans(n_scan);
  for (int64_t i = 0; i < trips && cond; ++i) {
    if (!has_trip && i == kMaxIterations)
      c.fail("ran " + std::to_string(kMaxIterations) + " iterations without its condition turning false");
    std::vector<Array> bound = {from_vector(std::vector<int64_t>{i}, Shape{}, c.device),
                                from_vector(std::vector<bool>{cond}, Shape{}, c.device)};
    bound.insert(bound.end(), carried.begin(), carried.end());
    std::vector<Array> outs = run_body(body, bound, env, c);
    cond = read_condition(outs[0], c, "the body's condition output");
    for (size_t k = 0; k < n_carried; ++k) carried[k] = outs[k + 1];
    for (size_t k = 0; k < n_scan; ++k) scans[k].push_back(outs[1 + n_carried + k]);
  }
  std::vector<Array> outs = carried;
  for (size_t k = 0; k < n_scan; ++k) {
    if (scans[k].empty()) c.unsupported("scan outputs of a loop that ran no iteration (their shape is unknown)");
    outs.push_back(stack(scans[k], 0));
  }
  return outs;
}

// A per-input list attribute (axes or directions): `count` values, 0 where absent.
std::vector<int64_t> per_value_attr(const OpContext& c, const char* name, size_t count) {
  std::vector<int64_t> v = c.attr_ints(name);
  if (v.empty()) return std::vector<int64_t>(count, 0);
  if (v.size() != count)
    c.fail(std::string("attribute '") + name + "' has " + std::to_string(v.size()) + " values; expected " +
           std::to_string(count));
  return v;
}

void check_directions(const OpContext& c, const std::vector<int64_t>& dirs, const char* name) {
  for (int64_t d : dirs)
    if (d != 0 && d != 1)
      c.fail(std::string("attribute '") + name + "' holds " + std::to_string(d) + " (0 forward or 1 reverse only)");
}

std::vector<Array> run_scan(const OpContext& c, const std::map<std::string, Array>& env) {
  const Graph& body = graph_attr(c, "body");
  if (!c.has_attr("num_scan_inputs")) c.fail("needs the 'num_scan_inputs' attribute");
  const int64_t m = c.attr_int("num_scan_inputs", 0);
  if (m < 1 || m > c.num_inputs())
    c.fail("num_scan_inputs is " + std::to_string(m) + " with " + std::to_string(c.num_inputs()) + " inputs");
  const size_t n_scan_in = size_t(m), n_state = size_t(c.num_inputs()) - n_scan_in;
  if (body.inputs.size() != n_state + n_scan_in)
    c.fail("the body has " + std::to_string(body.inputs.size()) + " inputs; expected " +
           std::to_string(n_state + n_scan_in) + " (" + std::to_string(n_state) + " state values and " +
           std::to_string(n_scan_in) + " scan slices)");
  if (body.outputs.size() < n_state)
    c.fail("the body has " + std::to_string(body.outputs.size()) + " outputs; expected at least " +
           std::to_string(n_state) + " (the state values)");
  const size_t n_scan_out = body.outputs.size() - n_state;
  if (c.node().outputs.size() > n_state + n_scan_out)
    c.fail("has " + std::to_string(c.node().outputs.size()) + " outputs; the body gives " +
           std::to_string(n_state + n_scan_out));

  const std::vector<int64_t> in_axes = per_value_attr(c, "scan_input_axes", n_scan_in);
  const std::vector<int64_t> in_dirs = per_value_attr(c, "scan_input_directions", n_scan_in);
  const std::vector<int64_t> out_axes = per_value_attr(c, "scan_output_axes", n_scan_out);
  const std::vector<int64_t> out_dirs = per_value_attr(c, "scan_output_directions", n_scan_out);
  check_directions(c, in_dirs, "scan_input_directions");
  check_directions(c, out_dirs, "scan_output_directions");

  std::vector<Array> scan_in;
  std::vector<int> axis_of;
  int64_t length = -1;
  for (size_t k = 0; k < n_scan_in; ++k) {
    const Array& x = c.input(int(n_state + k));
    if (x.rank() == 0) c.fail("scan input " + std::to_string(k) + " is a scalar; it needs an axis to scan over");
    const int axis = c.axis(in_axes[k], x.rank());
    if (length >= 0 && x.shape()[size_t(axis)] != length)
      c.fail("scan input " + std::to_string(k) + " has " + std::to_string(x.shape()[size_t(axis)]) +
             " steps along axis " + std::to_string(axis) + "; the first has " + std::to_string(length));
    length = x.shape()[size_t(axis)];
    scan_in.push_back(x);
    axis_of.push_back(axis);
  }
  if (length == 0 && n_scan_out > 0) c.unsupported("scan outputs of a scan over 0 steps (their shape is unknown)");

  std::vector<Array> state;
  for (size_t k = 0; k < n_state; ++k) state.push_back(c.input(int(k)));
  std::vector<std::vector<Array>> scans(n_scan_out);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Array> bound = state;
    for (size_t k = 0; k < n_scan_in; ++k)
      bound.push_back(select(scan_in[k], axis_of[k], in_dirs[k] ? length - 1 - t : t));
    std::vector<Array> outs = run_body(body, bound, env, c);
    for (size_t k = 0; k < n_state; ++k) state[k] = outs[k];
    for (size_t k = 0; k < n_scan_out; ++k) scans[k].push_back(outs[n_state + k]);
  }
  std::vector<Array> outs = state;
  for (size_t k = 0; k < n_scan_out; ++k) {
    if (out_dirs[k]) std::reverse(scans[k].begin(), scans[k].end());
    outs.push_back(stack(scans[k], c.axis(out_axes[k], scans[k][0].rank() + 1)));
  }
  return outs;
}

}  // namespace

bool is_control_flow(const std::string& op_type) { return op_type == "If" || op_type == "Loop" || op_type == "Scan"; }

std::vector<Array> run_control_flow(const Node& n, int index, const std::map<std::string, Array>& env, int64_t opset,
                                    Device device) {
  std::vector<Array> ins;
  for (const auto& in : n.inputs) ins.push_back(in.empty() ? Array() : env.at(in));
  OpContext c(n, index, opset, device, ins);
  if (n.op_type == "If") return run_if(c, env);
  if (n.op_type == "Loop") return run_loop(c, env);
  return run_scan(c, env);
}

}  // namespace ember::onnx::detail
