// graph_text and graph_json (ember/debug.h): the pending graph behind some arrays, one entry per
// node with its op, operands, dtype, shape, typed attributes (op_table/op_attrs.h) and the user's line.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <unordered_map>

#include "ember/debug.h"
#include "graph/node.h"

namespace ember {

namespace {

std::string scalar_attrs(const Node& n) {
  switch (n.op) {
    case Op::Full:
      return is_floating(n.dtype) ? fmt::format("value {}", n.attrs.value.f) : fmt::format("value {}", n.attrs.value.i);
    case Op::Cast: return fmt::format("to {}", dtype_name(n.attrs.dtype));
    default: return "";
  }
}

// The nodes behind `outputs` in an order they can run (inputs first), numbered by position.
struct Ordered {
  std::unordered_map<const Node*, int> number;
  std::vector<const Node*> order;
};
Ordered ordered(const std::vector<Array>& outputs) {
  Ordered r;
  auto& number = r.number;
  auto& order = r.order;
  // Depth-first post-order without recursion (graphs can be deep).
  for (const Array& out : outputs) {
    if (!out.defined()) continue;
    std::vector<std::pair<const Node*, size_t>> stack{{out.node().get(), 0}};
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (number.count(n)) {
        stack.pop_back();
        continue;
      }
      // A realized node has dropped its inputs: it is a value here.
      const bool pending = !n->is_ready();
      if (pending && next < n->inputs.size()) {
        const Node* in = n->inputs[next++].get();
        if (!number.count(in)) stack.push_back({in, 0});
        continue;
      }
      number[n] = int(order.size());
      order.push_back(n);
      stack.pop_back();
    }
  }
  return r;
}

}  // namespace

std::string graph_text(const std::vector<Array>& outputs) {
  auto [number, order] = ordered(outputs);
  std::string text;
  for (const Node* n : order) {
    std::string line = fmt::format("%{} = ", number[n]);
    if (n->is_ready()) {
      line += "value";
    } else {
      line += op_name(n->op);
      line += "(";
      for (size_t i = 0; i < n->inputs.size(); ++i) line += fmt::format("{}%{}", i ? ", " : "", number[n->inputs[i].get()]);
      line += ")";
    }
    line += fmt::format(" {}{}", dtype_name(n->dtype), n->shape.str());
    if (n->device != Device::cpu()) line += " on " + n->device.str();
    std::string attrs = n->is_ready() ? "" : describe(n->attrs.params);
    const std::string scalars = n->is_ready() ? "" : scalar_attrs(*n);
    if (!scalars.empty()) attrs += (attrs.empty() ? "" : ", ") + scalars;
    if (!attrs.empty()) line += " {" + attrs + "}";
    line += "  # " + format_location(n->loc) + "\n";
    text += line;
  }
  return text;
}

std::string graph_json(const std::vector<Array>& outputs) {
  using json = nlohmann::json;
  auto [number, order] = ordered(outputs);
  json nodes = json::array();
  for (const Node* n : order) {
    json e{{"id", number[n]},
           {"op", n->is_ready() ? "value" : op_name(n->op)},
           {"dtype", std::string(dtype_name(n->dtype))},
           {"shape", n->shape.dims()},
           {"device", n->device.str()},
           {"loc", format_location(n->loc)}};
    if (!n->is_ready()) {
      json inputs = json::array();
      for (const NodePtr& in : n->inputs) inputs.push_back(number[in.get()]);
      e["inputs"] = inputs;
      e["attrs"] = json::parse(params_json(n->attrs.params));
      const std::string scalars = scalar_attrs(*n);
      if (!scalars.empty()) e["scalars"] = scalars;
    }
    nodes.push_back(std::move(e));
  }
  json outs = json::array();
  for (const Array& out : outputs)
    if (out.defined()) outs.push_back(number[out.node().get()]);
  return json{{"nodes", nodes}, {"outputs", outs}}.dump();
}

}  // namespace ember
