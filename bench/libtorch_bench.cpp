// libtorch (PyTorch's C++ API, Debian's libtorch-dev) as a benchmark peer for the workloads where
// Python's own overhead would flatter Ember: batch-1 MLP inference and per-op dispatch. Speaks the
// line protocol of ember_bench.cpp (setup / run / check / info / quit) and computes the same inputs
// from the same integer formula, so bench/run can alternate it with Ember and compare checksums.
// Threads: the process's OMP_NUM_THREADS (at::set_num_threads from it).
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using json = nlohmann::json;

namespace {

torch::Tensor input(std::vector<int64_t> shape, int64_t seed, double scale = 1.0) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  torch::Tensor i = torch::arange(n, torch::kInt64);
  torch::Tensor x = ((i * 7919 + seed * 104729) % 1000).to(torch::kFloat32) / 500.0 - 1.0;
  if (scale != 1.0) x = x * scale;
  return x.reshape(shape).contiguous();
}

double checksum(const torch::Tensor& t) { return t.to(torch::kFloat64).sum().item<double>(); }

struct Case {
  virtual ~Case() = default;
  virtual void run() = 0;
  virtual double check() = 0;
  virtual double units() { return 1; }
};

// The MLP of ember_bench (same deterministic weights), forward only, result copied to the host.
struct MlpInfer : Case {
  std::vector<torch::Tensor> w, b;
  torch::Tensor x;
  std::vector<float> out;
  MlpInfer(int64_t batch, int64_t in, int64_t hidden, int64_t n_out) {
    int64_t dims[3][2] = {{in, hidden}, {hidden, hidden}, {hidden, n_out}};
    int64_t seed = 10;
    for (auto& d : dims) {
      double s = 1.0 / std::sqrt(double(d[0]));
      w.push_back(input({d[1], d[0]}, seed++, s));
      b.push_back(input({d[1]}, seed++, s));
    }
    x = input({batch, in}, 1);
  }
  void run() override {
    torch::NoGradGuard no_grad;
    torch::Tensor h = torch::relu(torch::linear(x, w[0], b[0]));
    h = torch::relu(torch::linear(h, w[1], b[1]));
    torch::Tensor y = torch::linear(h, w[2], b[2]).contiguous();
    out.assign(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
  }
  double check() override {
    double s = 0;
    for (float v : out) s += v;
    return s;
  }
};

// 100 tiny dependent ops and a host read (ember_bench's tiny_chain).
struct TinyChain : Case {
  torch::Tensor x;
  int64_t ops;
  std::vector<float> h;
  TinyChain(int64_t n, int64_t ops_) : x(input({n}, 1)), ops(ops_) {}
  void run() override {
    torch::NoGradGuard no_grad;
    torch::Tensor y = x;
    for (int64_t i = 0; i < ops; ++i) y = i % 2 == 0 ? y * 1.0001 : y + 0.001;
    h.assign(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
  }
  double check() override {
    double s = 0;
    for (float v : h) s += v;
    return s;
  }
};

// One eager op on a tiny tensor (the per-op cost Ember's lazy op is compared with).
struct OneOp : Case {
  torch::Tensor x, last;
  int64_t count;
  OneOp(int64_t n, int64_t c) : x(input({n}, 1)), count(c) {}
  void run() override {
    torch::NoGradGuard no_grad;
    for (int64_t i = 0; i < count; ++i) last = x + 1.0;
  }
  double check() override { return checksum(last); }
  double units() override { return double(count); }
};

std::unique_ptr<Case> make_case(const std::string& kind, const json& p) {
  if (kind == "mlp_infer")
    return std::make_unique<MlpInfer>(p.at("batch").get<int64_t>(), p.at("in").get<int64_t>(),
                                      p.at("hidden").get<int64_t>(), p.at("out").get<int64_t>());
  if (kind == "tiny_chain") return std::make_unique<TinyChain>(p.at("n").get<int64_t>(), p.at("ops").get<int64_t>());
  if (kind == "lazy_op") return std::make_unique<OneOp>(p.at("n").get<int64_t>(), p.at("count").get<int64_t>());
  throw std::runtime_error("no libtorch version of workload kind '" + kind + "'");
}

}  // namespace

int main() {
  if (const char* t = std::getenv("OMP_NUM_THREADS")) at::set_num_threads(std::atoi(t));
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
        reply = {{"threads", at::get_num_threads()}, {"version", std::string(TORCH_VERSION)}};
      } else if (cmd == "setup") {
        c.reset();
        c = make_case(req.at("kind"), req.value("p", json::object()));
        reply = {{"ok", true}};
      } else if (cmd == "run") {
        if (!c) throw std::runtime_error("run before setup");
        std::vector<double> times;
        for (int r = 0; r < req.value("reps", 1); ++r) {
          auto t0 = std::chrono::steady_clock::now();
          c->run();
          times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / c->units());
        }
        reply = {{"times", times}};
      } else if (cmd == "check") {
        if (!c) throw std::runtime_error("check before setup");
        reply = {{"checksum", c->check()}};
      } else {
        throw std::runtime_error("unknown command '" + cmd + "'");
      }
    } catch (const std::exception& e) {
      reply = {{"ok", false}, {"error", e.what()}};
    }
    std::cout << reply.dump() << std::endl;
  }
  return 0;
}
