// A character-level LSTM language model, written as a PyTorch user would: Embedding -> LSTM ->
// Linear, trained with Adam on random windows of a text (by default one of Ember's own docs) to
// predict each next character, then sampled a character at a time with multinomial, carrying
// the LSTM's state.
//   ./build/release/bin/example-char-lstm [--text FILE] [--steps 600] [--limit N] [--seq-len 64]
//                                         [--batch-size 32] [--hidden 128] [--lr 0.003]
//                                         [--temperature 0.8] [--sample-len 300] [--seed 1]
#include <ember/ember.h>

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace ember;

#ifndef EMBER_EXAMPLE_TEXT
#define EMBER_EXAMPLE_TEXT "docs/semantics.md"
#endif

struct Args {
  std::string text = EMBER_EXAMPLE_TEXT;
  int64_t steps = 600;
  int64_t limit = 0;  // > 0: stop after this many steps (smoke runs)
  int64_t seq_len = 64;
  int64_t batch_size = 32;
  int64_t hidden = 128;
  double lr = 3e-3;
  double temperature = 0.8;
  int64_t sample_len = 300;
  uint64_t seed = 1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "usage: example-char-lstm [--text FILE] [--steps N] [--limit N] [--seq-len L] [--batch-size B]\n"
                   "                         [--hidden H] [--lr LR] [--temperature T] [--sample-len N] [--seed S]\n";
      std::exit(flag == "--help" || flag == "-h" ? 0 : 2);
    }
    std::string v = argv[++i];
    if (flag == "--text") a.text = v;
    else if (flag == "--steps") a.steps = std::stoll(v);
    else if (flag == "--limit") a.limit = std::stoll(v);
    else if (flag == "--seq-len") a.seq_len = std::stoll(v);
    else if (flag == "--batch-size") a.batch_size = std::stoll(v);
    else if (flag == "--hidden") a.hidden = std::stoll(v);
    else if (flag == "--lr") a.lr = std::stod(v);
    else if (flag == "--temperature") a.temperature = std::stod(v);
    else if (flag == "--sample-len") a.sample_len = std::stoll(v);
    else if (flag == "--seed") a.seed = std::stoull(v);
    else {
      std::cerr << "unknown flag " << flag << "\n";
      std::exit(2);
    }
  }
  return a;
}

// The distinct bytes of the text, sorted: character <-> class index.
struct Vocabulary {
  std::string chars;
  std::vector<int64_t> index = std::vector<int64_t>(256, -1);
  explicit Vocabulary(const std::string& text) {
    for (unsigned char c : text) index[c] = 0;
    for (int c = 0; c < 256; ++c)
      if (index[size_t(c)] == 0) {
        index[size_t(c)] = int64_t(chars.size());
        chars.push_back(char(c));
      }
  }
  int64_t size() const { return int64_t(chars.size()); }
  std::vector<int64_t> encode(const std::string& s) const {
    std::vector<int64_t> ids;
    for (unsigned char c : s)
      if (index[c] >= 0) ids.push_back(index[c]);
    return ids;
  }
};

struct CharLstm : nn::Module {
  nn::Embedding encoder;
  nn::LSTM rnn;
  nn::Linear decoder;
  EMBER_MODULE(encoder, rnn, decoder)

  CharLstm(int64_t vocab, int64_t embed, int64_t hidden)
      : encoder({.num = vocab, .dim = embed}),
        rnn({.input_size = embed, .hidden_size = hidden, .batch_first = true}),
        decoder({.in = hidden, .out = vocab}) {}

  // tokens [N, L] -> logits [N, L, vocab], with the LSTM's final (h, c); zero states by default.
  nn::RecurrentResult<3> forward(const Tensor<2, Int>& tokens, const Tensor<3>& h0 = {}, const Tensor<3>& c0 = {}) {
    Tensor<3> emb = encoder(tokens);
    auto [output, h_n, c_n] = rnn(emb, h0, c0);
    return {decoder(output), h_n, c_n};
  }
};

// A batch of random windows: inputs text[i, i + L), targets text[i + 1, i + L + 1).
std::pair<Tensor<2, Int>, Tensor<2, Int>> get_batch(const std::vector<int64_t>& data, int64_t batch, int64_t len,
                                                    std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> start(0, data.size() - size_t(len) - 1);
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < batch; ++b) {
    size_t i = start(rng);
    x.insert(x.end(), data.begin() + long(i), data.begin() + long(i) + len);
    y.insert(y.end(), data.begin() + long(i) + 1, data.begin() + long(i) + len + 1);
  }
  return {Tensor<2, Int>::from_vector(x, {batch, len}), Tensor<2, Int>::from_vector(y, {batch, len})};
}

// Feeds the prompt, then draws one character at a time from softmax(logits / temperature).
std::string sample(CharLstm& model, const Vocabulary& vocab, const std::string& prompt, int64_t n, double temperature,
                   uint64_t seed) {
  model.eval();
  NoGradGuard no_grad;
  std::vector<int64_t> ids = vocab.encode(prompt);
  Tensor<2, Int> input = Tensor<2, Int>::from_vector(ids, {1, int64_t(ids.size())});
  Tensor<3> h, c;
  std::string text = prompt;
  for (int64_t i = 0; i < n; ++i) {
    auto [logits, h_n, c_n] = model(input, h, c);
    Tensor<2> last = logits.select_index(1, logits.shape()[1] - 1);  // [1, vocab]
    Tensor<2> probs = nn::softmax(last / temperature, 1);
    Tensor<2, Int> next = multinomial(probs, 1, /*replacement=*/false, seed + uint64_t(i));  // [1, 1]
    text += vocab.chars[size_t(next.item<int64_t>())];
    h = h_n;
    c = c_n;
    eval({h.array(), c.array()});  // the state is all the next step needs of this one
    input = next;
  }
  model.train();
  return text;
}

int main(int argc, char** argv) {
  // Many small kernels: OpenMP threads that sleep between them keep a shared machine usable (as
  // the ember command does). Read when the CPU backend loads, so set first.
  ::setenv("GOMP_SPINCOUNT", "0", 0);
  Args args = parse_args(argc, argv);
  std::ifstream file(args.text, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  std::string text = contents.str();
  if (!file || int64_t(text.size()) < args.seq_len + 2) {
    std::cerr << args.text << ": cannot read it, or shorter than " << args.seq_len + 2 << " bytes\n";
    return 1;
  }
  Vocabulary vocab(text);
  std::vector<int64_t> data = vocab.encode(text);
  manual_seed(args.seed);

  CharLstm model(vocab.size(), /*embed=*/32, args.hidden);
  optim::Adam optimizer(model, {.lr = args.lr, .clip = {.max_norm = 1.0}});  // clip_grad_norm_(..., 1.0)
  std::printf("%s: %zu characters, vocabulary %lld, %lld parameters\n", args.text.c_str(), data.size(),
              (long long)vocab.size(), (long long)model.num_params());

  std::mt19937_64 rng(args.seed);
  int64_t steps = args.limit > 0 ? std::min(args.limit, args.steps) : args.steps;
  auto t0 = std::chrono::steady_clock::now();
  double smoothed = 0, first = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    auto [x, y] = get_batch(data, args.batch_size, args.seq_len, rng);
    auto [logits, h_n, c_n] = model(x);
    Tensor<1> loss = nn::cross_entropy(logits.reshape<2>({-1, vocab.size()}), y.reshape<1>({-1}));
    optimizer.step(loss.backward());
    double value = loss.item<double>();
    if (step == 1) first = smoothed = value;
    smoothed = 0.9 * smoothed + 0.1 * value;
    if (step == 1 || step % 50 == 0 || step == steps) {
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("step %4lld  loss %.4f  (smoothed %.4f)  %.1f s\n", (long long)step, value, smoothed, seconds);
    }
  }
  std::printf("\n--- sample (temperature %.2f) ---\n%s\n", args.temperature,
              sample(model, vocab, "The ", args.sample_len, args.temperature, args.seed).c_str());
  // Learning shows as a falling loss; a short smoke run only has to run.
  return steps < 100 || smoothed < first - 0.5 ? 0 : 1;
}
