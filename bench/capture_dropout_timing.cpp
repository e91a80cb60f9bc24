// Timing of a training step with dropout (an MLP 784-256-10, dropout 0.2 after the hidden ReLU:
// forward, loss, backward, the four gradients computed), eagerly and as one ember::capture
// recording replayed with fresh dropout masks (docs/performance.md, "Captured training steps
// with dropout"). Rounds alternate the two; each prints the mean over `steps` steps.
//   cmake --build --preset release --target ember_capture_dropout_timing
//   OMP_NUM_THREADS=1 build/release/bin/ember_capture_dropout_timing [batch] [steps]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ember/ember.h"

using namespace ember;

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 32;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 300;
  nn::Linear l1({.in = 784, .out = 256, .seed = 1});
  nn::Linear l2({.in = 256, .out = 10, .seed = 2});
  const Array x = uniform({batch, 784}, 0, 1, {.seed = 3});
  auto parameters = [&] {
    std::vector<Array> ps;
    for (nn::Linear* l : {&l1, &l2})
      for (nn::ParamRef& p : l->parameters()) ps.push_back(p.array());
    return ps;
  };
  auto step = [&](const std::vector<Array>& in) {
    const Array y = l2.forward(nn::dropout(relu(l1.forward(in[0])), 0.2, /*training=*/true));
    const Array loss = mean(mul(y, y));
    const Gradients g = loss.backward();
    std::vector<Array> out{loss};
    for (const Array& p : parameters()) out.push_back(p.grad(g));
    return out;
  };
  const CapturedFunction captured = capture(step, {.outputs_need_grad = false, .implicit_inputs = parameters});
  for (int round = 0; round < 3; ++round)
    for (bool replay : {false, true}) {
      auto run = [&] {
        std::vector<Array> out = replay ? captured({x}) : step({x});
        eval_and_wait(out);
      };
      for (int i = 0; i < 20; ++i) run();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i) run();
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / steps;
      std::printf("batch %lld %s: %.1f us/step\n", (long long)batch, replay ? "captured" : "eager   ", us);
    }
  const CaptureStats s = captured.stats();
  std::printf("recordings %lld, replays %lld, eager calls %lld%s%s\n", (long long)s.recordings, (long long)s.replays,
              (long long)s.eager_calls, s.last_refusal.empty() ? "" : ", refused: ", s.last_refusal.c_str());
  return s.recordings == 1 ? 0 : 1;
}
