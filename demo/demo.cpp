#include <iostream>
#include "ember/ops.h"
using namespace ember;
int main() {
  Device d = Device::reference();
  auto x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}, d);
  auto y = gelu(add(x, 1.0));
  std::cout << y << "\n";
  std::cout << sum(x, {1}) << "\n" << argmax(x, 0) << "\n";
  std::cout << matmul(x, transpose(x, 0, 1)) << "\n";
  std::cout << normal({2, 3}, 0, 1, {.seed = 7, .device = d}) << "\n";
  std::cout << arange(0, 10, 3, std::nullopt, d) << "\n";
  std::cout << slice(x, 1, 0, 3, 2) << "\n";
  std::cout << cat({x, x}, 0) << "\n";
}
