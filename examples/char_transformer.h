// A character-level transformer language model, shared by examples/char_transformer.cpp and its
// test (tests/nn/char_transformer_test.cpp): token embedding + sinusoidal positions + pre-norm
// causal encoder layers + a final norm + a linear head; a byte vocabulary built from the text,
// random training windows, one AdamW step, and temperature sampling.
#pragma once

#include <ember/ember.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace char_lm {

using namespace ember;

struct Config {
  int64_t context = 64;  // tokens per training window
  int64_t d_model = 64;
  int64_t nhead = 4;
  int64_t layers = 2;
  int64_t ff = 256;
  uint64_t seed = 1;
};

// Distinct bytes of a text, sorted; encode / decode by position.
struct Vocab {
  std::vector<unsigned char> chars;
  int index[256];
  explicit Vocab(const std::string& text) {
    bool seen[256] = {};
    for (unsigned char c : text) seen[c] = true;
    for (int c = 0; c < 256; ++c) {
      index[c] = -1;
      if (seen[c]) {
        index[c] = int(chars.size());
        chars.push_back((unsigned char)c);
      }
    }
  }
  int64_t size() const { return int64_t(chars.size()); }
  std::vector<int64_t> encode(const std::string& s) const {
    std::vector<int64_t> out;
    for (unsigned char c : s)
      if (index[c] >= 0) out.push_back(index[c]);
    return out;
  }
};

struct Model : nn::Module {
  Config cfg;
  nn::Embedding tok;
  nn::SinusoidalPositionalEncoding pos;
  nn::TransformerEncoder encoder;
  nn::Linear head;
  EMBER_MODULE(tok, pos, encoder, head)

  Model(const Config& c, int64_t vocab)
      : cfg(c),
        tok({.num = vocab, .dim = c.d_model, .seed = c.seed}),
        pos({.d_model = c.d_model, .max_len = c.context}),
        encoder({.layer = {.d_model = c.d_model,
                           .nhead = c.nhead,
                           .dim_feedforward = c.ff,
                           .dropout = 0.0,
                           .activation = nn::FfnActivation::Gelu,
                           .batch_first = true,
                           .norm_first = true,
                           .seed = c.seed + 100},
                 .num_layers = c.layers,
                 .norm = true}),
        head({.in = c.d_model, .out = vocab, .seed = c.seed + 7}) {
    // Small embeddings (N(0, 0.02)) so the positions are not drowned at the start.
    tok.weight.set(mul(tok.weight.array(), 0.02).detach());  // new data, not history
  }

  // tokens [N, T] (i64) -> logits [N, T, vocab]; position t sees tokens 0..t.
  Array forward(const Array& tokens) {
    const int64_t T = tokens.size(1);
    Array h = pos.forward(mul(tok.forward(tokens), std::sqrt(double(cfg.d_model))));
    h = encoder.forward(h, {.mask = nn::generate_square_subsequent_mask(T, h.dtype(), h.device())});
    return head.forward(h);
  }
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("char_transformer: cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `batch` random windows of context + 1 tokens: inputs [batch, context], targets shifted by one.
struct Batch {
  Array inputs, targets;
};
inline Batch sample_batch(const std::vector<int64_t>& data, int64_t batch, int64_t context, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> start(0, int64_t(data.size()) - context - 1);
  std::vector<int64_t> x, y;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t s = start(rng);
    x.insert(x.end(), data.begin() + s, data.begin() + s + context);
    y.insert(y.end(), data.begin() + s + 1, data.begin() + s + context + 1);
  }
  return {from_vector(x, {batch, context}), from_vector(y, {batch * context})};
}

// One AdamW step on a batch; returns the batch's mean cross-entropy (nats per character).
inline double train_step(Model& model, optim::AdamW& opt, const Batch& b) {
  Array logits = model.forward(b.inputs);
  Array loss = nn::cross_entropy(reshape(logits, {-1, logits.size(-1)}), b.targets);
  opt.step(loss.backward());
  return loss.item<double>();
}

// Continues `prompt` by `n` characters sampled from softmax(logits / temperature).
inline std::string sample(Model& model, const Vocab& vocab, const std::string& prompt, int n, double temperature,
                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids = vocab.encode(prompt);
  if (ids.empty()) ids.push_back(0);
  std::string out = prompt;
  model.eval();
  for (int i = 0; i < n; ++i) {
    int64_t T = std::min<int64_t>(int64_t(ids.size()), model.cfg.context);
    std::vector<int64_t> window(ids.end() - T, ids.end());
    Array logits = model.forward(from_vector(window, {1, T}));
    std::vector<double> last = select(select(logits, 1, T - 1), 0, 0).to_vector<double>();
    double mx = *std::max_element(last.begin(), last.end());
    std::vector<double> p(last.size());
    for (size_t j = 0; j < p.size(); ++j) p[j] = std::exp((last[j] - mx) / std::max(temperature, 1e-6));
    std::discrete_distribution<int64_t> pick(p.begin(), p.end());
    int64_t next = pick(rng);
    ids.push_back(next);
    out.push_back(char(vocab.chars[size_t(next)]));
  }
  model.train();
  return out;
}

}  // namespace char_lm
