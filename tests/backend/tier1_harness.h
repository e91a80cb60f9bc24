// Helpers of the tier-1 CPU kernel tests (cpu_tier1_test.cpp, cpu_tier1_reduce_test.cpp): the
// hooks the CPU plugin exports (tier mode, counters), a scope with a private kernel cache, a
// direct run of a fresh program through the plugin's table, and a tolerance comparison.
#pragma once

#include <dlfcn.h>
#include <link.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "backend/kir_harness.h"

namespace ember::testing {

// ---- hooks exported by the CPU plugin -----------------------------------------------------------
inline void* cpu_plugin_symbol(const char* name) {
  cpu_backend();  // make sure the plugin is loaded
  std::string path;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const char* n = info->dlpi_name;
        if (n && std::strstr(n, "libember_backend_cpu.so")) *static_cast<std::string*>(data) = n;
        return 0;
      },
      &path);
  if (path.empty()) return nullptr;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return nullptr;
  void* sym = dlsym(h, name);
  dlclose(h);
  return sym;
}

inline void set_tier(int mode) {
  auto fn = reinterpret_cast<void (*)(int)>(cpu_plugin_symbol("ember_cpu_set_tier"));
  ASSERT_NE(fn, nullptr);
  fn(mode);
}

struct Stats {
  int64_t compiles = 0, cache_hits = 0, failures = 0, launches = 0;
};
inline Stats stats() {
  auto fn = reinterpret_cast<void (*)(int64_t*)>(cpu_plugin_symbol("ember_cpu_tier_stats"));
  int64_t v[4] = {0, 0, 0, 0};
  if (fn) fn(v);
  return {v[0], v[1], v[2], v[3]};
}
// Reduce launches so far by scheme (emit_c.h): {rows, columns, strided columns}.
inline std::array<int64_t, 3> reduce_schemes() {
  auto fn = reinterpret_cast<void (*)(int64_t*)>(cpu_plugin_symbol("ember_cpu_tier_reduce_schemes"));
  std::array<int64_t, 3> v{0, 0, 0};
  if (fn) fn(v.data());
  return v;
}

// Streaming stores (emit_c.h) from `bytes` of output per launch for one scope (0: every launch
// that can; -1: none); the plugin's default afterwards.
class StreamScope {
 public:
  explicit StreamScope(int64_t bytes) { set(bytes); }
  ~StreamScope() { set(INT64_MIN); }
  static void set(int64_t bytes) {
    auto fn = reinterpret_cast<void (*)(int64_t)>(cpu_plugin_symbol("ember_cpu_set_stream_bytes"));
    if (fn) fn(bytes);
  }
};
// Tier-1 launches so far that streamed their stores.
inline int64_t streamed_launches() {
  auto fn = reinterpret_cast<int64_t (*)()>(cpu_plugin_symbol("ember_cpu_tier_streamed"));
  return fn ? fn() : -1;
}

// Tier mode, a private kernel cache and source dump folder for one test; restored afterwards.
class Tier1Scope {
 public:
  explicit Tier1Scope(int mode, const char* cxx = nullptr) {
    dir_ = std::filesystem::temp_directory_path() /
           ("ember_tier1_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(dir_);
    ::setenv("EMBER_CACHE_DIR", dir_.c_str(), 1);
    ::setenv("EMBER_CPU_DUMP", dir_.c_str(), 1);  // each compiled kernel's source, for tests that read it
    if (cxx) ::setenv("EMBER_CXX", cxx, 1);
    // Programs of earlier tests made hot in auto mode may still be compiling in the background:
    // let them finish, so that the counters below count this test's compiles only.
    auto pending = reinterpret_cast<int64_t (*)()>(cpu_plugin_symbol("ember_cpu_tier_pending"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (pending && pending() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    set_tier(mode);
  }
  ~Tier1Scope() {
    set_tier(-1);
    ::unsetenv("EMBER_CACHE_DIR");
    ::unsetenv("EMBER_CPU_DUMP");
    ::unsetenv("EMBER_CXX");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  static inline int counter_ = 0;
};

inline bool compiler_present() {
  for (const char* name : {"c++", "g++"})
    if (std::system((std::string("command -v ") + name + " >/dev/null 2>&1").c_str()) == 0) return true;
  return false;
}

// Creates a program directly through the plugin's table (not the core's program cache, so each
// call gets a new program under the current tier mode), runs it and returns every argument's
// final bytes.
inline std::vector<std::vector<uint8_t>> run_fresh(Backend& be, kir::Builder& b, const HLaunch& h, std::string* error) {
  Uploaded u = upload(be, h);
  ember_kir_program prog = b.program("tier1_test");
  ember_program p = nullptr;
  ember_status st{};
  if (be.table().program_create(0, &prog, &p, &st) != EMBER_OK) {
    if (error) *error = st.message;
    return {};
  }
  int32_t rc = be.table().program_run(be.queue(0), p, &u.launch, 0, &st);
  be.table().program_destroy(p);
  if (rc != EMBER_OK) {
    if (error) *error = st.message;
    return {};
  }
  return download(be, h, u);
}

// Element-wise agreement within `tol` relative to 1 + |want| (0: exact); NaN matches NaN.
inline ::testing::AssertionResult agree(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType dt,
                                  bool exact, double tol = -1) {
  size_t n = got.size() / dtype_size(dt);
  if (tol < 0) tol = exact ? 0 : dt == DType::F32 ? 2e-5 : 1e-12;
  for (size_t i = 0; i < n; ++i) {
    double g = element(got, dt, i), w = element(want, dt, i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (!(std::fabs(g - w) <= tol * (1 + std::fabs(w))))
      return ::testing::AssertionFailure() << "element " << i << ": " << g << " vs " << w;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace ember::testing
