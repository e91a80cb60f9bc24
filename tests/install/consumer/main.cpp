// A tiny program built against an installed Ember: checks the version, that the backend plugins
// load from the installed plugin folder, and computes a small model-like expression.
#include <ember/ember.h>

#include <cmath>
#include <cstdio>
#include <cstring>

using namespace ember;

int main() {
  if (std::strcmp(version(), EMBER_VERSION_STRING) != 0) {
    std::printf("version mismatch: header %s, library %s\n", EMBER_VERSION_STRING, version());
    return 1;
  }
  int found = 0;
  for (Device d : available_devices()) {
    std::printf("device %s\n", d.str().c_str());
    auto x = Tensor<2>::from_data({{1, -2}, {3, 4}}, {.device = d});
    auto w = Tensor<2>::from_data({{0.5, 1}, {1, 0.5}}, {.device = d});
    double got = relu(x.matmul(w) + 1.0).sum().item<double>();
    // relu([[1 - 2 + 1, 1 - 1 + 1], [1.5 + 4 + 1, 3 + 2 + 1]]) = [[0, 1], [6.5, 6]] -> 13.5
    if (std::fabs(got - 13.5) > 1e-5) {
      std::printf("wrong result on %s: %f\n", d.str().c_str(), got);
      return 1;
    }
    // Functions generated from the installed op table (ember/elementwise_ops.def):
    // fmod(x, 3) * x = [1, 4, 0, 4] -> 9; log2(|x|) = [0, 1, log2(3), 2] -> 3 + log2(3).
    double table = (fmod(x, 3.0) * x).sum().item<double>() + log2(x.abs()).sum().item<double>();
    if (std::fabs(table - (12 + std::log2(3.0))) > 1e-5) {
      std::printf("wrong op-table result on %s: %f\n", d.str().c_str(), table);
      return 1;
    }
    ++found;
  }
  std::printf("ember %s: %d devices ok\n", version(), found);
  return found >= 2 ? 0 : 1;  // cpu and reference must both load from the install
}
