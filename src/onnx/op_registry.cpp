// The operator table and OpContext: typed attribute access and errors that name the node.
#include "onnx/op_registry.h"

#include "ember/capture.h"

#include <algorithm>

namespace ember::onnx::detail {

std::map<std::string, OpEntry>& op_table() {
  static std::map<std::string, OpEntry> table;
  return table;
}

Registrar::Registrar(std::initializer_list<std::pair<const char*, OpEntry>> entries) {
  for (const auto& [name, entry] : entries) op_table()[name] = entry;
}

std::string OpContext::where() const {
  // Appended piece by piece: g++ 12's -Wrestrict misfires on "#" + std::to_string(...).
  std::string s = "onnx: node ";
  if (node_.name.empty()) s.append("#").append(std::to_string(index_));
  else s.append("'").append(node_.name).append("'");
  s.append(" (").append(node_.op_type).append(", opset ").append(std::to_string(opset)).append(")");
  return s;
}

void OpContext::fail(const std::string& message) const { throw Error(where() + ": " + message); }
void OpContext::unsupported(const std::string& message) const { throw Unsupported(where() + ": " + message); }

const Array& OpContext::input(int i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is required but not given");
  return inputs_[size_t(i)];
}

std::vector<int64_t> OpContext::ints_input(int i) const {
  const Array& a = input(i);
  if (!is_integral(a.dtype())) fail("input " + std::to_string(i) + " must be an integer tensor, got " +
                                    std::string(dtype_name(a.dtype())));
  if (is_static_value(a)) {
    SignatureOnlyScope shape_arithmetic;
    return a.to_vector<int64_t>();
  }
  return a.to_vector<int64_t>();
}

std::vector<double> OpContext::floats_input(int i) const {
  const Array& a = input(i);
  if (is_static_value(a)) {
    SignatureOnlyScope shape_arithmetic;
    return a.to_vector<double>();
  }
  return a.to_vector<double>();
}

const Attribute* OpContext::attr(const std::string& name) const {
  auto it = node_.attributes.find(name);
  return it == node_.attributes.end() ? nullptr : &it->second;
}

int64_t OpContext::attr_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = attr(name);
  if (!a) return fallback;
  if (a->kind != Attribute::Kind::Int) fail("attribute '" + name + "' must be an int");
  return a->i;
}

double OpContext::attr_float(const std::string& name, double fallback) const {
  const Attribute* a = attr(name);
  if (!a) return fallback;
  if (a->kind == Attribute::Kind::Int) return double(a->i);
  if (a->kind != Attribute::Kind::Float) fail("attribute '" + name + "' must be a float");
  return a->f;
}

std::string OpContext::attr_string(const std::string& name, const std::string& fallback) const {
  const Attribute* a = attr(name);
  if (!a) return fallback;
  if (a->kind != Attribute::Kind::String) fail("attribute '" + name + "' must be a string");
  return a->s;
}

std::vector<int64_t> OpContext::attr_ints(const std::string& name) const {
  const Attribute* a = attr(name);
  if (!a) return {};
  if (a->kind == Attribute::Kind::Int) return {a->i};
  if (a->kind != Attribute::Kind::Ints) fail("attribute '" + name + "' must be a list of ints");
  return a->ints;
}

std::vector<double> OpContext::attr_floats(const std::string& name) const {
  const Attribute* a = attr(name);
  if (!a) return {};
  if (a->kind != Attribute::Kind::Floats) fail("attribute '" + name + "' must be a list of floats");
  return a->floats;
}

int OpContext::axis(int64_t axis, int rank) const {
  if (axis < -rank || axis >= std::max(rank, 1))
    fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return int(axis < 0 ? axis + rank : axis);
}

Array scalar_like(double value, DType dtype, Device device) {
  return full(Shape{}, value, TensorOptions{.dtype = dtype, .device = device});
}

Shape broadcast_all(const std::vector<Array>& xs, const char* op) {
  Shape s = xs.at(0).shape();
  for (size_t i = 1; i < xs.size(); ++i) s = broadcast_shapes(s, xs[i].shape(), op);
  return s;
}

}  // namespace ember::onnx::detail

namespace ember::onnx {

bool is_supported(const std::string& op_type, const std::string& domain, int64_t opset) {
  if (!domain.empty() && domain != "ai.onnx") return false;
  auto it = detail::op_table().find(op_type);
  return it != detail::op_table().end() && opset >= it->second.min_opset;
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> names;
  for (const auto& [name, entry] : detail::op_table()) names.push_back(name);
  return names;
}

}  // namespace ember::onnx
