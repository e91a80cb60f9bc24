// The main job for now: builds tensors, runs ops and prints the results (the API sketch's
// first example). Later issues replace it with training Fashion-MNIST.
#include <ember/ember.h>

#include <iostream>

using namespace ember;

int main(int argc, char** argv) {
  Device device = argc > 1 ? Device::parse(argv[1]) : Device::cpu();
  std::cout << "Ember demo on " << device.str() << "\n\n";

  auto x = Tensor<2>::randn({4, 3}, {.seed = 7, .device = device});
  auto w = Tensor<2>::from_data({{1, 2}, {3, 4}, {5, 6}}, {.device = device});
  Tensor<2> y = gelu(x.matmul(w) + 1.0f);  // nothing computed yet
  Tensor<2> s = y.sum_dim(1);              // [4, 1]: reducing keeps rank
  Tensor<1> t = s.squeeze<1>();            // [4]
  std::cout << "x =\n" << x << "\n\ny = gelu(x @ w + 1) =\n" << y << "\n\nrow sums = " << t << "\n";
  Tensor<2, Int> idx = y.argmax(1);
  std::cout << "argmax(y, 1) = " << idx.squeeze<1>() << "\n";
  Tensor<3> z = y.unsqueeze<0>();
  std::cout << "unsqueeze<0> shape: " << z.shape().str() << "\n";

  auto r = Tensor<1, Int>::arange(0, 10, 3, {.device = device});
  std::cout << "arange(0, 10, 3) = " << r << "\n";
  std::cout << "softmax-like row normalization: " << (y.exp() / y.exp().sum_dim(1)) << "\n";
  try {
    auto bad = y.reshape<2>({2, 2});
    (void)bad;
  } catch (const Error& e) {
    std::cout << "\nexpected error: " << e.what() << "\n";
  }
  MemoryStats m = memory_stats(device);
  std::cout << "\nmemory: live " << m.live_bytes << " B in " << m.live_buffers << " buffers, peak " << m.peak_bytes
            << " B\n";
  return 0;
}
