// The model workloads of the benchmark suite (bench/run's training and inference rows), Ember's
// side: MLP steps and inference, transformer encoder training and inference, recurrent language
// models, the tiny LSTM's autodiff overhead, a CIFAR-shaped residual CNN with batch norm (training
// step, inference) and a GPT-style decoder stack (training step, inference). torch_bench.py builds
// the same models with the same parameter values (set_params_by_name), so the checksums compare.
#include <optional>
#include <string>
#include <vector>

#include "bench_case.h"

namespace ember_bench {
namespace {

struct Mlp : nn::Module {
  nn::Linear fc1, fc2, fc3;
  EMBER_MODULE(fc1, fc2, fc3)
  Mlp(int64_t in, int64_t hidden, int64_t out)
      : fc1({.in = in, .out = hidden, .seed = 1}), fc2({.in = hidden, .out = hidden, .seed = 3}),
        fc3({.in = hidden, .out = out, .seed = 5}) {
    // Deterministic weights both sides use (scaled by 1/sqrt(in)), so losses can be compared.
    int64_t seed = 10;
    for (nn::Linear* l : {&fc1, &fc2, &fc3}) {
      double s = 1.0 / std::sqrt(double(l->options.in));
      l->weight.set(input({l->options.out, l->options.in}, seed++, s));
      l->bias.set(input({l->options.out}, seed++, s));
    }
  }
  Array forward(const Array& x) { return fc3.forward(relu(fc2.forward(relu(fc1.forward(x))))); }
};

// One training step of a classifier on a fixed batch (labels i mod classes): forward, cross-entropy,
// backward, Adam (the MLP and residual CNN rows).
template <class Model>
struct ClassifierStep : Case {
  Model model;
  std::optional<optim::Adam> opt;
  Array x, labels, loss;
  template <class... ModelArgs>
  ClassifierStep(const Shape& batch_shape, int64_t classes, ModelArgs... args)
      : model(args...), x(input(batch_shape, 1)),
        labels(on_bench_device(rem(arange(0, batch_shape[0], 1, DType::I64), classes))) {
    model.to(bench_device());
    opt.emplace(model, optim::AdamOptions{.lr = 1e-3});
  }
  void run() override {
    loss = nn::cross_entropy(model.forward(x), labels);
    opt->step(loss.backward());
    wait_device();
  }
  double check() override { return loss.item<double>(); }
};

// Inference latency of a model (eval mode) on a fixed input: forward only, result read back. With
// `captured`, the forward is an ember::capture_module recording (ember/capture.h), replayed on
// every run after the first: the host cost per op is gone.
template <class Model>
struct ModelInfer : Case {
  Model model;
  Array x;
  std::vector<float> out;
  std::optional<CapturedFunction> captured;
  template <class... ModelArgs>
  ModelInfer(Array model_input, bool capture, ModelArgs... args) : model(args...), x(std::move(model_input)) {
    model.to(bench_device());
    model.eval();
    if (capture)
      captured = capture_module(model, [this](const std::vector<Array>& in) { return std::vector<Array>{model.forward(in[0])}; });
  }
  void run() override {
    NoGradGuard no_grad;
    out = (captured ? (*captured)({x})[0] : model.forward(x)).template to_vector<float>();
  }
  double check() override {
    double s = 0;
    for (float v : out) s += v;
    return s;
  }
};

// One training step of a post-norm transformer encoder layer (nn::TransformerEncoderLayer,
// GELU feed-forward, no dropout): forward, loss = mean(out²), backward, Adam. `low`: the forward
// under autocast to bf16 or f16 (f32 master weights, as `ember train --precision`).
struct EncoderTrain : Case {
  nn::TransformerEncoderLayer layer;
  std::optional<optim::Adam> opt;
  std::optional<DType> low;
  Array x, loss;
  EncoderTrain(int64_t B, int64_t S, int64_t D, int64_t H, int64_t F, std::optional<DType> low_precision)
      : layer({.d_model = D, .nhead = H, .dim_feedforward = F, .dropout = 0,
               .activation = nn::FfnActivation::Gelu, .batch_first = true, .seed = 1}),
        low(low_precision), x(input({B, S, D}, 1)) {
    set_params_by_name(layer, 40);
    layer.to(bench_device());
    opt.emplace(layer, optim::AdamOptions{.lr = 1e-4});
  }
  void run() override {
    Array y;
    if (low) {
      AutocastGuard amp({.dtype = *low});
      y = layer.forward(x);
    } else {
      y = layer.forward(x);
    }
    loss = mean(mul(cast(y, DType::F32), cast(y, DType::F32)));
    opt->step(loss.backward());
    wait_device();
  }
  double check() override { return loss.item<double>(); }
};

// One training step of a character language model (the shape of examples/char_lstm.cpp with two
// layers): embedding, a 2-layer LSTM or GRU (`cell`), linear head, cross-entropy over every
// position, Adam. Tokens are a fixed pattern (torch_bench.py builds the same).
struct RecurrentLm : Case {
  struct Model : nn::Module {
    nn::Embedding embed;
    nn::LSTM lstm;
    nn::GRU gru;
    nn::Linear head;
    EMBER_MODULE(embed, lstm, gru, head)
    Model(bool use_gru, int64_t vocab, int64_t dim, int64_t hidden, int64_t layers)
        : embed({.num = vocab, .dim = dim}), head({.in = hidden, .out = vocab}) {
      const nn::RecurrentOptions o{
          .input_size = dim, .hidden_size = hidden, .num_layers = layers, .batch_first = true, .seed = 1};
      if (use_gru) gru = nn::GRU(o);
      else lstm = nn::LSTM(o);
    }
  };
  bool use_gru;
  Model model;
  std::optional<optim::Adam> opt;
  Array tokens, targets, loss;
  int64_t vocab;
  RecurrentLm(const std::string& cell, int64_t batch, int64_t seq, int64_t vocab_size, int64_t dim, int64_t hidden,
              int64_t layers)
      : use_gru(cell == "gru"), model(use_gru, vocab_size, dim, hidden, layers), vocab(vocab_size) {
    if (cell != "lstm" && cell != "gru") throw Error("lstm_lm: cell must be lstm or gru, got '" + cell + "'");
    set_params_by_name(model.embed, 80);
    set_params_by_name(use_gru ? static_cast<nn::Module&>(model.gru) : model.lstm, 90);
    set_params_by_name(model.head, 100);
    model.to(bench_device());
    opt.emplace(model, optim::AdamOptions{.lr = 1e-3});
    // token[b, t] = (131 b + 7 t + t^2 mod 11) mod vocab; the target is the next position's token.
    std::vector<int64_t> x(size_t(batch * seq)), y(x.size());
    auto tok = [&](int64_t b, int64_t t) { return (131 * b + 7 * t + (t * t) % 11) % vocab; };
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        x[size_t(b * seq + t)] = tok(b, t);
        y[size_t(b * seq + t)] = tok(b, t + 1);
      }
    tokens = on_bench_device(from_vector(x, {batch, seq}));
    targets = on_bench_device(from_vector(y, {batch * seq}));
  }
  void run() override {
    Array e = model.embed.forward(tokens);
    Array h = use_gru ? model.gru.forward(e).output : model.lstm.forward(e).output;
    loss = nn::cross_entropy(reshape(model.head.forward(h), {-1, vocab}), targets);
    opt->step(loss.backward());
    wait_device();
  }
  double check() override { return loss.item<double>(); }
};

// Autodiff overhead on a tiny LSTM (input 16, hidden 32, 16 steps, batch 4): forward, backward,
// one gradient read to the host. Mostly graph building and small kernels.
// With `captured`, forward and backward are one ember::capture recording (the parameters bound
// as inputs, the gradient returned without history), replayed on every run after the first.
struct LstmAutograd : Case {
  nn::LSTM lstm;
  Array x;
  std::vector<float> g;
  std::optional<CapturedFunction> captured;
  LstmAutograd(int64_t batch, int64_t seq, int64_t in, int64_t hidden, bool capture)
      : lstm({.input_size = in, .hidden_size = hidden, .seed = 1}), x(input({seq, batch, in}, 1)) {
    set_params_by_name(lstm, 60);
    lstm.to(bench_device());
    if (capture)
      captured = ember::capture([this](const std::vector<Array>& in) { return std::vector<Array>{gradient(in[0])}; },
                                {.outputs_need_grad = false, .implicit_inputs = [this] {
                                   std::vector<Array> ps;
                                   for (nn::ParamRef& p : lstm.parameters()) ps.push_back(p.array());
                                   return ps;
                                 }});
  }
  Array gradient(const Array& input) {
    nn::RecurrentOutput r = lstm.forward(input);
    Array loss = sum(r.output);
    Gradients grads = loss.backward();
    for (nn::NamedParam& p : lstm.named_parameters())
      if (p.name == "weight_ih_l0") return p.param.array().grad(grads);
    throw Error("lstm_autograd: no weight_ih_l0");
  }
  void run() override { g = (captured ? (*captured)({x})[0] : gradient(x)).to_vector<float>(); }
  double check() override {
    double s = 0;
    for (float v : g) s += v;
    return s;
  }
};

// A post-norm transformer encoder layer (inference): multi-head self-attention, residual, layer
// norm, GELU feed-forward, residual, layer norm; written with matmul/softmax/layer_norm.
struct Encoder : Case {
  int64_t B, S, D, H, F;
  Array x, wqkv, bqkv, wo, bo, w1, b1, w2, b2, g1, be1, g2, be2, out;
  Encoder(int64_t b, int64_t s, int64_t d, int64_t h, int64_t f) : B(b), S(s), D(d), H(h), F(f) {
    x = input({B, S, D}, 1);
    double sd = 1.0 / std::sqrt(double(D)), sf = 1.0 / std::sqrt(double(F));
    wqkv = input({D, 3 * D}, 2, sd); bqkv = input({3 * D}, 3, sd);
    wo = input({D, D}, 4, sd); bo = input({D}, 5, sd);
    w1 = input({D, F}, 6, sd); b1 = input({F}, 7, sd);
    w2 = input({F, D}, 8, sf); b2 = input({D}, 9, sf);
    g1 = add(input({D}, 10, 0.1), 1.0).eval(); be1 = input({D}, 11, 0.1);
    g2 = add(input({D}, 12, 0.1), 1.0).eval(); be2 = input({D}, 13, 0.1);
  }
  void run() override {
    const int64_t dh = D / H;
    Array qkv = add(matmul(x, wqkv), bqkv);                            // [B, S, 3D]
    qkv = permute(reshape(qkv, {B, S, 3, H, dh}), {2, 0, 3, 1, 4});   // [3, B, H, S, dh]
    Array q = select(qkv, 0, 0), k = select(qkv, 0, 1), v = select(qkv, 0, 2);
    Array att = softmax(mul(matmul(q, transpose(k, 2, 3)), 1.0 / std::sqrt(double(dh))), 3);
    Array ctx = reshape(permute(matmul(att, v), {0, 2, 1, 3}), {B, S, D});
    Array h1 = nn::layer_norm(add(x, add(matmul(ctx, wo), bo)), 1, g1, be1, 1e-5);
    Array ff = add(matmul(gelu(add(matmul(h1, w1), b1)), w2), b2);
    out = nn::layer_norm(add(h1, ff), 1, g2, be2, 1e-5);
    out.eval();
    wait_device();
  }
  double check() override { return checksum(out); }
};

// Token ids of the language-model rows: token[b, t] = (131 b + 7 t + t^2 mod 11) mod vocab, t in
// [0, seq), as `shape`; torch_bench.py builds the same.
Array pattern_tokens(int64_t batch, int64_t seq, int64_t vocab, Shape shape) {
  std::vector<int64_t> v;
  v.reserve(size_t(batch * seq));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < seq; ++t) v.push_back((131 * b + 7 * t + (t * t) % 11) % vocab);
  return on_bench_device(from_vector(v, shape));
}

// ResNet's basic block: conv 3×3, batch norm, relu, conv 3×3, batch norm, plus the input (through
// a strided 1×1 convolution and batch norm where the shape changes), relu.
struct ResidualBlock : nn::Module {
  nn::Conv2d conv1, conv2;
  nn::BatchNorm2d norm1, norm2;
  std::vector<nn::Conv2d> down_conv;  // empty where the block keeps the shape
  std::vector<nn::BatchNorm2d> down_norm;
  EMBER_MODULE(conv1, norm1, conv2, norm2, down_conv, down_norm)
  ResidualBlock(int64_t in, int64_t out, int64_t stride)
      : conv1({.in = in, .out = out, .kernel = 3, .stride = stride, .padding = 1, .bias = false}),
        conv2({.in = out, .out = out, .kernel = 3, .padding = 1, .bias = false}), norm1({.features = out}),
        norm2({.features = out}) {
    if (stride != 1 || in != out) {
      down_conv.emplace_back(nn::Conv2dLayerOptions{.in = in, .out = out, .kernel = 1, .stride = stride, .bias = false});
      down_norm.emplace_back(nn::BatchNormOptions{.features = out});
    }
  }
  Array forward(const Array& x) {
    Array h = relu(norm1.forward(conv1.forward(x)));
    h = norm2.forward(conv2.forward(h));
    Array skip = down_conv.empty() ? x : down_norm[0].forward(down_conv[0].forward(x));
    return relu(add(h, skip));
  }
};

// A CIFAR-shaped residual CNN: a 3×3 stem (3 -> w channels) with batch norm, three basic blocks
// (w at 32×32, 2w at 16×16, 4w at 8×8), global average pooling and a linear classifier.
struct ResNet : nn::Module {
  nn::Conv2d stem;
  nn::BatchNorm2d stem_norm;
  std::vector<ResidualBlock> blocks;
  nn::Linear fc;
  EMBER_MODULE(stem, stem_norm, blocks, fc)
  ResNet(int64_t width, int64_t classes)
      : stem({.in = 3, .out = width, .kernel = 3, .padding = 1, .bias = false}), stem_norm({.features = width}),
        fc({.in = 4 * width, .out = classes}) {
    blocks.emplace_back(width, width, 1);
    blocks.emplace_back(width, 2 * width, 2);
    blocks.emplace_back(2 * width, 4 * width, 2);
    set_params_by_name(*this, 120);
  }
  Array forward(const Array& x) {
    Array h = relu(stem_norm.forward(stem.forward(x)));
    for (ResidualBlock& b : blocks) h = b.forward(h);
    return fc.forward(nn::global_avg_pool2d(h));
  }
};

// A GPT-style decoder stack: token and learned position embeddings, pre-norm causal transformer
// layers (GELU feed-forward, no dropout) with a final layer norm, a linear head. Written as the
// char_transformer example is: nn::TransformerEncoder with a causal mask.
struct Gpt : nn::Module {
  nn::Embedding tok, pos;
  nn::TransformerEncoder blocks;
  nn::Linear head;
  EMBER_MODULE(tok, pos, blocks, head)
  Gpt(int64_t vocab, int64_t context, int64_t d, int64_t heads, int64_t ff, int64_t layers)
      : tok({.num = vocab, .dim = d}), pos({.num = context, .dim = d}),
        blocks({.layer = {.d_model = d, .nhead = heads, .dim_feedforward = ff, .dropout = 0,
                          .activation = nn::FfnActivation::Gelu, .batch_first = true, .norm_first = true},
                .num_layers = layers,
                .norm = true}),
        head({.in = d, .out = vocab}) {
    set_params_by_name(*this, 140);
  }
  // tokens [B, T] -> logits [B, T, vocab]
  Array forward(const Array& tokens) {
    const int64_t T = tokens.size(1);
    Array h = add(tok.forward(tokens), pos.forward(arange(0, T, 1, DType::I64, tokens.device())));
    return head.forward(blocks.forward(h, {.mask = nn::generate_square_subsequent_mask(T, DType::F32, tokens.device())}));
  }
};

// One training step of the decoder stack: next-token cross-entropy over every position, AdamW.
struct GptTrain : Case {
  Gpt model;
  std::optional<optim::AdamW> opt;
  Array tokens, targets, loss;
  int64_t vocab;
  GptTrain(int64_t batch, int64_t seq, int64_t vocab_size, int64_t d, int64_t heads, int64_t ff, int64_t layers)
      : model(vocab_size, seq, d, heads, ff, layers), tokens(pattern_tokens(batch, seq, vocab_size, {batch, seq})),
        vocab(vocab_size) {
    // targets[b, t] = token[b, t + 1]
    targets = reshape(slice(pattern_tokens(batch, seq + 1, vocab_size, {batch, seq + 1}), 1, 1, seq + 1), {batch * seq})
                  .eval();
    model.to(bench_device());
    opt.emplace(model, optim::AdamWOptions{.lr = 3e-4});
  }
  void run() override {
    loss = nn::cross_entropy(reshape(model.forward(tokens), {-1, vocab}), targets);
    opt->step(loss.backward());
    wait_device();
  }
  double check() override { return loss.item<double>(); }
};

}  // namespace

std::unique_ptr<Case> make_model_case(const std::string& kind, const json& p) {
  auto i = [&](const char* key) { return p.at(key).get<int64_t>(); };
  if (kind == "mlp_step")
    return std::make_unique<ClassifierStep<Mlp>>(Shape{i("batch"), i("in")}, i("out"), i("in"), i("hidden"), i("out"));
  if (kind == "mlp_infer")
    return std::make_unique<ModelInfer<Mlp>>(input({i("batch"), i("in")}, 1), p.value("captured", 0) != 0, i("in"),
                                             i("hidden"), i("out"));
  if (kind == "encoder_train")
  {
    const std::string prec = p.value("precision", std::string("f32"));
    std::optional<DType> low;
    if (prec == "bf16") low = DType::BF16;
    else if (prec == "f16") low = DType::F16;
    else if (prec != "f32") throw Error("encoder_train: precision must be f32, bf16 or f16, got '" + prec + "'");
    return std::make_unique<EncoderTrain>(p.at("batch").get<int64_t>(), p.at("seq").get<int64_t>(),
                                          p.at("dim").get<int64_t>(), p.at("heads").get<int64_t>(),
                                          p.at("ffn").get<int64_t>(), low);
  }
  if (kind == "lstm_lm")
    return std::make_unique<RecurrentLm>(p.value("cell", std::string("lstm")), p.at("batch").get<int64_t>(),
                                         p.at("seq").get<int64_t>(), p.at("vocab").get<int64_t>(),
                                         p.at("dim").get<int64_t>(), p.at("hidden").get<int64_t>(),
                                         p.at("layers").get<int64_t>());
  if (kind == "lstm_autograd")
    return std::make_unique<LstmAutograd>(p.at("batch").get<int64_t>(), p.at("seq").get<int64_t>(),
                                          p.at("in").get<int64_t>(), p.at("hidden").get<int64_t>(),
                                          p.value("captured", 0) != 0);
  if (kind == "encoder")
    return std::make_unique<Encoder>(p.at("batch").get<int64_t>(), p.at("seq").get<int64_t>(),
                                     p.at("dim").get<int64_t>(), p.at("heads").get<int64_t>(),
                                     p.at("ffn").get<int64_t>());  // The residual CNN on a CIFAR-shaped batch [B, 3, hw, hw]: a training step (batch statistics) and
  // inference (running statistics).
  const auto image = [&] { return Shape{i("batch"), 3, i("hw"), i("hw")}; };
  if (kind == "resnet_train")
    return std::make_unique<ClassifierStep<ResNet>>(image(), i("classes"), i("width"), i("classes"));
  if (kind == "resnet_infer")
    return std::make_unique<ModelInfer<ResNet>>(input(image(), 1), p.value("captured", 0) != 0, i("width"),
                                                i("classes"));
  if (kind == "gpt_train")
    return std::make_unique<GptTrain>(i("batch"), i("seq"), i("vocab"), i("dim"), i("heads"), i("ffn"), i("layers"));
  if (kind == "gpt_infer")  // a prompt of `seq` tokens per sequence
    return std::make_unique<ModelInfer<Gpt>>(pattern_tokens(i("batch"), i("seq"), i("vocab"), {i("batch"), i("seq")}),
                                             false, i("vocab"), i("seq"), i("dim"), i("heads"), i("ffn"), i("layers"));
  return nullptr;
}

}  // namespace ember_bench
