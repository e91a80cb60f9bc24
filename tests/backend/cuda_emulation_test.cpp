// The CUDA kernels of the KIR emitter (backend/common/emit_cuda.h), run without a GPU: the
// generated CUDA C is compiled as C++ by the system compiler under a small shim that plays the
// CUDA built-ins (threadIdx and blockIdx per thread, __syncthreads as a barrier of real threads,
// warp shuffles through shared slots, atomicCAS, the bit casts), and each block runs on as many
// threads as the kernel's block size. So the kernels' indexing, grid-stride loops, both
// reduction modes (a thread per outer point; a block per outer point with warp butterflies and
// the tree over warps), casts, f16/bf16 rounding, random numbers, special values and the error
// word are checked against the scalar reference interpreter on the random programs of
// kir_program_gen.h, with NaN and infinities among their inputs. What this cannot check is CUDA's
// own math library (the shim calls glibc's expf, tanhf...): its accuracy is NVIDIA's documented
// bound, checked on a GPU by scripts/gpu-check.sh when one is lent. The compile check of every
// conformance kernel with NVRTC itself is ctest backend.cuda.nvrtc (cuda_checks.sh).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backend/common/emit_cuda.h"
#include "backend/common/emit_gpu.h"
#include "backend/cuda_host_shim.h"
#include "backend/cuda_test_util.h"
#include "backend/kir_program_gen.h"

namespace ember::testing {
namespace {

namespace fs = std::filesystem;

const char* c_type(uint8_t dt) {
  switch (dt) {
    case EMBER_F32: return "float";
    case EMBER_F64: return "double";
    case EMBER_F16: case EMBER_BF16: case EMBER_U16: return "uint16_t";
    case EMBER_I32: return "int32_t";
    case EMBER_I64: return "int64_t";
    case EMBER_U8: case EMBER_BOOL: return "uint8_t";
    case EMBER_I8: return "int8_t";
    case EMBER_I16: return "int16_t";
    case EMBER_U32: return "uint32_t";
    default: return "uint64_t";
  }
}

// The emulator's entry points in the compiled library.
using CallFn = void (*)(const long long* words, unsigned* err, void* const* args);


// Generated kernels compiled together by the host compiler under kShim, and run block by block
// on real threads.
class Emulator {
 public:
  static constexpr int kBlock = 64;  // two warps: the butterfly within a warp and the tree across them

  explicit Emulator(bool index32 = false)
      : target_{.block = kBlock, .index32 = index32},
        unit_(std::string(kCudaHostShim) + "namespace cuda_emu {\n" + emit::cuda_prelude(target_)) {}
  ~Emulator() {
    if (lib_) dlclose(lib_);
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // Adds program `prog` as kernel `name` (call before build()).
  ::testing::AssertionResult add(const ember_kir_program& prog, const std::string& name) {
    std::string src, why;
    if (!emit::emit_cuda_kernel(prog, target_, src, nullptr, &why, {.name = name, .prelude = false}))
      return ::testing::AssertionFailure() << why << "\n" << kir::to_string(prog);
    unit_ += src;
    // A C-callable wrapper: the words into the launch struct, the argument pointers typed.
    unit_ += "extern \"C\" void " + name + "_call(const long long* w, unsigned* E, void* const* g) {\n  " + name +
             "_launch L;\n  std::memcpy(L.P, w, sizeof L.P);\n  " + name + "(L, E";
    for (int32_t a = 0; a < prog.n_args; ++a)
      unit_ += std::string(", (") + c_type(prog.arg_dtypes[a]) + "*)g[" + std::to_string(a) + "]";
    unit_ += ");\n}\n";
    return ::testing::AssertionSuccess();
  }

  ::testing::AssertionResult build() {
    unit_ += "}  // namespace cuda_emu\n";
    dir_ = fs::temp_directory_path() / ("ember_cuda_emu_" + std::to_string(::getpid()) + "_" + std::to_string(serial_++));
    fs::create_directories(dir_);
    const fs::path cpp = dir_ / "kernels.cpp", so = dir_ / "kernels.so";
    std::ofstream(cpp) << unit_;
    const char* cxx = std::getenv("CXX");
    // -ffp-contract=off as NVRTC's --fmad=false: no fused multiply-adds the reference lacks.
    const std::string cmd = std::string(cxx && *cxx ? cxx : "c++") +
                            " -std=c++20 -O1 -ffp-contract=off -w -shared -fPIC -o " + so.string() + " " + cpp.string();
    if (std::system(cmd.c_str()) != 0)
      return ::testing::AssertionFailure() << "the host compiler rejects the emulated kernels: " << cmd;
    lib_ = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return ::testing::AssertionFailure() << dlerror();
    setup_ = reinterpret_cast<CudaEmuSetupFn>(dlsym(lib_, "cuda_emu_setup"));
    if (!setup_) return ::testing::AssertionFailure() << "the emulated kernels have no cuda_emu_setup";
    return ::testing::AssertionSuccess();
  }

  // Runs kernel `name` over launch h (a block per outer point when `tree`) on copies of the
  // arguments' initial bytes, with at most three blocks (a grid-stride loop over the rest);
  // returns every argument's final bytes and sets *error to the error word's text.
  std::vector<std::vector<uint8_t>> run(const std::string& name, const HLaunch& h, bool tree, std::string* error,
                                        unsigned* error_word = nullptr) {
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<void*> ptrs;
    for (const HArg& a : h.args) bytes.push_back(a.bytes);
    for (size_t a = 0; a < bytes.size(); ++a) ptrs.push_back(h.args[a].no_buffer ? nullptr : bytes[a].data());
    const std::vector<long long> words = cuda_launch_words(h, tree);
    const long long points = words[emit::GpuLaunchWords::kPoints];
    const unsigned grid = unsigned(std::clamp<long long>(tree ? points : (points + kBlock - 1) / kBlock, 1, 3));
    auto call = reinterpret_cast<CallFn>(dlsym(lib_, (name + "_call").c_str()));
    unsigned err[emit::kErrWords] = {};
    for (unsigned b = 0; call && b < grid && points > 0; ++b) {
      std::barrier<> barrier(kBlock);
      std::vector<std::thread> threads;
      for (unsigned t = 0; t < unsigned(kBlock); ++t)
        threads.emplace_back([&, t] {
          setup_(cuda_emu_barrier_wait, &barrier, t, b, grid, kBlock);
          call(words.data(), err, ptrs.data());
        });
      for (auto& th : threads) th.join();
    }
    *error = !call ? "no kernel " + name : err[0] ? emit::gpu_error_text(err[0]) : "";
    if (error_word) std::copy(err, err + emit::kErrWords, error_word);
    return bytes;
  }

 private:
  const emit::CudaTarget target_;
  std::string unit_;
  fs::path dir_;
  void* lib_ = nullptr;
  CudaEmuSetupFn setup_ = nullptr;
  static inline int serial_ = 0;
};

TEST(CudaEmulationTest, RandomKirProgramsMatchTheReference) {
  constexpr uint64_t kPrograms = 120;
  std::vector<std::unique_ptr<ProgramGen>> gens;
  // Every third program with 32-bit index arithmetic (the variant a plugin picks for launches
  // whose offsets fit), in a translation unit of its own (IX is the prelude's).
  Emulator emu64, emu32(/*index32=*/true);
  for (uint64_t seed = 1; seed <= kPrograms; ++seed) {
    auto g = std::make_unique<ProgramGen>(seed * 104729, /*iota_own_arg=*/true);
    g->generate(seed % 2 == 0, seed % 20 == 0);
    Emulator& emu = seed % 3 == 0 ? emu32 : emu64;
    ASSERT_TRUE(emu.add(g->b.program("k" + std::to_string(seed)), "k" + std::to_string(seed)));
    gens.push_back(std::move(g));
  }
  ASSERT_TRUE(emu64.build());
  ASSERT_TRUE(emu32.build());
  Backend& ref = reference_backend();
  int compared = 0, failures = 0, trees = 0;
  for (uint64_t seed = 1; seed <= kPrograms && failures < 5; ++seed) {
    ProgramGen& g = *gens[seed - 1];
    const std::string name = "k" + std::to_string(seed);
    std::string err_ref, err_emu;
    const auto want = run_kir(ref, g.b, name, g.L, &err_ref);
    // A block per outer point where there are few of them (the emulated block's barriers cost
    // about 3 ms per outer point on two cores), else a thread per outer point.
    const long long outer = cuda_outer_points(g.L);
    const bool tree = g.L.reduce_rank > 0 && (outer <= 300 || (seed % 4 == 0 && outer <= 1000));
    trees += tree ? 1 : 0;
    const auto got = (seed % 3 == 0 ? emu32 : emu64).run(name, g.L, tree, &err_emu);
    ASSERT_TRUE(err_ref.empty()) << "the generator's programs do not fail: " << err_ref << "\n" << name;
    expect_kernel_matches(g, name, tree, err_emu, got, want, compared, failures);
  }
  std::printf("[ info ] %d random programs compared with the reference (%d reductions by a block per outer point)\n",
              compared, trees);
  EXPECT_EQ(compared, int(kPrograms));
  EXPECT_GT(trees, 20);
}

// Kernel errors: the first failing point's code, value and launch id in the error word, as the
// reference reports them; the other points still run (outputs past the failing point written).
TEST(CudaEmulationTest, KernelErrorsFillTheErrorWord) {
  // out = a / b in i32 and i64 with one zero divisor; out = table[index] with an index past the end.
  struct Case {
    kir::Builder b;
    HLaunch L;
    std::string name, want;
    int64_t value, extra;
  };
  std::vector<std::unique_ptr<Case>> cases;
  for (DType dt : {DType::I32, DType::I64}) {
    auto c = std::make_unique<Case>();
    c->name = "div_" + std::string(dtype_name(dt));
    c->want = "integer division by zero";
    c->value = 9;
    c->extra = 0;
    const int a = c->b.add_arg(dt), d = c->b.add_arg(dt), o = c->b.add_arg(dt);
    c->b.store(o, c->b.load(a) / c->b.load(d));
    c->L.outer_rank = 1;
    c->L.shape = {100};
    for (int k = 0; k < 3; ++k) {
      HArg h;
      h.dtype = dt;
      h.bytes.assign(100 * dtype_size(dt), 0);
      h.strides = {1};
      for (size_t i = 0; i < 100; ++i) put(h.bytes, dt, i, k == 0 ? 9.0 : k == 1 ? (i == 57 ? 0.0 : 3.0) : 0.0);
      c->L.args.push_back(std::move(h));
    }
    cases.push_back(std::move(c));
  }
  {
    auto c = std::make_unique<Case>();
    c->name = "gather";
    c->want = "index out of range";
    c->value = 12;
    c->extra = 10;
    const int t = c->b.add_arg(DType::F32), ix = c->b.add_arg(DType::I64), o = c->b.add_arg(DType::F32);
    c->b.store(o, c->b.load_gather(t, c->b.load(ix)));
    c->L.outer_rank = 1;
    c->L.shape = {40};
    HArg table{.dtype = DType::F32, .strides = {0}, .gather_stride = 1, .gather_size = 10};
    table.bytes.assign(10 * 4, 0);
    for (size_t i = 0; i < 10; ++i) put(table.bytes, DType::F32, i, double(i) + 0.5);
    HArg index{.dtype = DType::I64, .strides = {1}};
    index.bytes.assign(40 * 8, 0);
    for (size_t i = 0; i < 40; ++i) put(index.bytes, DType::I64, i, i == 33 ? 12.0 : double(i % 10));
    HArg out{.dtype = DType::F32, .strides = {1}};
    out.bytes.assign(40 * 4, 0);
    c->L.args = {table, index, out};
    cases.push_back(std::move(c));
  }
  Emulator emu;
  for (auto& c : cases) ASSERT_TRUE(emu.add(c->b.program(c->name), c->name));
  ASSERT_TRUE(emu.build());
  for (auto& c : cases) {
    std::string err_ref, err_emu;
    run_kir(reference_backend(), c->b, c->name, c->L, &err_ref);
    unsigned word[emit::kErrWords] = {};
    const auto got = emu.run(c->name, c->L, false, &err_emu, word);
    EXPECT_NE(err_ref.find(c->want), std::string::npos) << c->name << ": reference says " << err_ref;
    EXPECT_EQ(err_emu, c->want) << c->name;
    EXPECT_EQ(word[1], 7u) << c->name << ": the error word names the launch";
    EXPECT_EQ(int64_t(uint64_t(word[2]) | uint64_t(word[3]) << 32), c->value) << c->name << ": the failing value";
    EXPECT_EQ(int64_t(uint64_t(word[4]) | uint64_t(word[5]) << 32), c->extra) << c->name << ": the bound";
    // The other points ran: the last output element holds its value.
    const DType out_dt = c->L.args[2].dtype;
    const size_t last = size_t(c->L.shape[0]) - 1;
    EXPECT_EQ(element(got[2], out_dt, last), c->name == "gather" ? 9.5 : 3.0) << c->name;
  }
}

}  // namespace
}  // namespace ember::testing
