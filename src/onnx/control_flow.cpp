// ONNX control flow: Loop. The body subgraph runs once per iteration with the enclosing graph's
// values in scope (by name, as ONNX scoping says), its own initializers, the iteration number,
// the condition and the loop-carried values; the body's scan outputs are stacked along a new
// first axis. The trip count and the condition are read on the host each iteration, so a Loop
// is unrolled into the lazy graph as it runs (differentiable like any other Ember ops).
#include <string>
#include <vector>

#include "onnx/op_registry.h"

namespace ember::onnx::detail {

namespace {

// A hostile or buggy model could loop forever (no trip count, a condition that stays true).
constexpr int64_t kMaxIterations = int64_t(1) << 24;

std::vector<Array> op_loop_outside_executor(const OpContext& c) {
  c.fail("Loop runs in the graph executor (run_nodes), not as a plain operator");
}

const Registrar registrar({{"Loop", {op_loop_outside_executor, 1}}});

bool read_condition(const Array& v, const OpContext& c, const char* what) {
  if (v.numel() != 1) c.fail(std::string(what) + " must hold one value, got shape " + v.shape().str());
  return cast(v, DType::Bool).to_vector<bool>()[0];
}

}  // namespace

std::vector<Array> run_loop(const Node& n, int index, const std::map<std::string, Array>& env, int64_t opset,
                            Device device) {
  std::vector<Array> ins;
  for (const auto& in : n.inputs) ins.push_back(in.empty() ? Array() : env.at(in));
  OpContext c(n, index, opset, device, ins);
  const Attribute* body_attr = c.attr("body");
  if (!body_attr || !body_attr->graph) c.fail("needs a 'body' graph attribute");
  const Graph& body = *body_attr->graph;
  const size_t n_carried = ins.size() >= 2 ? ins.size() - 2 : 0;
  if (body.inputs.size() != n_carried + 2)
    c.fail("the body has " + std::to_string(body.inputs.size()) + " inputs; expected " + std::to_string(n_carried + 2) +
           " (iteration number, condition and " + std::to_string(n_carried) + " loop-carried values)");
  if (body.outputs.size() < n_carried + 1)
    c.fail("the body has " + std::to_string(body.outputs.size()) + " outputs; expected at least " +
           std::to_string(n_carried + 1) + " (condition and the loop-carried values)");
  const size_t n_scan = body.outputs.size() - 1 - n_carried;
  if (n.outputs.size() > n_carried + n_scan)
    c.fail("has " + std::to_string(n.outputs.size()) + " outputs; the body gives " + std::to_string(n_carried + n_scan));

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
  bool cond = has_cond ? read_condition(ins[1], c, "cond") : true;

  std::vector<Array> carried(ins.begin() + 2, ins.end());
  std::vector<std::vector<Array>> scans(n_scan);
  int64_t i = 0;
  for (; i < trips && cond; ++i) {
    if (!has_trip && i == kMaxIterations)
      c.fail("ran " + std::to_string(kMaxIterations) + " iterations without its condition turning false");
    std::map<std::string, Array> scope = env;
    for (const auto& [name, value] : body.constants) scope[name] = value.device() == device ? value : to_device(value, device);
    scope[body.inputs[0].name] = from_vector(std::vector<int64_t>{i}, Shape{}, device);
    scope[body.inputs[1].name] = from_vector(std::vector<bool>{cond}, Shape{}, device);
    for (size_t k = 0; k < n_carried; ++k) scope[body.inputs[k + 2].name] = carried[k];
    run_nodes(body, scope, opset, device);
    auto value = [&](size_t k) {
      auto it = scope.find(body.outputs[k].name);
      if (it == scope.end()) c.fail("body output '" + body.outputs[k].name + "' is not produced");
      return it->second;
    };
    cond = read_condition(value(0), c, "the body's condition output");
    for (size_t k = 0; k < n_carried; ++k) carried[k] = value(k + 1);
    for (size_t k = 0; k < n_scan; ++k) scans[k].push_back(unsqueeze(value(1 + n_carried + k), 0));
  }
  std::vector<Array> outs = carried;
  for (size_t k = 0; k < n_scan; ++k) {
    if (scans[k].empty()) c.unsupported("scan outputs of a loop that ran no iteration (their shape is unknown)");
    outs.push_back(cat(scans[k], 0));
  }
  return outs;
}

}  // namespace ember::onnx::detail
