// Helpers for the nn/optim/io tests: the deterministic inputs of tools/reference/nn_reference.py
// (element i = sin(a * i + b)) and the reference values it wrote with PyTorch.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "test_util.h"

namespace ember::testing {

inline Device nn_device() { return Device::cpu().available() ? Device::cpu() : Device::reference(); }

// The tests' source folder (an absolute path set by tests/CMakeLists.txt; __FILE__ can be
// relative when the compiler is invoked with relative paths).
inline std::string tests_dir() { return EMBER_TEST_SOURCE_DIR; }

inline Array det(const Shape& shape, double a, double b, DType dtype = DType::F64) {
  std::vector<double> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i) + b);
  return cast(from_vector(v, shape, nn_device()), dtype);
}

// name -> values, from a "name v1 v2 ..." file ('#' lines are comments).
inline std::map<std::string, std::vector<double>> read_reference(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open reference file " + path);
  std::map<std::string, std::vector<double>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string name;
    ss >> name;
    std::vector<double> v;
    std::string tok;
    while (ss >> tok) v.push_back(std::stod(tok));
    out[name] = v;
  }
  return out;
}

inline const std::map<std::string, std::vector<double>>& nn_reference() {
  static auto ref = read_reference(tests_dir() + "/nn/data/nn_reference.txt");
  return ref;
}

inline const std::vector<double>& expected(const std::string& name) {
  auto it = nn_reference().find(name);
  if (it == nn_reference().end()) throw std::runtime_error("no reference value " + name);
  return it->second;
}

// Output weighting of the reference script: loss = sum(y * det(y.shape, 0.29, 0.4)).
inline Array weighted_sum(const Array& y) { return sum(mul(y, det(y.shape(), 0.29, 0.4, y.dtype()))); }

}  // namespace ember::testing
