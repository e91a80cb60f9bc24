// A character-level transformer language model (examples/char_transformer.h): trained with AdamW
// on a text file (default: the GPL-3 text that Debian ships in base-files), printing the loss as
// it goes, then sampling text from a prompt with a temperature.
//   ./build/release/bin/example-char-transformer [text-file] [steps] [temperature]
#include "char_transformer.h"

#include <chrono>
#include <cstdlib>
#include <stdlib.h>
#include <iostream>

using namespace ember;

int main(int argc, char** argv) {
  // Small kernels: OpenMP threads that sleep between them instead of spinning keep a busy
  // machine usable (as the ember command does); read when the CPU backend loads, so set it first.
  ::setenv("GOMP_SPINCOUNT", "0", 0);
  std::string path = argc > 1 ? argv[1] : "/usr/share/common-licenses/GPL-3";
  int steps = argc > 2 ? std::atoi(argv[2]) : 500;
  double temperature = argc > 3 ? std::atof(argv[3]) : 0.8;
  std::string text = char_lm::read_text(path);
  char_lm::Vocab vocab(text);
  std::vector<int64_t> data = vocab.encode(text);
  char_lm::Config cfg;
  if (int64_t(data.size()) < cfg.context + 2) {
    std::cerr << path << " is too short (" << data.size() << " characters)\n";
    return 1;
  }
  char_lm::Model model(cfg, vocab.size());
  optim::AdamW opt(model, {.lr = 3e-3, .weight_decay = 0.01, .clip = {.max_norm = 1.0}});
  std::cout << path << ": " << data.size() << " characters, vocabulary " << vocab.size() << ", "
            << model.num_params() << " parameters\n";

  std::mt19937_64 rng(cfg.seed);
  const int64_t batch = 16;
  auto t0 = std::chrono::steady_clock::now();
  double running = 0;
  for (int step = 1; step <= steps; ++step) {
    // Linear warmup over the first 30 steps, then cosine decay to a tenth.
    double warm = std::min(1.0, step / 30.0);
    double progress = double(step) / steps;
    opt.set_lr(3e-3 * warm * (0.1 + 0.9 * 0.5 * (1 + std::cos(3.141592653589793 * progress))));
    double loss = char_lm::train_step(model, opt, char_lm::sample_batch(data, batch, cfg.context, rng));
    running = step == 1 ? loss : 0.9 * running + 0.1 * loss;
    if (step % 25 == 0 || step == 1) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << "step " << step << "  loss " << loss << "  (smoothed " << running << ")  " << secs << " s\n";
    }
  }
  std::cout << "\n--- sample (temperature " << temperature << ") ---\n"
            << char_lm::sample(model, vocab, "This License", 400, temperature, 7) << "\n";
}
