// Ember's side of the benchmark suite (bench/run drives it; bench/torch_bench.py is the peer).
//
// A line protocol on stdin/stdout, one JSON object per line, so the runner can alternate Ember and
// PyTorch on the same workload without restarting either process:
//   {"cmd":"setup","kind":"tanh","p":{"n":16777216}}  -> {"ok":true} | {"ok":false,"error":...}
//   {"cmd":"run","reps":3}   -> {"times":[seconds per rep...],"kernels":k,"library_calls":l}
//                               (k, l: kernels and library calls of the last rep)
//   {"cmd":"settle"}         -> {"ok":true} once no tier-1 kernel is compiling in the background
//   {"cmd":"check"}          -> {"checksum":x}  (a number both sides compute from the same inputs)
//   {"cmd":"info"}           -> {"threads":..,"fusion":..,"version":..}
//   {"cmd":"quit"}
// Every rep is synchronous: it ends with a host read, or ember::eval followed by a wait for the
// device's queue (see wait_cpu). Inputs come from an integer formula both sides evaluate exactly
// (values ((i * 7919 + seed * 104729) mod 1000) / 500 - 1), so checksums can be compared.
// The thread count is the process's OMP_NUM_THREADS (set by the runner).
#include <dlfcn.h>
#include <link.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ember/ember.h"

namespace handfused_scalar {
void gelu(const float* x, float* y, int64_t n);
void chain10(const float* x, float* y, int64_t n);
}  // namespace handfused_scalar
namespace handfused_vec {
void gelu(const float* x, float* y, int64_t n);
void chain10(const float* x, float* y, int64_t n);
}  // namespace handfused_vec

using namespace ember;
using json = nlohmann::json;

namespace {

// The shared input formula (see the header comment), f32, realized.
Array input(const Shape& shape, int64_t seed, double scale = 1.0) {
  // One expression, so that no intermediate is held by a handle (held values become extra
  // kernel outputs).
  auto values = [&] {
    return sub(div(cast(rem(add(mul(arange(0, shape.numel(), 1, DType::I64), 7919), seed * 104729), 1000),
                        DType::F32),
                   500.0),
               1.0);
  };
  return reshape(scale != 1.0 ? mul(values(), scale) : values(), shape).eval();
}
std::vector<float> host_input(int64_t n, int64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float((i * 7919 + seed * 104729) % 1000) / 500.0f - 1.0f;
  return v;
}
double checksum(const Array& a) { return sum(cast(a, DType::F64)).item<double>(); }

// Waits for the work queued on the CPU device. ember::synchronize(Device) is found by argument-
// dependent lookup where the library has it (asynchronous eval); otherwise this fallback applies,
// and eval() itself runs the kernels before it returns.
template <class D>
void synchronize(D) {}
void wait_cpu() { synchronize(Device::cpu()); }

// Waits (at most 60 s) until the CPU plugin has no tier-1 kernel compiling in the background, so
// that the timed reps measure the steady state (the `settle` command, sent after a warm-up).
void settle_tier1() {
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name && std::strstr(info->dlpi_name, "libember_backend_cpu.so"))
          *static_cast<std::string*>(data) = info->dlpi_name;
        return 0;
      },
      &path);
  void* h = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto pending = h ? reinterpret_cast<int64_t (*)()>(dlsym(h, "ember_cpu_tier_pending")) : nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pending && pending() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (h) dlclose(h);
}
Shape shape_of(const json& j) {
  std::vector<int64_t> s = j.get<std::vector<int64_t>>();
  return Shape(s);
}

// One workload: its state lives between setup and the next setup, so the runner can interleave
// reps of Ember and of the peer.
struct Case {
  virtual ~Case() = default;
  virtual void run() = 0;          // one synchronized rep
  virtual double check() = 0;      // checksum of the last result
  virtual double units() { return 1; }  // a rep's time is divided by this (per-op timings)
};

struct Fn : Case {
  std::function<Array()> f;
  Array out;
  explicit Fn(std::function<Array()> fn) : f(std::move(fn)) {}
  void run() override { out = f(); out.eval(); wait_cpu(); }
  double check() override { return checksum(out); }
};

Array gelu_prims(const Array& x) { return mul(mul(x, 0.5), add(erf(div(x, std::sqrt(2.0))), 1.0)); }
Array chain10(const Array& x) {
  Array h = exp(mul(x, 0.1));
  h = tanh(add(h, 1.0));
  h = sigmoid(mul(h, 2.0));
  h = sub(mul(h, h), 0.5);
  return abs(add(h, x));
}

struct GeluGrad : Case {
  Array x, g, dx;
  explicit GeluGrad(int64_t n) : x(input({n}, 1).require_grad()), g(input({n}, 2)) {}
  void run() override {
    Array y = gelu_prims(x);
    Gradients gr = y.backward(g);
    dx = x.grad(gr);
    dx.eval();
    wait_cpu();
  }
  double check() override { return checksum(dx); }
};

// A parallel memcpy into a pre-faulted buffer: the machine's copy bandwidth.
struct MemCopy : Case {
  std::vector<float> a, b;
  explicit MemCopy(int64_t n) : a(host_input(n, 1)), b(size_t(n), 0.0f) {}
  void run() override {
    const int64_t n = int64_t(a.size());
#pragma omp parallel
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
      std::memcpy(b.data() + lo, a.data() + lo, size_t(hi - lo) * sizeof(float));
    }
  }
  double check() override {
    double s = 0;
    for (float v : b) s += v;
    return s;
  }
};

struct HandFused : Case {
  std::vector<float> x, y;
  void (*fn)(const float*, float*, int64_t);
  HandFused(int64_t n, void (*f)(const float*, float*, int64_t)) : x(host_input(n, 1)), y(size_t(n), 0.0f), fn(f) {}
  void run() override { fn(x.data(), y.data(), int64_t(x.size())); }
  double check() override {
    double s = 0;
    for (float v : y) s += v;
    return s;
  }
};

struct HostToDevice : Case {
  std::vector<float> h;
  Shape shape;
  Array out;
  explicit HostToDevice(int64_t n) : h(host_input(n, 1)), shape({n}) {}
  void run() override { out = from_buffer(h.data(), shape, DType::F32).eval(); wait_cpu(); }
  double check() override { return checksum(out); }
};
struct DeviceToHost : Case {
  Array x;
  std::vector<float> h;
  explicit DeviceToHost(int64_t n) : x(input({n}, 1)) {}
  void run() override { h = x.to_vector<float>(); }
  double check() override {
    double s = 0;
    for (float v : h) s += v;
    return s;
  }
};

// Building one lazy op (no execution): the per-op cost of the front end.
struct LazyOp : Case {
  Array x;
  int64_t count;
  Array last;
  LazyOp(int64_t n, int64_t k) : x(input({n}, 1)), count(k) {}
  void run() override {
    for (int64_t i = 0; i < count; ++i) last = add(x, 1.0);
  }
  double check() override { return checksum(last); }
  double units() override { return double(count); }
};

// `ops` tiny dependent ops (alternating mul and add) and a host read of the result.
struct TinyChain : Case {
  Array x;
  int64_t ops;
  std::vector<float> h;
  TinyChain(int64_t n, int64_t k) : x(input({n}, 1)), ops(k) {}
  void run() override {
    Array y = x;
    for (int64_t i = 0; i < ops; ++i) y = (i % 2 == 0) ? mul(y, 1.0001) : add(y, 0.001);
    h = y.to_vector<float>();
  }
  double check() override {
    double s = 0;
    for (float v : h) s += v;
    return s;
  }
};

// Forward + backward of a tiny graph and a host read of the gradient.
struct TinyAutograd : Case {
  Array w, x;
  std::vector<float> h;
  explicit TinyAutograd(int64_t n) : w(input({n}, 1).require_grad()), x(input({n}, 2)) {}
  void run() override {
    Array loss = sum(add(tanh(mul(w, x)), w));
    Gradients g = loss.backward();
    h = w.grad(g).to_vector<float>();
  }
  double check() override {
    double s = 0;
    for (float v : h) s += v;
    return s;
  }
};

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

struct MlpStep : Case {
  Mlp model;
  optim::Adam opt;
  Array x, labels, loss;
  MlpStep(int64_t batch, int64_t in, int64_t hidden, int64_t out)
      : model(in, hidden, out), opt(model, {.lr = 1e-3}), x(input({batch, in}, 1)),
        labels(rem(arange(0, batch, 1, DType::I64), out).eval()) {}
  void run() override {
    loss = nn::cross_entropy(model.forward(x), labels);
    opt.step(loss.backward());
    wait_cpu();
  }
  double check() override { return loss.item<double>(); }
};

// Batch-1 (or small-batch) inference latency of the MLP above: forward only, result read back.
// With `captured`, the forward is an ember::capture_module recording (ember/capture.h), replayed
// on every run after the first: the host cost per op is gone.
struct MlpInfer : Case {
  Mlp model;
  Array x;
  std::vector<float> out;
  std::optional<CapturedFunction> captured;
  MlpInfer(int64_t batch, int64_t in, int64_t hidden, int64_t n_out, bool capture)
      : model(in, hidden, n_out), x(input({batch, in}, 1)) {
    model.eval();
    if (capture)
      captured = capture_module(model, [this](const std::vector<Array>& in) { return std::vector<Array>{model.forward(in[0])}; });
  }
  void run() override {
    NoGradGuard no_grad;
    out = (captured ? (*captured)({x})[0] : model.forward(x)).to_vector<float>();
  }
  double check() override {
    double s = 0;
    for (float v : out) s += v;
    return s;
  }
};

// Parameters set from the shared formula in the order of their (PyTorch) names, so both sides
// start from the same values: norm weights 1 + 0.1·u, everything else u / sqrt(last dim).
void set_params_by_name(nn::Module& m, int64_t seed) {
  std::vector<nn::NamedParam> ps = m.named_parameters();
  std::sort(ps.begin(), ps.end(), [](const nn::NamedParam& a, const nn::NamedParam& b) { return a.name < b.name; });
  for (nn::NamedParam& p : ps) {
    const Shape& s = p.param.array().shape();
    bool norm_weight = p.name.find("norm") != std::string::npos && p.name.ends_with("weight");
    Array v = norm_weight ? add(input(s, seed, 0.1), 1.0)
                          : input(s, seed, 1.0 / std::sqrt(double(s[s.rank() - 1])));
    p.param.set(v.eval());
    ++seed;
  }
}

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
    wait_cpu();
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
    opt.emplace(model, optim::AdamOptions{.lr = 1e-3});
    // token[b, t] = (131 b + 7 t + t^2 mod 11) mod vocab; the target is the next position's token.
    std::vector<int64_t> x(size_t(batch * seq)), y(x.size());
    auto tok = [&](int64_t b, int64_t t) { return (131 * b + 7 * t + (t * t) % 11) % vocab; };
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        x[size_t(b * seq + t)] = tok(b, t);
        y[size_t(b * seq + t)] = tok(b, t + 1);
      }
    tokens = from_vector(x, {batch, seq});
    targets = from_vector(y, {batch * seq});
  }
  void run() override {
    Array e = model.embed.forward(tokens);
    Array h = use_gru ? model.gru.forward(e).output : model.lstm.forward(e).output;
    loss = nn::cross_entropy(reshape(model.head.forward(h), {-1, vocab}), targets);
    opt->step(loss.backward());
    wait_cpu();
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
    wait_cpu();
  }
  double check() override { return checksum(out); }
};

std::unique_ptr<Case> make_case(const std::string& kind, const json& p) {
  auto n = [&] { return p.at("n").get<int64_t>(); };
  auto sh = [&](const char* key) { return shape_of(p.at(key)); };
  if (p.contains("fusion")) set_fusion_enabled(p.at("fusion").get<bool>());
  else set_fusion_enabled(true);
  if (kind == "tanh") { Array x = input({n()}, 1); return std::make_unique<Fn>([x] { return tanh(x); }); }
  if (kind == "mul") {
    Array a = input({n()}, 1), b = input({n()}, 2);
    return std::make_unique<Fn>([a, b] { return mul(a, b); });
  }
  if (kind == "matmul") {
    Array a = input(sh("a"), 1, 0.1), b = input(sh("b"), 2, 0.1);
    return std::make_unique<Fn>([a, b] { return matmul(a, b); });
  }
  if (kind == "matmul_epilogue") {
    Array a = input(sh("a"), 1, 0.1), b = input(sh("b"), 2, 0.1), bias = input({sh("b")[1]}, 3);
    return std::make_unique<Fn>([a, b, bias] { return gelu(add(relu(matmul(a, b)), bias)); });
  }
  if (kind == "sum") {
    Array x = input(sh("shape"), 1);
    int axis = p.at("axis").get<int>();
    return std::make_unique<Fn>([x, axis] { return sum(x, {axis}); });
  }
  if (kind == "argmin") {
    Array x = input(sh("shape"), 1);
    int axis = p.at("axis").get<int>();
    return std::make_unique<Fn>([x, axis] { return argmin(x, axis); });
  }
  if (kind == "softmax") {
    Array x = input(sh("shape"), 1, 4.0);
    int dim = p.at("dim").get<int>();
    return std::make_unique<Fn>([x, dim] { return softmax(x, dim); });
  }
  if (kind == "layer_norm") {
    Shape s = sh("shape");
    Array x = input(s, 1, 2.0), w = add(input({s[s.rank() - 1]}, 2, 0.1), 1.0).eval(),
          b = input({s[s.rank() - 1]}, 3, 0.1);
    return std::make_unique<Fn>([x, w, b] { return nn::layer_norm(x, 1, w, b, 1e-5); });
  }
  if (kind == "batch_norm_infer") {  // nn::BatchNorm2d in eval mode computes exactly this
    Shape s = sh("shape");
    const int64_t C = s[1];
    auto channel = [C](const Array& a) { return reshape(a, {1, C, 1, 1}).eval(); };
    Array x = input(s, 1, 2.0), w = channel(add(input({C}, 2, 0.1), 1.0)), b = channel(input({C}, 3, 0.1)),
          m = channel(input({C}, 5, 0.2)), v = channel(add(input({C}, 4, 0.5), 1.0));
    return std::make_unique<Fn>([x, w, b, m, v] { return nn::batch_norm_inference(x, m, v, w, b, 1e-5); });
  }
  if (kind == "conv2d") {
    Shape xs = sh("x"), ws = sh("w");
    Array x = input(xs, 1), w = input(ws, 2, 1.0 / std::sqrt(double(ws[1] * ws[2] * ws[3]))), b = input({ws[0]}, 3);
    Conv2dOptions o{.stride = p.at("stride").get<int64_t>(), .padding = p.at("pad").get<int64_t>()};
    return std::make_unique<Fn>([x, w, b, o] { return conv2d(x, w, b, o); });
  }
  if (kind == "max_pool2d") {
    Array x = input(sh("x"), 1);
    Pool2dOptions o{.kernel = p.at("k").get<int64_t>(), .stride = p.at("stride").get<int64_t>(),
                    .padding = p.at("pad").get<int64_t>()};
    return std::make_unique<Fn>([x, o] { return max_pool2d(x, o); });
  }
  if (kind == "gelu_prims") { Array x = input({n()}, 1, 3.0); return std::make_unique<Fn>([x] { return gelu_prims(x); }); }
  if (kind == "gelu_prims_grad") return std::make_unique<GeluGrad>(n());
  if (kind == "gelu") { Array x = input({n()}, 1, 3.0); return std::make_unique<Fn>([x] { return gelu(x); }); }
  if (kind == "chain10") { Array x = input({n()}, 1, 3.0); return std::make_unique<Fn>([x] { return chain10(x); }); }
  if (kind == "randn") {
    Shape s({n()});
    return std::make_unique<Fn>([s] { return normal(s, 0, 1, {.seed = 7}); });
  }
  if (kind == "rand") {
    Shape s({n()});
    return std::make_unique<Fn>([s] { return uniform(s, 0, 1, {.seed = 7}); });
  }
  if (kind == "to_device") return std::make_unique<HostToDevice>(n());
  if (kind == "to_host") return std::make_unique<DeviceToHost>(n());
  if (kind == "lazy_op") return std::make_unique<LazyOp>(n(), p.at("count").get<int64_t>());
  if (kind == "tiny_chain") return std::make_unique<TinyChain>(n(), p.at("ops").get<int64_t>());
  if (kind == "tiny_autograd") return std::make_unique<TinyAutograd>(n());
  if (kind == "mlp_step")
    return std::make_unique<MlpStep>(p.at("batch").get<int64_t>(), p.at("in").get<int64_t>(),
                                     p.at("hidden").get<int64_t>(), p.at("out").get<int64_t>());
  if (kind == "mlp_infer")
    return std::make_unique<MlpInfer>(p.at("batch").get<int64_t>(), p.at("in").get<int64_t>(),
                                      p.at("hidden").get<int64_t>(), p.at("out").get<int64_t>(),
                                      p.value("captured", 0) != 0);
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
                                     p.at("ffn").get<int64_t>());
  // Machine limits and hand-written references (no peer).
  if (kind == "memcpy") return std::make_unique<MemCopy>(n());
  if (kind == "handfused_gelu_vec") return std::make_unique<HandFused>(n(), handfused_vec::gelu);
  if (kind == "handfused_gelu_scalar") return std::make_unique<HandFused>(n(), handfused_scalar::gelu);
  if (kind == "handfused_chain10_vec") return std::make_unique<HandFused>(n(), handfused_vec::chain10);
  if (kind == "handfused_chain10_scalar") return std::make_unique<HandFused>(n(), handfused_scalar::chain10);
  throw Error("unknown workload kind '" + kind + "'");
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::unique_ptr<Case> c;
  std::string line;
  while (std::getline(std::cin, line)) {
    json reply;
    try {
      json req = json::parse(line);
      std::string cmd = req.at("cmd");
      if (cmd == "quit") break;
      if (cmd == "info") {
        reply = {{"threads", omp_get_max_threads()}, {"fusion", fusion_enabled()},
                 {"version", std::string(EMBER_VERSION_STRING)}};
      } else if (cmd == "setup") {
        c.reset();
        c = make_case(req.at("kind"), req.value("p", json::object()));
        wait_cpu();  // inputs are ready before the first rep
        reply = {{"ok", true}};
      } else if (cmd == "run") {
        if (!c) throw Error("run before setup");
        int reps = req.value("reps", 1);
        std::vector<double> times;
        ExecutionStats before{};
        for (int r = 0; r < reps; ++r) {
          before = execution_stats();
          auto t0 = std::chrono::steady_clock::now();
          c->run();
          auto t1 = std::chrono::steady_clock::now();
          times.push_back(std::chrono::duration<double>(t1 - t0).count() / c->units());
        }
        ExecutionStats after = execution_stats();
        reply = {{"times", times},
                 {"kernels", after.kernels - before.kernels},
                 {"library_calls", after.library_calls - before.library_calls}};
      } else if (cmd == "settle") {
        settle_tier1();
        reply = {{"ok", true}};
      } else if (cmd == "check") {
        if (!c) throw Error("check before setup");
        reply = {{"checksum", c->check()}};
      } else {
        throw Error("unknown command '" + cmd + "'");
      }
    } catch (const std::exception& e) {
      reply = {{"ok", false}, {"error", e.what()}};
    }
    std::cout << reply.dump() << std::endl;
  }
  return 0;
}
