// The `ember` command:
//   ember train fashion-mnist [--model cnn|mlp] [--epochs N] [--batch-size B] [--lr X]
//         [--device cpu|reference|vulkan|cuda] [--threads N] [--workers N] [--out DIR] [--resume]
//         [--seed S] [--limit N] [--plain] [--allow-config-change] [--precision f32|bf16|f16] [--nproc N]
//   (under mpirun/srun, or with --nproc: data parallel, src/cli/distributed.cpp)
//   ember eval --checkpoint PATH [--device D] [--batch-size B]
//   ember info
//   ember onnx-check / onnx-run: src/cli/onnx_commands.cpp
// Bad arguments (unknown options, empty or option-like values, values out of range, an option
// given twice) print a usage message and exit with code 2; runtime failures exit with 1.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/device_kinds.h"
#include "runtime/program_disk_cache.h"
#include "runtime/registry.h"
#include "cli/distributed.h"
#include "cli/models.h"
#include "cli/onnx_commands.h"
#include "ember/dist/sampler.h"

using namespace ember;
namespace fs = std::filesystem;

namespace {

const char* kUsage =
    "usage: ember train fashion-mnist [--model cnn|mlp] [--epochs N] [--batch-size B] [--lr X]\n"
    "                                 [--device cpu|reference|vulkan|cuda] [--threads N] [--workers N]\n"
    "                                 [--out DIR] [--resume] [--seed S] [--limit N] [--plain]\n"
    "                                 [--allow-config-change] [--precision f32|bf16|f16]\n"
    "                                 [--nproc N]\n"
    "       ember eval --checkpoint PATH [--device D] [--batch-size B]\n"
    "       ember info\n"
    "       ember cache [info|clear]   (the compiled-kernel cache: where, how big; empty it)\n"
    "       ember --help | --version\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --name value pairs and --flags after the positional arguments.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;
  std::map<std::string, bool> flags;
};

Args parse(int argc, char** argv, int first, const std::vector<std::string>& valued, const std::vector<std::string>& flags) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (a.flags.count(name) || a.values.count(name)) throw UsageError("--" + name + " is given twice");
    if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
      if (has_value) throw UsageError("--" + name + " takes no value");
      a.flags[name] = true;
    } else if (std::find(valued.begin(), valued.end(), name) != valued.end()) {
      if (!has_value) {
        if (i + 1 >= argc) throw UsageError("--" + name + " needs a value");
        value = argv[++i];
      }
      // "--out --plain" is a forgotten value, not a folder named --plain; "--out=" is no folder.
      if (value.empty()) throw UsageError("--" + name + " needs a value (got an empty one)");
      if (value.rfind("--", 0) == 0) throw UsageError("--" + name + " needs a value (got the option " + value + ")");
      a.values[name] = value;
    } else {
      throw UsageError("unknown option --" + name);
    }
  }
  return a;
}

int64_t to_int(const Args& a, const std::string& name, int64_t fallback, int64_t lo, int64_t hi) {
  auto it = a.values.find(name);
  if (it == a.values.end()) return fallback;
  try {
    size_t used = 0;
    long long v = std::stoll(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("");
    if (v < lo || v > hi) throw std::out_of_range("");
    return v;
  } catch (const std::out_of_range&) {  // also what stoll throws for numbers beyond int64
    throw UsageError("--" + name + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) + ", got " +
                     it->second);
  } catch (const std::exception&) {
    throw UsageError("--" + name + " expects an integer, got '" + it->second + "'");
  }
}

double to_double(const Args& a, const std::string& name, double fallback) {
  auto it = a.values.find(name);
  if (it == a.values.end()) return fallback;
  try {
    size_t used = 0;
    double v = std::stod(it->second, &used);
    if (used != it->second.size() || !(v > 0) || v > 10) throw std::invalid_argument("");
    return v;
  } catch (const std::exception&) {
    throw UsageError("--" + name + " expects a positive number (at most 10), got '" + it->second + "'");
  }
}

// A device the user asked for, checked: built, present, usable.
Device choose_device(const Args& a) {
  std::string text = a.values.count("device") ? a.values.at("device") : "cpu";
  Device d;
  try {
    d = Device::parse(text);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  std::string why;
  Backend* b = Backend::try_get(d.kind, &why);
  if (!b) throw Error("device " + d.str() + " is not available: " + (why.empty() ? "its backend plugin was not found" : why));
  if (d.index >= b->device_count()) {
    // Named as typed: Device::str() writes cpu:N as plain "cpu".
    std::string kind = d.str().substr(0, d.str().find(':'));
    int n = b->device_count();
    std::string have = n == 0 ? "no devices" : n == 1 ? "1 device (" + kind + ":0)"
                                                      : std::to_string(n) + " devices (" + kind + ":0 to " + kind + ":" + std::to_string(n - 1) + ")";
    throw Error("device " + text + " is not available: the " + kind + " backend has " + have);
  }
  return d;
}

// Runs this program again with OMP_NUM_THREADS set (the OpenMP pool reads it at start-up) and,
// unless set, a short bounded spin before OpenMP threads sleep (GOMP_SPINCOUNT=30000, about
// 10-30 us). Measured on 2 cores (`OMP_NUM_THREADS=2 GOMP_SPINCOUNT=N ember train fashion-mnist
// --model mlp --epochs 1 --threads 2`, 2026-11-30): N = 0 (passive) 21,800 images/s, 3000 28,000,
// 30000 31,100, 300000 (libgomp's default) 31,400; the CNN 3,700-3,800 at 0 against 4,150-4,300 at
// the default. Long spins cost most on a busy machine (threads spinning while others need the core).
void apply_threads(const Args& a, char** argv) {
  if (!a.values.count("threads")) return;
  int64_t n = to_int(a, "threads", 0, 1, 1024);
  std::string want = std::to_string(n);
  const char* have = std::getenv("OMP_NUM_THREADS");
  if (have && want == have) return;
  ::setenv("OMP_NUM_THREADS", want.c_str(), 1);
  ::setenv("GOMP_SPINCOUNT", "30000", 0);
  ::execv("/proc/self/exe", argv);
  std::cerr << "ember: warning: could not restart with " << n << " threads; using the default\n";
}

data::FashionMnistOptions data_options() { return {}; }

struct ModelBox {
  std::unique_ptr<cli::FashionCnn> cnn;
  std::unique_ptr<cli::FashionMlp> mlp;
  nn::Module& module() { return cnn ? static_cast<nn::Module&>(*cnn) : *mlp; }
};
ModelBox make_model(const std::string& kind) {
  ModelBox m;
  if (kind == "cnn" || kind == "fashion-cnn") m.cnn = std::make_unique<cli::FashionCnn>();
  else if (kind == "mlp" || kind == "fashion-mlp") m.mlp = std::make_unique<cli::FashionMlp>();
  else throw UsageError("--model must be cnn or mlp, got '" + kind + "'");
  return m;
}

// --precision: f32 (default), bf16 (autocast) or f16 (autocast with loss scaling).
DType precision_arg(const Args& a) {
  auto it = a.values.find("precision");
  if (it == a.values.end()) return DType::F32;
  const std::string& p = it->second;
  if (p == "f32" || p == "float32") return DType::F32;
  if (p == "bf16" || p == "bfloat16") return DType::BF16;
  if (p == "f16" || p == "float16") return DType::F16;
  throw UsageError("--precision must be f32, bf16 or f16, got '" + p + "'");
}

// Fashion-MNIST's mean and standard deviation over the training pixels.
const std::vector<float> kMean = {0.2860f}, kStd = {0.3530f};

int cmd_train(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {"model", "epochs", "batch-size", "lr", "device", "threads", "workers", "out", "seed", "limit", "precision", "nproc"},
                 {"resume", "plain", "allow-config-change"});
  if (a.positional.size() != 1) throw UsageError("train: name one dataset (fashion-mnist)");
  if (a.positional[0] != "fashion-mnist") throw UsageError("train: unknown dataset '" + a.positional[0] + "' (known: fashion-mnist)");
  // Several processes: --nproc N runs this command under mpirun; under a launcher, join its group.
  int64_t nproc = to_int(a, "nproc", 1, 1, 4096);
  int world = cli::launched_world_size();
  if (nproc > 1 && world == 1) cli::relaunch_under_mpirun(int(nproc), argc, argv);
  if (a.values.count("nproc") && world != nproc)
    throw UsageError("--nproc " + std::to_string(nproc) + " under a launcher that started " + std::to_string(world) + " processes");
  apply_threads(a, argv);
  std::string model_kind = a.values.count("model") ? a.values.at("model") : "mlp";
  ModelBox box = make_model(model_kind);
  bool cnn = box.cnn != nullptr;
  int64_t epochs = to_int(a, "epochs", cnn ? 5 : 3, 1, 10000);  // CNN: 91.6 % after 5 (docs/training.md)
  int64_t batch = to_int(a, "batch-size", 64, 1, 65536);
  double lr = to_double(a, "lr", 1e-3);
  int64_t workers = to_int(a, "workers", 2, 0, 64);
  uint64_t seed = uint64_t(to_int(a, "seed", 1, 0, INT64_MAX));
  int64_t limit = to_int(a, "limit", 0, 1, INT64_MAX);  // absent: the whole training set
  std::string out = a.values.count("out") ? a.values.at("out") : "runs/fashion-" + std::string(cnn ? "cnn" : "mlp");
  Device device = choose_device(a);
  DType precision = precision_arg(a);
  std::unique_ptr<dist::Communicator> comm = world > 1 ? cli::join_mpi(device) : nullptr;
  const int rank = comm ? comm->rank() : 0, ranks = comm ? comm->size() : 1;
  if (batch % ranks != 0)
    throw UsageError("--batch-size " + std::to_string(batch) + " must be a multiple of the " + std::to_string(ranks) +
                     " processes (it is the global batch; each process takes batch / processes)");

  manual_seed(seed);  // parameter initialization
  nn::Module& model = box.module();
  model.to(device);
  auto train_all = data::FashionMnist::train(data_options());
  auto test = data::FashionMnist::test(data_options());
  data::DatasetPtr<data::LabeledImage> train_ds = train_all;
  if (limit > 0) train_ds = data::take(train_all, size_t(limit));
  auto train_norm = data::augment(train_ds, {data::normalize(kMean, kStd)}, seed);
  auto test_norm = data::augment(test, {data::normalize(kMean, kStd)}, seed);
  // The loaders of one process. Data parallel (below): the Learner deals them over the ranks
  // (shard_loaders): rank r trains on its dist::shard of each epoch's shuffle (batch / ranks) and
  // validates on test items r, r + ranks, ... (no padding: the Learner weighs ranks by items).
  data::DataLoader train_loader(train_norm, {.batch_size = size_t(batch), .shuffle = true,
                                             .workers = size_t(workers), .seed = seed, .device = device});
  data::DataLoader valid_loader(test_norm, {.batch_size = 500, .workers = size_t(workers), .device = device});

  optim::Adam opt(model, {.lr = lr});
  optim::CosineAnnealingLr sched(opt, {.t_max = epochs * int64_t(train_loader.size()), .eta_min = lr * 0.05});
  std::map<std::string, std::string> config = {
      {"dataset", "fashion-mnist"}, {"model", cnn ? "cnn" : "mlp"},     {"epochs", std::to_string(epochs)},
      {"batch_size", std::to_string(batch)}, {"lr", a.values.count("lr") ? a.values.at("lr") : "0.001"},
      {"device", device.str()},     {"seed", std::to_string(seed)},     {"train_items", std::to_string(train_ds->size())},
      {"parameters", std::to_string(model.num_params())}, {"ember", version()},
      {"limit", limit > 0 ? std::to_string(limit) : "none"}};
  if (rank == 0)
    // Two lines, so that each fits an 80-column terminal (as the dashboard's lines do).
    std::cout << "ember train fashion-mnist: " << (cnn ? "cnn" : "mlp") << ", " << model.num_params() << " parameters, "
            << train_ds->size() << " training images\n  " << epochs << " epoch(s), batch " << batch << ", lr " << lr
            << ", " << device.str() << ", " << dtype_name(precision)
            << (ranks > 1 ? ", " + std::to_string(ranks) + " processes (MPI)" : "") << "\n";
  train::Learner learner = cnn ? train::Learner(*box.cnn, opt) : train::Learner(*box.mlp, opt);
  learner.metrics({train::loss(), train::accuracy()})
      .checkpoints(out)
      .epochs(epochs)
      .seed(seed)
      .scheduler(sched, true)
      .resume(a.flags.count("resume") > 0)
      .allow_config_change(a.flags.count("allow-config-change") > 0)
      .title("Fashion-MNIST " + std::string(cnn ? "CNN" : "MLP"))
      .config(config)
      .precision(precision);
  if (a.flags.count("plain")) learner.dashboard(train::DashboardMode::Plain);
  if (comm) learner.data_parallel(*comm).shard_loaders();
  train::Report rep = learner.fit(train_loader, valid_loader);
  if (rank == 0) std::cout << "test accuracy " << rep.last("valid_accuracy") * 100 << "% after " << rep.epochs_done << " epoch(s)\n";
  return 0;
}

int cmd_eval(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {"checkpoint", "device", "batch-size"}, {});
  if (!a.positional.empty()) throw UsageError("eval: unexpected argument '" + a.positional[0] + "'");
  if (!a.values.count("checkpoint")) throw UsageError("eval: --checkpoint PATH is required");
  std::string path = a.values.at("checkpoint");
  int64_t batch = to_int(a, "batch-size", 500, 1, 65536);
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error("eval: no checkpoint at " + path);
  // The loader reads whole files: a folder or a FIFO (which would block) is refused here.
  if (!fs::is_regular_file(st))
    throw Error("eval: " + path + " is not a regular file" + (fs::is_directory(st) ? " (a folder; name the .safetensors file in it)" : ""));
  Device device = choose_device(a);
  io::SafetensorsFile file = io::load_file(path);
  auto it = file.metadata.find("ember.module");
  std::string kind = it == file.metadata.end() ? "" : it->second;
  if (kind != "fashion-cnn" && kind != "fashion-mlp")
    throw Error("eval: " + path + " holds a '" + kind + "' model; ember eval knows fashion-cnn and fashion-mlp checkpoints");
  ModelBox box = make_model(kind);
  nn::Module& model = box.module();
  load(model, path);
  model.to(device);
  auto test = data::augment(data::FashionMnist::test(data_options()), {data::normalize(kMean, kStd)}, 0);
  data::DataLoader loader(test, {.batch_size = size_t(batch), .workers = 2, .device = device});
  optim::Sgd unused(model, {.lr = 0});
  train::Learner learner = box.cnn ? train::Learner(*box.cnn, unused) : train::Learner(*box.mlp, unused);
  learner.metrics({train::loss(), train::accuracy(), train::top_k_accuracy(3)});
  auto res = learner.evaluate(loader);
  std::cout << "checkpoint " << path << " (" << kind << ", " << model.num_params() << " parameters) on " << test->size()
            << " Fashion-MNIST test images:\n";
  std::cout << "  loss " << res["loss"] << "\n  accuracy " << res["accuracy"] * 100 << "%\n  top-3 accuracy "
            << res["top3_accuracy"] * 100 << "%\n";
  return 0;
}

std::string mib(uint64_t bytes) {
  char s[32];
  std::snprintf(s, sizeof s, "%.1f MiB", double(bytes) / (1 << 20));
  return s;
}

// "~/.cache/ember/kernels: 812 entries, 41.3 MiB of at most 1024.0 MiB", or why there is none.
std::string cache_line() {
  const program_disk_cache::Summary s = program_disk_cache::summary();
  if (s.max_bytes == 0) return "off (EMBER_CACHE_MAX_BYTES=0)";
  if (s.folder.empty())
    return s.tried.empty() ? "none (set EMBER_CACHE_DIR, XDG_CACHE_HOME or HOME)"
                           : "none (" + s.tried + " cannot be created or written; set EMBER_CACHE_DIR)";
  std::string line = s.folder + ": " + std::to_string(s.entries) + " entries, " + mib(s.entry_bytes) + " of at most " +
                     mib(s.max_bytes);
  if (s.legacy_files)
    line += " (and " + std::to_string(s.legacy_files) + " files of older Ember versions, " + mib(s.legacy_bytes) +
            ": `ember cache clear` removes them)";
  return line;
}

// ember cache [info|clear]: the core's compiled-program cache (src/runtime/program_disk_cache.h).
int cmd_cache(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {});
  if (a.positional.size() > 1) throw UsageError("cache: unexpected argument '" + a.positional[1] + "'");
  const std::string what = a.positional.empty() ? "info" : a.positional[0];
  if (what == "info") {
    std::cout << "compiled-kernel cache: " << cache_line() << "\n";
    return 0;
  }
  if (what != "clear") throw UsageError("cache: unknown action '" + what + "' (info or clear)");
  const std::string dir = program_disk_cache::folder();
  if (dir.empty()) {
    std::cout << "compiled-kernel cache: " << cache_line() << "; nothing to clear\n";
    return 0;
  }
  const uint64_t freed = program_disk_cache::clear();
  std::cout << "cleared " << dir << ": " << mib(freed) << " freed\n";
  return 0;
}

int cmd_info(int argc, char** argv) {
  Args a = parse(argc, argv, 2, {}, {});
  if (!a.positional.empty()) throw UsageError("info: unexpected argument '" + a.positional[0] + "'");
  std::cout << "Ember " << version() << " (headers " << EMBER_VERSION_STRING << ", backend ABI " << backend_abi_version()
            << ")\n";
  std::cout << "build: " <<
#ifdef NDEBUG
      "release"
#else
      "debug"
#endif
            << ", " << __VERSION__ << ", C++ " << __cplusplus << "\n";
  std::cout << "backends:\n";
  for (DeviceKind k : device_kinds()) {  // the well-known kinds and every plugin file found
    std::string why;
    Backend* b = Backend::try_get(k, &why);
    std::string name = Device{k, 0}.str();
    name = name.substr(0, name.find(':'));
    if (!b) {
      std::cout << "  " << name << ": not available (" << (why.empty() ? "plugin not found" : why) << ")\n";
      continue;
    }
    std::cout << "  " << name << ": " << b->device_count() << " device(s)\n";
    for (int i = 0; i < b->device_count(); ++i) {
      const ember_device_properties& p = b->properties(i);
      std::string dtypes;
      for (int i = 0; i < kNumDTypes; ++i)
        if (DType dt = DType(i); p.dtypes & EMBER_DTYPE_BIT(i)) {
          if (!dtypes.empty()) dtypes.push_back(' ');
          dtypes.append(dtype_name(dt));
        }
      std::cout << "    " << Device{k, i}.str() << ": " << p.name << "\n      " << p.kind << ", "
                << (p.async ? "asynchronous" : "synchronous") << " queue, memory " << (p.memory_total >> 20) << " MiB"
                << (p.memory_free ? " (" : "") << (p.memory_free ? std::to_string(p.memory_free >> 20) : std::string())
                << (p.memory_free ? " MiB free)" : "") << ", largest buffer " << (p.max_buffer_bytes >> 20) << " MiB"
                << (p.max_binding_bytes && p.max_binding_bytes < p.max_buffer_bytes
                        ? ", one binding " + std::to_string((p.max_binding_bytes + (1 << 19)) >> 20) + " MiB"
                        : std::string())
                << ", " << p.index_bits << "-bit indexing" << (p.host_visible ? ", host-visible memory" : "")
                << "\n      dtypes: " << dtypes << "\n";
    }
  }
  std::cout << "devices:";
  for (const Device& d : available_devices()) std::cout << " " << d.str();
  std::cout << "\n";
  std::string dir = data::FashionMnist::resolve_dir({});
  std::cout << "fashion-mnist data: " << dir
            << (fs::exists(dir + "/train-images-idx3-ubyte.gz") ? " (found)" : " (missing: install dataset-fashion-mnist)")
            << "\n";
  std::cout << "compiled-kernel cache: " << cache_line() << "\n";
  const char* omp = std::getenv("OMP_NUM_THREADS");
  std::cout << "threads: " << (omp ? omp : "default (all cores)") << " (hardware: " << std::thread::hardware_concurrency()
            << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw UsageError("no command given");
    std::string cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::cout << kUsage << cli::kOnnxUsage;
      return 0;
    }
    if (cmd == "--version") {
      std::cout << "ember " << version() << "\n";
      return 0;
    }
    if (cmd == "train") return cmd_train(argc, argv);
    if (cmd == "eval") return cmd_eval(argc, argv);
    if (cmd == "info") return cmd_info(argc, argv);
    if (cmd == "cache") return cmd_cache(argc, argv);
    if (cmd == "onnx-check") return cli::cmd_onnx_check(argc, argv);
    if (cmd == "onnx-run") return cli::cmd_onnx_run(argc, argv);
    throw UsageError("unknown command '" + cmd + "'");
  } catch (const UsageError& e) {
    std::cerr << "ember: " << e.what() << "\n" << kUsage << cli::kOnnxUsage;
    return 2;
  } catch (const std::invalid_argument& e) {  // the onnx commands' usage errors
    std::cerr << "ember: " << e.what() << "\n" << kUsage << cli::kOnnxUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ember: error: " << e.what() << "\n";
    return 1;
  }
}
