// Helpers for the attention and transformer tests: the reference values of
// tools/reference/nn_attention_reference.py, PyTorch module parameters loaded by name through
// load_state_dict, and checks of outputs and of input and parameter gradients.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nn/nn_test_util.h"

namespace ember::testing {

inline const std::map<std::string, std::vector<double>>& attention_table() {
  static auto table = read_reference(tests_dir() + "/nn/data/nn_attention_reference.txt");
  return table;
}

inline const std::vector<double>& attention_ref(const std::string& name) {
  auto it = attention_table().find(name);
  if (it == attention_table().end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

inline bool has_attention_ref(const std::string& name) { return attention_table().count(name) > 0; }

// Loads the PyTorch parameters of case `prefix` (<prefix>.p.<name>, shaped by <prefix>.s.<name>)
// with a strict load_state_dict: every name and shape must be PyTorch's.
inline void load_torch_params(nn::Module& m, const std::string& prefix) {
  nn::StateDict sd;
  const std::string p = prefix + ".p.";
  for (const auto& [key, values] : attention_table()) {
    if (key.rfind(p, 0) != 0) continue;
    std::string name = key.substr(p.size());
    std::vector<int64_t> dims;
    for (double d : attention_ref(prefix + ".s." + name)) dims.push_back(int64_t(d));
    sd[name] = from_vector(values, Shape(dims), nn_device());
  }
  ASSERT_FALSE(sd.empty()) << prefix;
  m.load_state_dict(sd, true);
}

// loss = sum(y * det(y.shape, 0.29, 0.4)) [+ sum(w * det(w.shape, 0.31, 0.2))]; checks y, w, the
// gradients of `inputs` (<prefix>.d<i>) and of every parameter of `m` (<prefix>.g.<name>).
inline void check_module(const std::string& prefix, nn::Module& m, const Array& y, const Array& w,
                         const std::vector<Array>& inputs, double tol = 1e-9) {
  SCOPED_TRACE(prefix);
  Array loss = weighted_sum(y);
  if (w.defined()) loss = add(loss, sum(mul(w, det(w.shape(), 0.31, 0.2, w.dtype()))));
  Gradients g = loss.backward();
  EXPECT_TRUE(all_close(y, attention_ref(prefix + ".y"), tol, tol));
  EXPECT_EQ(w.defined(), has_attention_ref(prefix + ".w"));
  if (w.defined()) {
    EXPECT_TRUE(all_close(w, attention_ref(prefix + ".w"), tol, tol));
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(all_close(inputs[i].grad(g), attention_ref(prefix + ".d" + std::to_string(i)), tol, tol)) << "d" << i;
  size_t n = 0;
  for (auto& [name, p] : m.named_parameters()) {
    EXPECT_TRUE(all_close(p.array().grad(g), attention_ref(prefix + ".g." + name), tol, tol)) << name;
    ++n;
  }
  size_t torch_params = 0;
  for (const auto& [key, values] : attention_table()) {
    if (key.rfind(prefix + ".g.", 0) == 0) ++torch_params;
  }
  EXPECT_EQ(n, torch_params);
}

}  // namespace ember::testing
