// The CUDA kernels of the KIR emitter (backend/common/emit_cuda.h) on a real GPU, through the
// driver API, against the reference interpreter: the random programs of kir_program_gen.h (the
// ones cuda_emulation_test.cpp runs on the CPU) compiled by NVRTC for the device's architecture,
// loaded with cuModuleLoadData and launched with the launch words as a by-value argument, in both
// reduction modes. This is what the emulation cannot check (CUDA's math library, the real warp
// shuffles, the compiler's code) and the first thing a machine with a GPU runs
// (scripts/gpu-check.sh). Without a driver (libcuda.so.1) it skips with the reason, or fails
// under EMBER_REQUIRE_CUDA=1. The driver is loaded with dlopen and declared here by hand, so the
// test needs no CUDA header.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/common/emit_cuda.h"
#include "backend/common/emit_gpu.h"
#include "backend/cuda/nvrtc.h"
#include "backend/cuda_test_util.h"
#include "backend/kir_program_gen.h"

namespace ember::testing {
namespace {

// The driver entry points the test uses, as cuda.h declares them (CUresult as int, handles as
// pointers, CUdeviceptr as unsigned long long).
struct Driver {
  using Ptr = unsigned long long;
  int (*init)(unsigned) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*attribute)(int*, int, int) = nullptr;
  int (*primary_ctx_retain)(void**, int) = nullptr;
  int (*ctx_set_current)(void*) = nullptr;
  int (*ctx_synchronize)() = nullptr;
  int (*module_load_data)(void**, const void*) = nullptr;
  int (*module_get_function)(void**, void*, const char*) = nullptr;
  int (*module_unload)(void*) = nullptr;
  int (*mem_alloc)(Ptr*, size_t) = nullptr;
  int (*mem_free)(Ptr) = nullptr;
  int (*htod)(Ptr, const void*, size_t) = nullptr;
  int (*dtoh)(void*, Ptr, size_t) = nullptr;
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                void**) = nullptr;
  int (*error_string)(int, const char**) = nullptr;
  std::string why;  // empty when loaded and initialized

  Driver() {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      why = std::string("no CUDA driver (") + dlerror() + ")";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (!fn && why.empty()) why = std::string("the CUDA driver lacks ") + name;
    };
    sym(init, "cuInit");
    sym(device_get, "cuDeviceGet");
    sym(attribute, "cuDeviceGetAttribute");
    sym(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    sym(ctx_set_current, "cuCtxSetCurrent");
    sym(ctx_synchronize, "cuCtxSynchronize");
    sym(module_load_data, "cuModuleLoadData");
    sym(module_get_function, "cuModuleGetFunction");
    sym(module_unload, "cuModuleUnload");
    sym(mem_alloc, "cuMemAlloc_v2");
    sym(mem_free, "cuMemFree_v2");
    sym(htod, "cuMemcpyHtoD_v2");
    sym(dtoh, "cuMemcpyDtoH_v2");
    sym(launch, "cuLaunchKernel");
    sym(error_string, "cuGetErrorString");
    if (!why.empty()) return;
    if (int rc = init(0); rc != 0) why = "cuInit: " + text(rc);
  }
  std::string text(int rc) const {
    const char* s = nullptr;
    if (error_string) error_string(rc, &s);
    return s ? std::string(s) : "CUDA error " + std::to_string(rc);
  }
};

#define CU_OK(call)                                                     \
  do {                                                                  \
    const int rc_ = (call);                                             \
    ASSERT_EQ(rc_, 0) << #call << ": " << drv.text(rc_);                \
  } while (0)

TEST(CudaDriverTest, RandomKirProgramsMatchTheReference) {
  static const Driver drv;
  if (!drv.why.empty()) {
    if (const char* r = std::getenv("EMBER_REQUIRE_CUDA"); r && std::string(r) == "1")
      FAIL() << "EMBER_REQUIRE_CUDA=1 but " << drv.why;
    GTEST_SKIP() << drv.why;
  }
  const cuda::Nvrtc& nvrtc = cuda::Nvrtc::get();
  ASSERT_TRUE(nvrtc.available()) << nvrtc.why();
  int dev = 0, major = 0, minor = 0;
  CU_OK(drv.device_get(&dev, 0));
  CU_OK(drv.attribute(&major, 75, dev));  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  CU_OK(drv.attribute(&minor, 76, dev));  // ..._MINOR
  void* ctx = nullptr;
  CU_OK(drv.primary_ctx_retain(&ctx, dev));
  CU_OK(drv.ctx_set_current(ctx));

  constexpr uint64_t kPrograms = 200;
  constexpr int kBlock = 256;
  const emit::CudaTarget target{.block = kBlock};
  std::vector<std::unique_ptr<ProgramGen>> gens;
  std::string unit = emit::cuda_prelude(target);
  for (uint64_t seed = 1; seed <= kPrograms; ++seed) {
    auto g = std::make_unique<ProgramGen>(seed * 104729, /*iota_own_arg=*/true);
    g->generate(seed % 2 == 0, seed % 10 == 0);
    std::string src, why;
    const std::string name = "k" + std::to_string(seed);
    ASSERT_TRUE(emit::emit_cuda_kernel(g->b.program(name), target, src, nullptr, &why, {.name = name, .prelude = false}))
        << why;
    unit += src;
    gens.push_back(std::move(g));
  }
  // The device's own architecture; PTX for compute_90 (JIT-compiled by the driver) where this
  // NVRTC does not know it.
  std::string image, log;
  const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (!nvrtc.compile(unit, "random.cu", arch, image, log)) {
    ASSERT_TRUE(nvrtc.compile(unit, "random.cu", "compute_90", image, log)) << log;
    image.push_back('\0');  // PTX is text: the driver wants it terminated
  }
  void* module = nullptr;
  CU_OK(drv.module_load_data(&module, image.data()));

  Backend& ref = reference_backend();
  int compared = 0, failures = 0, trees = 0;
  for (uint64_t seed = 1; seed <= kPrograms && failures < 5; ++seed) {
    ProgramGen& g = *gens[seed - 1];
    const std::string name = "k" + std::to_string(seed);
    std::string err_ref;
    const auto want = run_kir(ref, g.b, name, g.L, &err_ref);
    ASSERT_TRUE(err_ref.empty()) << err_ref;
    const bool tree = g.L.reduce_rank > 0 && seed % 4 != 1;  // both modes of reductions
    trees += tree ? 1 : 0;
    std::vector<long long> words = cuda_launch_words(g.L, tree);
    const long long points = words[emit::GpuLaunchWords::kPoints];
    // Device buffers with the arguments' initial bytes (none for a launch-time scalar or iota).
    std::vector<Driver::Ptr> bufs(g.L.args.size(), 0);
    for (size_t a = 0; a < bufs.size(); ++a) {
      if (g.L.args[a].no_buffer) continue;
      CU_OK(drv.mem_alloc(&bufs[a], std::max<size_t>(g.L.args[a].bytes.size(), 1)));
      if (!g.L.args[a].bytes.empty()) CU_OK(drv.htod(bufs[a], g.L.args[a].bytes.data(), g.L.args[a].bytes.size()));
    }
    Driver::Ptr err = 0;
    const unsigned zeros[emit::kErrWords] = {};
    CU_OK(drv.mem_alloc(&err, sizeof zeros));
    CU_OK(drv.htod(err, zeros, sizeof zeros));
    void* fn = nullptr;
    CU_OK(drv.module_get_function(&fn, module, name.c_str()));
    // Arguments: the launch struct by value (its bytes are the words), the error word, the buffers.
    std::vector<void*> params{words.data(), &err};
    for (Driver::Ptr& b : bufs) params.push_back(&b);
    const unsigned grid =
        unsigned(std::clamp<long long>(tree ? points : (points + kBlock - 1) / kBlock, 1, 4096));
    if (points > 0) CU_OK(drv.launch(fn, grid, 1, 1, kBlock, 1, 1, 0, nullptr, params.data(), nullptr));
    CU_OK(drv.ctx_synchronize());
    unsigned word[emit::kErrWords] = {};
    CU_OK(drv.dtoh(word, err, sizeof word));
    std::vector<std::vector<uint8_t>> got;
    for (size_t a = 0; a < bufs.size(); ++a) {
      got.push_back(g.L.args[a].bytes);
      if (bufs[a] && !got.back().empty()) CU_OK(drv.dtoh(got.back().data(), bufs[a], got.back().size()));
      if (bufs[a]) CU_OK(drv.mem_free(bufs[a]));
    }
    CU_OK(drv.mem_free(err));
    expect_kernel_matches(g, name, tree, word[0] ? emit::gpu_error_text(word[0]) : "", got, want, compared, failures);
  }
  CU_OK(drv.module_unload(module));
  std::printf("[ info ] %d random programs compared on sm_%d%d (%d reductions by a block per outer point)\n", compared,
              major, minor, trees);
  EXPECT_EQ(compared, int(kPrograms));
}

}  // namespace
}  // namespace ember::testing
