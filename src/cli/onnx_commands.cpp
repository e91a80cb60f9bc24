// The ONNX commands of the `ember` CLI:
//   ember onnx-check MODEL.onnx
//     lists the model's operators with their count, the opsets, and whether Ember supports each;
//     exits with 1 when one is unsupported.
//   ember onnx-run MODEL.onnx --input name=file.pb|file.npy ... [--device D] [--output-dir DIR]
//                  [--output-format pb|npy] [--compare DIR] [--repeat N [--eager]]
//     runs the model (inputs: serialized TensorProto files, or NumPy .npy files by extension),
//     prints each output's shape and dtype and the run time; --output-dir writes output_<i>.pb
//     (or .npy), --compare checks against the output_<i>.pb (else .npy) files in DIR (rtol 1e-3,
//     atol 1e-7, as the ONNX test runner) and exits with 1 on a mismatch.
//     --repeat N times N more runs of the captured forward (ember/capture.h; --eager: the eager one).
// Without ONNX support in the build (libonnx-dev missing) both say so and exit with 1.
#include "cli/onnx_commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ember/ember.h"
#include "ember/io/npy.h"
#ifdef EMBER_HAVE_ONNX
#include "ember/onnx/onnx.h"
#endif

namespace ember::cli {

const char* kOnnxUsage =
    "       ember onnx-check MODEL.onnx\n"
    "       ember onnx-run MODEL.onnx --input name=file.pb|file.npy ... [--device D] [--output-dir DIR]\n"
    "                      [--output-format pb|npy] [--compare DIR] [--repeat N [--eager]]\n";

#ifndef EMBER_HAVE_ONNX

int cmd_onnx_check(int, char**) {
  std::cerr << "ember: this build has no ONNX support (install libonnx-dev and libprotobuf-dev, then rebuild)\n";
  return 1;
}
namespace {
bool is_npy(const std::string& path) { return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0; }
}  // namespace

int cmd_onnx_run(int argc, char** argv) { return cmd_onnx_check(argc, argv); }

#else

namespace {

// One output against its expected value: "" when they match, else the reason.
std::string compare(const Array& got, const Array& want) {
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtype_name(got.dtype())) + ", expected " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape()) return "shape " + got.shape().str() + ", expected " + want.shape().str();
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] || std::fabs(g[i] - w[i]) <= 1e-7 + 1e-3 * std::fabs(w[i]);
    if (!ok) return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + ", expected " + std::to_string(w[i]);
  }
  return "";
}

}  // namespace

int cmd_onnx_check(int argc, char** argv) {
  if (argc != 3 || std::string(argv[2]).rfind("--", 0) == 0) throw std::invalid_argument("onnx-check takes one MODEL.onnx");
  const std::string path = argv[2];
  // Loaded without the support check, so that every operator is listed, supported or not.
  onnx::Model model = onnx::load(path, {.check_support = false});
  const onnx::Graph& g = model.graph();
  std::cout << path << ": IR version " << g.ir_version << ", opsets:";
  for (const auto& [domain, version] : g.opsets) std::cout << " " << (domain.empty() ? "ai.onnx" : domain) << "=" << version;
  std::cout << "\n" << g.inputs.size() << " inputs, " << g.outputs.size() << " outputs, " << model.named_parameters().size()
            << " parameters, " << model.named_buffers().size() << " constants, " << g.nodes.size()
            << " nodes after constant folding\n";
  std::map<std::string, int> counts;
  std::map<std::string, std::string> domains;
  for (const auto& n : g.nodes) {
    counts[n.op_type]++;
    domains[n.op_type] = n.domain;
  }
  int unsupported = 0;
  for (const auto& [op, count] : counts) {
    bool ok = onnx::is_supported(op, domains[op], g.opset());
    unsupported += ok ? 0 : 1;
    std::cout << "  " << op << " x" << count << (ok ? "  supported" : "  UNSUPPORTED") << "\n";
  }
  return unsupported ? 1 : 0;
}

namespace {
bool is_npy(const std::string& path) { return path.size() >= 4 && path.compare(path.size() - 4, 4, ".npy") == 0; }
}  // namespace

int cmd_onnx_run(int argc, char** argv) {
  if (argc < 3 || std::string(argv[2]).rfind("--", 0) == 0) throw std::invalid_argument("onnx-run needs MODEL.onnx first");
  const std::string path = argv[2];
  std::map<std::string, std::string> input_files;
  std::string device = "cpu", output_dir, compare_dir, output_format = "pb";
  int repeat = 0;
  bool eager = false;
  for (int i = 3; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--input") {
      std::string v = value();
      auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) throw std::invalid_argument("--input takes name=file.pb or name=file.npy, got '" + v + "'");
      if (input_files.count(v.substr(0, eq))) throw std::invalid_argument("--input " + v.substr(0, eq) + " is given twice");
      input_files[v.substr(0, eq)] = v.substr(eq + 1);
    } else if (a == "--device") {
      device = value();
    } else if (a == "--output-dir") {
      output_dir = value();
    } else if (a == "--output-format") {
      output_format = value();
      if (output_format != "pb" && output_format != "npy")
        throw std::invalid_argument("--output-format takes pb or npy, got '" + output_format + "'");
    } else if (a == "--compare") {
      compare_dir = value();
    } else if (a == "--eager") {
      eager = true;
    } else if (a == "--repeat") {
      std::string v = value();
      size_t used = 0;
      try {
        repeat = std::stoi(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != v.size() || repeat < 1 || repeat > 100000)
        throw std::invalid_argument("--repeat takes a count from 1 to 100000, got '" + v + "'");
    } else {
      throw std::invalid_argument("unknown option " + a);
    }
  }
  Device dev = Device::parse(device);
  auto t0 = std::chrono::steady_clock::now();
  onnx::Model model = onnx::load(path);
  model.to(dev);
  auto t1 = std::chrono::steady_clock::now();
  std::map<std::string, Array> inputs;
  for (const auto& vi : model.graph().inputs) {
    auto it = input_files.find(vi.name);
    if (it == input_files.end()) throw std::invalid_argument("graph input '" + vi.name + "' needs --input " + vi.name + "=FILE.pb");
    inputs[vi.name] = is_npy(it->second) ? io::load_npy(it->second) : onnx::load_tensor(it->second);
  }
  for (const auto& [name, file] : input_files)
    if (!inputs.count(name)) throw std::invalid_argument("'" + name + "' is not a graph input of " + path);
  // Inference: no autograd graph is recorded (the initializers are trainable parameters).
  NoGradGuard no_grad;
  auto t2 = std::chrono::steady_clock::now();
  std::map<std::string, Array> outputs = model.forward(inputs);
  std::vector<Array> ordered;
  for (const auto& vi : model.graph().outputs) ordered.push_back(outputs.at(vi.name));
  eval_and_wait(ordered);  // on this thread, as the timed runs below
  synchronize(dev);
  auto t3 = std::chrono::steady_clock::now();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  int mismatches = 0;
  for (size_t i = 0; i < ordered.size(); ++i) {
    const std::string& name = model.graph().outputs[i].name;
    std::cout << "output " << i << " '" << name << "': " << dtype_name(ordered[i].dtype()) << " " << ordered[i].shape().str();
    if (!compare_dir.empty()) {
      // output_<i>.pb as the ONNX test data, else output_<i>.npy.
      std::filesystem::path stored = std::filesystem::path(compare_dir) / ("output_" + std::to_string(i) + ".pb");
      std::filesystem::path npy = std::filesystem::path(compare_dir) / ("output_" + std::to_string(i) + ".npy");
      Array want = !std::filesystem::exists(stored) && std::filesystem::exists(npy) ? io::load_npy(npy.string())
                                                                                    : onnx::load_tensor(stored.string());
      std::string why = compare(to_device(ordered[i], Device::cpu()), want);
      std::cout << (why.empty() ? "  matches" : "  MISMATCH: " + why);
      mismatches += why.empty() ? 0 : 1;
    }
    std::cout << "\n";
    if (!output_dir.empty()) {
      std::filesystem::create_directories(output_dir);
      std::filesystem::path file = std::filesystem::path(output_dir) / ("output_" + std::to_string(i) + "." + output_format);
      if (output_format == "npy") {
        io::save_npy(file.string(), to_device(ordered[i], Device::cpu()));
      } else {
        std::ofstream f(file, std::ios::binary);
        f << onnx::tensor_to_bytes(to_device(ordered[i], Device::cpu()), name);
        if (!f) throw Error("onnx-run: cannot write to " + output_dir);
      }
    }
  }
  std::printf("load %.1f ms, run %.1f ms on %s\n", ms(t0, t1), ms(t2, t3), dev.str().c_str());
  if (repeat > 0) {
    // Timed runs after the first (which includes kernel compilation): forward, realize, sync. The
    // forward is captured (ember/capture.h: recorded on the first call, replayed after) unless
    // --eager asks for the graph to be built and planned every time.
    model.eval();
    std::vector<Array> positional;
    for (const auto& vi : model.graph().inputs) positional.push_back(to_device(inputs.at(vi.name), dev));
    CapturedFunction captured =
        capture_module(model, [&](const std::vector<Array>& in) { return model.forward(in); });
    auto forward = [&]() { return eager ? model.forward(positional) : captured(positional); };
    eval_and_wait(forward());  // records
    synchronize(dev);
    std::vector<double> times;
    for (int r = 0; r < repeat; ++r) {
      auto a = std::chrono::steady_clock::now();
      eval_and_wait(forward());
      synchronize(dev);
      times.push_back(ms(a, std::chrono::steady_clock::now()));
    }
    if (!eager) {
      CaptureStats s = captured.stats();
      if (s.recordings == 0) std::printf("not captured (%s): eager forward\n", s.last_refusal.c_str());
    }
    std::sort(times.begin(), times.end());
    std::printf("repeat %d: median %.3f ms, min %.3f ms\n", repeat, times[times.size() / 2], times.front());
  }
  return mismatches ? 1 : 0;
}

#endif

}  // namespace ember::cli
