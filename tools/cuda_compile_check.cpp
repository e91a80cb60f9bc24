// ember-cuda-compile-check: renders KIR programs as CUDA C (backend/common/emit_cuda.h) and
// compiles each with NVRTC for a GPU architecture, without a GPU. The programs come from
// EMBER_KIR_DUMP directories (runtime/registry.cpp writes one .kir file per program a device
// compiles), so running the conformance suite with EMBER_KIR_DUMP set and then this program checks
// that every kernel the suite produces compiles for CUDA (tests/backend/cuda_checks.sh).
//
// Usage: ember-cuda-compile-check [--arch sm_90] [--jobs N] [--keep DIR] [--fast-every N] DIR...
//   --fast-every N: only every Nth batch of kernels is compiled with the plugin's options; the
//   others with --Ofast-compile=max (5x faster; NVRTC still parses, checks and assembles them).
// Exit status: 0 all compiled; 1 a program failed to render or compile (its KIR, CUDA C and
// NVRTC's log are printed); 2 bad usage or no programs; 77 NVRTC is not installed.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/common/emit_cuda.h"
#include "backend/cuda/nvrtc.h"
#include "ember/error.h"
#include "kir/builder.h"
#include "kir/kir_text.h"

namespace fs = std::filesystem;

namespace {

int usage(const std::string& why) {
  fmt::print(stderr, "ember-cuda-compile-check: {}\nusage: ember-cuda-compile-check [--arch sm_90] [--jobs N] "
                     "[--keep DIR] [--fast-every N] DIR...\n", why);
  return 2;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The program's text without its name line: programs that differ only in name compile alike.
std::string structure_of(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("name ", 0) != 0) out += line + "\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string arch = "sm_90", keep;
  int jobs = int(std::max(1u, std::thread::hardware_concurrency())), fast_every = 0;
  std::vector<fs::path> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ember::Error(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--arch") arch = value();
      else if (a == "--jobs") jobs = std::max(1, std::atoi(value().c_str()));
      else if (a == "--keep") keep = value();
      else if (a == "--fast-every") fast_every = std::max(0, std::atoi(value().c_str()));
      else if (a.rfind("--", 0) == 0) return usage("unknown option " + a);
      else dirs.emplace_back(a);
    } catch (const ember::Error& e) {
      return usage(e.what());
    }
  }
  if (dirs.empty()) return usage("no directory given");
  const auto& nvrtc = ember::cuda::Nvrtc::get();
  if (!nvrtc.available()) {
    fmt::print("cuda compile check: NVRTC is not installed ({}); nothing compiled\n", nvrtc.why());
    return 77;
  }
  // Distinct programs, by structure; the first file of each names it in messages.
  std::map<std::string, fs::path> programs;
  size_t files = 0;
  for (const fs::path& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return usage(dir.string() + " is not a directory");
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".kir") continue;
      ++files;
      programs.emplace(structure_of(read_text(entry.path())), entry.path());
    }
  }
  if (programs.empty()) return usage("no .kir files in the given directories");
  std::vector<std::pair<std::string, fs::path>> work(programs.begin(), programs.end());
  // Programs are compiled in batches of kBatch kernels per translation unit (one prelude, one
  // NVRTC call: its fixed cost is most of a small kernel's compile time); a batch that fails is
  // compiled again kernel by kernel, so that the message names the program.
  constexpr size_t kBatch = 32;
  const std::vector<std::string> kFast = {"--Ofast-compile=max"};
  std::atomic<size_t> fast_batches{0};
  std::atomic<size_t> next{0}, reduce_count{0}, checked_count{0};
  std::atomic<bool> failed{false};
  std::mutex print;
  const auto t0 = std::chrono::steady_clock::now();
  // Renders program i (with or without the prelude); false after reporting why.
  auto render = [&](size_t i, bool prelude, std::string& src, ember::kir::TextProgram& tp) {
    const fs::path& file = work[i].second;
    std::string why;
    bool can_fail = false;
    tp = ember::kir::parse_program_text(read_text(file), file.string());
    const ember_kir_program prog = tp.view();
    if (!ember::emit::emit_cuda_kernel(prog, {}, src, &can_fail, &why, {.name = fmt::format("k{}", i), .prelude = prelude})) {
      std::lock_guard lock(print);
      fmt::print("cuda compile check: {} ('{}') has no CUDA form: {}\n{}", file.string(), tp.name, why,
                 ember::kir::to_string(prog));
      return false;
    }
    if (prelude) return true;  // counted in its batch
    reduce_count += tp.has_reduction ? 1 : 0;
    checked_count += can_fail ? 1 : 0;
    return true;
  };
  auto worker = [&] {
    for (size_t b = next++; b * kBatch < work.size() && !failed; b = next++) {
      const size_t lo = b * kBatch, hi = std::min(work.size(), lo + kBatch);
      try {
        std::string unit = ember::emit::cuda_prelude({}), src, binary, log;
        ember::kir::TextProgram tp;
        for (size_t i = lo; i < hi; ++i) {
          if (!render(i, false, src, tp)) {
            failed = true;
            break;
          }
          unit += src;
        }
        if (failed) break;
        const std::string name = fmt::format("batch{}.cu", b);
        if (!keep.empty()) std::ofstream(fs::path(keep) / name) << unit;
        const bool fast = fast_every > 1 && b % size_t(fast_every) != 0;
        if (fast) ++fast_batches;
        if (nvrtc.compile(unit, name, arch, binary, log, fast ? kFast : std::vector<std::string>{})) continue;
        failed = true;
        for (size_t i = lo; i < hi; ++i) {
          if (!render(i, true, src, tp)) break;
          if (nvrtc.compile(src, work[i].second.stem().string() + ".cu", arch, binary, log)) continue;
          std::lock_guard lock(print);
          fmt::print("cuda compile check: NVRTC rejects {} ('{}') for {}:\n{}\n--- KIR:\n{}--- CUDA C:\n{}\n",
                     work[i].second.string(), tp.name, arch, log, ember::kir::to_string(tp.view()), src);
          break;
        }
        std::lock_guard lock(print);
        fmt::print("cuda compile check: NVRTC rejects batch {} ({} programs from {}):\n{}\n", b, hi - lo,
                   work[lo].second.string(), log.substr(0, 4000));
      } catch (const std::exception& e) {
        std::lock_guard lock(print);
        fmt::print("cuda compile check: {}\n", e.what());
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failed) return 1;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t batches = (work.size() + kBatch - 1) / kBatch;
  fmt::print("cuda compile check: {} distinct KIR programs (from {} files; {} with reductions, {} that report "
             "kernel errors) rendered as CUDA C and compiled for {} by NVRTC {} in {:.1f} s ({} of {} batches of {} "
             "with the plugin's options, the rest with --Ofast-compile=max)\n",
             work.size(), files, reduce_count.load(), checked_count.load(), arch, nvrtc.version(), s,
             batches - fast_batches.load(), batches, kBatch);
  return 0;
}
