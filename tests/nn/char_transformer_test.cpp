// The character-level transformer of examples/char_transformer.h, trained briefly on a slice of
// the GPL-3 text (tests/nn/data/gpl3_slice.txt): the training loss must fall well below the
// uniform and unigram levels. A small configuration keeps it to a few seconds.
#include <gtest/gtest.h>

#include "../../examples/char_transformer.h"
#include "nn/nn_test_util.h"

namespace ember {
namespace {

TEST(CharTransformerTest, TrainingLossFalls) {
  std::string text = char_lm::read_text(ember::testing::tests_dir() + "/nn/data/gpl3_slice.txt");
  char_lm::Vocab vocab(text);
  std::vector<int64_t> data = vocab.encode(text);
  char_lm::Config cfg{.context = 32, .d_model = 32, .nhead = 2, .layers = 1, .ff = 64, .seed = 3};
  char_lm::Model model(cfg, vocab.size());
  optim::AdamW opt(model, {.lr = 1e-2, .weight_decay = 0.01, .clip = {.max_norm = 1.0}});
  std::mt19937_64 rng(5);
  // Unigram cross-entropy of the slice: what a model without context can reach.
  std::vector<double> counts(size_t(vocab.size()), 0.0);
  for (int64_t t : data) counts[size_t(t)] += 1;
  double unigram = 0;
  for (double c : counts) unigram -= c / double(data.size()) * std::log(c / double(data.size()));

  const int steps = 60;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    double loss = char_lm::train_step(model, opt, char_lm::sample_batch(data, 16, cfg.context, rng));
    if (step == 0) first = loss;
    if (step >= steps - 10) last += loss / 10;
  }
  std::cout << "uniform " << std::log(double(vocab.size())) << ", unigram " << unigram << ", first " << first
            << ", last 10 steps " << last << "\n";
  EXPECT_NEAR(first, std::log(double(vocab.size())), 0.5);
  EXPECT_LT(last, 2.7);
  EXPECT_LT(last, unigram - 0.2);
  // Sampling gives the requested length from the vocabulary.
  std::string s = char_lm::sample(model, vocab, "the ", 20, 0.8, 1);
  EXPECT_EQ(s.size(), 24u);
}

}  // namespace
}  // namespace ember
