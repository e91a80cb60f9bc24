// Ember's side of the benchmark suite (bench/run drives it; bench/torch_bench.py is the peer).
//
// A line protocol on stdin/stdout, one JSON object per line, so the runner can alternate Ember and
// PyTorch on the same workload without restarting either process:
//   {"cmd":"setup","kind":"tanh","p":{"n":16777216}}  -> {"ok":true} | {"ok":false,"error":...}
//   {"cmd":"run","reps":3}   -> {"times":[seconds per rep...],"kernels":k,"library_calls":l}
//                               (k, l: kernels and library calls of the last rep)
//   {"cmd":"settle"}         -> {"ok":true} once no tier-1 kernel is compiling in the background
//   {"cmd":"check"}          -> {"checksum":x}  (a number both sides compute from the same inputs)
//   {"cmd":"info"}           -> {"threads":..,"fusion":..,"version":..,"device":..,"device_available":..}
//   {"cmd":"quit"}
// Every rep is synchronous: it ends with a host read, or ember::eval followed by a wait for the
// device's queue (see wait_device); EMBER_BENCH_DEVICE picks the device (bench_case.h). Inputs
// come from an integer formula both sides evaluate exactly (values ((i * 7919 + seed * 104729)
// mod 1000) / 500 - 1), so checksums can be compared.
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

#include "bench_case.h"
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
using namespace ember_bench;

namespace {


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

struct Fn : Case {
  std::function<Array()> f;
  Array out;
  explicit Fn(std::function<Array()> fn) : f(std::move(fn)) {}
  void run() override { out = f(); out.eval(); wait_device(); }
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
    wait_device();
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
  void run() override { out = from_buffer(h.data(), shape, DType::F32, bench_device()).eval(); wait_device(); }
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




std::unique_ptr<Case> make_case(const std::string& kind, const json& p) {
  auto n = [&] { return p.at("n").get<int64_t>(); };
  auto sh = [&](const char* key) { return shape_of(p.at(key)); };
  if (p.contains("fusion")) set_fusion_enabled(p.at("fusion").get<bool>());
  else set_fusion_enabled(true);
  if (std::unique_ptr<Case> model = make_model_case(kind, p)) return model;
  if (kind == "tanh") { Array x = input({n()}, 1); return std::make_unique<Fn>([x] { return tanh(x); }); }
  if (kind == "mul") {
    Array a = input({n()}, 1), b = input({n()}, 2);
    return std::make_unique<Fn>([a, b] { return mul(a, b); });
  }
  if (kind == "matmul") {
    Array a = input(sh("a"), 1, 0.1), b = input(sh("b"), 2, 0.1);
    if (p.value("transpose_b", 0))  // b given as [N, K] and read transposed (a linear layer's weight)
      return std::make_unique<Fn>([a, b] { return matmul(a, transpose(b, 0, 1)); });
    if (p.value("transpose_a", 0))  // a given as [K, M] and read transposed (a weight gradient's x^T dy)
      return std::make_unique<Fn>([a, b] { return matmul(transpose(a, 0, 1), b); });
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
  if (kind == "max_pool2d_backward") {  // the gradient alone (bench/ab; not a suite row)
    Array x = input(sh("x"), 1);
    Pool2dOptions o{.kernel = p.at("k").get<int64_t>(), .stride = p.at("stride").get<int64_t>(),
                    .padding = p.at("pad").get<int64_t>()};
    Array dy = input(max_pool2d(x, o).shape(), 2);
    return std::make_unique<Fn>([x, dy, o] { return max_pool2d_backward(dy, x, o); });
  }
  if (kind == "gelu_prims") { Array x = input({n()}, 1, 3.0); return std::make_unique<Fn>([x] { return gelu_prims(x); }); }
  if (kind == "gelu_prims_grad") return std::make_unique<GeluGrad>(n());
  if (kind == "gelu") { Array x = input({n()}, 1, 3.0); return std::make_unique<Fn>([x] { return gelu(x); }); }
  if (kind == "chain10") { Array x = input({n()}, 1, 3.0); return std::make_unique<Fn>([x] { return chain10(x); }); }
  if (kind == "randn") {
    Shape s({n()});
    return std::make_unique<Fn>([s] { return normal(s, 0, 1, {.seed = 7, .device = bench_device()}); });
  }
  if (kind == "rand") {
    Shape s({n()});
    return std::make_unique<Fn>([s] { return uniform(s, 0, 1, {.seed = 7, .device = bench_device()}); });
  }
  if (kind == "to_device") return std::make_unique<HostToDevice>(n());
  if (kind == "to_host") return std::make_unique<DeviceToHost>(n());
  if (kind == "lazy_op") return std::make_unique<LazyOp>(n(), p.at("count").get<int64_t>());
  if (kind == "tiny_chain") return std::make_unique<TinyChain>(n(), p.at("ops").get<int64_t>());
  if (kind == "tiny_autograd") return std::make_unique<TinyAutograd>(n());
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
                 {"version", std::string(EMBER_VERSION_STRING)}, {"device", bench_device().str()},
                 {"device_available", bench_device().available()}};
      } else if (cmd == "setup") {
        c.reset();
        c = make_case(req.at("kind"), req.value("p", json::object()));
        wait_device();  // inputs are ready before the first rep
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
