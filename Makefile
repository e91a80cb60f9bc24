# The two entry points of the README, plus developer conveniences. Everything goes through the
# CMake presets in CMakePresets.json (Ninja + ccache).
.PHONY: train train-smoke demo test build asan asan-test tsan tsan-test clang clean bench bench-smoke bench-build

JOBS ?= $(shell nproc)
# Extra CMake arguments, e.g. EMBER_CMAKE_ARGS=-DEMBER_WERROR=ON (what CI uses).
EMBER_CMAKE_ARGS ?=

build:
	@bash scripts/setup.sh
	@cmake --preset release $(EMBER_CMAKE_ARGS) >/dev/null
	@cmake --build --preset release -j$(JOBS)

# The main job: train the default model on Fashion-MNIST (`ember train fashion-mnist`; TRAIN_ARGS
# adds options, e.g. TRAIN_ARGS="--model mlp --epochs 3").
TRAIN_ARGS ?=
train: build
	@./build/release/bin/ember train fashion-mnist $(TRAIN_ARGS)

# What CI runs: 2,000 images, one epoch, plain progress lines.
train-smoke: build
	@./build/release/bin/ember train fashion-mnist --limit 2000 --epochs 1 --plain --out build/runs/smoke

# A short demo that builds tensors, runs ops and prints the results.
demo: build
	@./build/release/bin/ember-demo

# The whole test suite (Release build).
test: build
	@ctest --test-dir build/release --output-on-failure -j$(JOBS) --timeout 600

# Benchmarks side by side with PyTorch (bench/run; docs/performance.md). `make bench` runs the
# full suite and rewrites bench/results/ and the table in docs/performance.md; its peer is
# PyTorch 2.x + ONNX Runtime in the bench venv (`bash scripts/bench-venv.sh` once; without it,
# Debian's /usr/bin/python3). `make bench-smoke` runs tiny sizes in seconds (PyTorch optional).
bench-build:
	@bash scripts/setup.sh
	@cmake --preset release $(EMBER_CMAKE_ARGS) -DEMBER_BUILD_BENCH=ON -DEMBER_BENCH_LIBTORCH=ON >/dev/null
	@cmake --build --preset release -j$(JOBS) --target ember_bench
	@cmake --build --preset release -j$(JOBS) --target libtorch_bench 2>/dev/null || \
	  echo "bench: libtorch_bench not built (libtorch-dev missing?); no libtorch C++ column"
bench: bench-build
	@bash bench/get-openblas.sh
	@python3 bench/run $(BENCH_ARGS)
bench-smoke: bench-build
	@python3 bench/run --smoke $(BENCH_ARGS)

# AddressSanitizer + UndefinedBehaviorSanitizer on the core tests (the slow exhaustive suites
# are left to the Release run).
asan:
	@bash scripts/setup.sh
	@cmake --preset asan $(EMBER_CMAKE_ARGS) >/dev/null
	@cmake --build --preset asan -j$(JOBS) --target ember_tests
# LSAN_OPTIONS: tools/lsan.supp says why TLS scanning is off (a crash of the sanitizer runtime's
# exit-time tracer on a garbage dynamic-TLS entry once tier-1 kernels had been dlopen'ed).
LSAN_ENV = ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=use_tls=0:suppressions=$(CURDIR)/tools/lsan.supp UBSAN_OPTIONS=print_stacktrace=1
asan-test: asan
	@$(NO_VULKAN_DRIVER) $(LSAN_ENV) \
	  ./build/asan/bin/ember_tests --gtest_brief=1 --gtest_filter='$(ASAN_FILTER)'
	@$(NO_VULKAN_DRIVER) $(LSAN_ENV) $(ASYNC_DEVICE_ENV) \
	  ./build/asan/bin/ember_tests --gtest_brief=1 --gtest_filter='$(ASYNC_FILTER)'
	@$(LSAN_ENV) EMBER_TEST_DEVICE=vulkan:0 ./build/asan/bin/ember_tests --gtest_brief=1 \
	  --gtest_filter='$(VULKAN_FILTER):-VulkanTest.RandomKir*:VulkanTest.TensorsLarger*'
	@$(LSAN_ENV) EMBER_TEST_DEVICE=vulkan:0 EMBER_VULKAN_MAX_BINDING=4096 ./build/asan/bin/ember_tests \
	  --gtest_brief=1 --gtest_filter='$(VULKAN_FILTER)'
	@cache=$$(mktemp -d) && $(NO_VULKAN_DRIVER) $(LSAN_ENV) $(FAKE_CUDA_ENV) EMBER_CACHE_DIR=$$cache \
	  ./build/asan/bin/ember_tests --gtest_brief=1 --gtest_filter='$(CUDA_FILTER)'; rc=$$?; rm -rf $$cache; exit $$rc
# The CUDA plugin on the host emulation of a GPU (tests/backend/fake_cuda/; ctest
# backend.cuda.emulated runs every conformance suite on it): its own tests, the thread-stress
# tests, captures, multi-output and attention calls through the host fallback's staging, and the
# error, indexing and matmul suites on cuda:0 (about a minute; the whole suite takes 5).
FAKE_CUDA_ENV = EMBER_CUDA_DRIVER=$(CURDIR)/build/asan/lib/libember_fake_cuda.so \
  EMBER_NVRTC=$(CURDIR)/build/asan/lib/libember_fake_cuda.so EMBER_REQUIRE_CUDA_DEVICE=1 EMBER_TEST_DEVICE=cuda:0
CUDA_FILTER ?= CudaPluginTest.*:ThreadStressTest.*:Devices/CaptureTest.*/cuda_0:Devices/MultiOutputTest.*/cuda_0:Devices/FusedAttentionTest.*/cuda_0:Devices/OpError*/cuda_0:Devices/OpIndexing*/cuda_0:Devices/OpMatmul*/cuda_0
# The asynchronous test device (tests/CMakeLists.txt, backend.async_device) under the sanitizers:
# its worker threads, queued copies of launches and poisoned buffers. Under TSan the test that
# reads without waiting on purpose is left out (appended after the filter's '-': it is a data
# race by design, which TSan rightly reports).
ASYNC_DEVICE_ENV = EMBER_REFERENCE_ASYNC=1 EMBER_REFERENCE_DEVICES=2 EMBER_CACHE_BYTES=0 EMBER_REQUIRE_ASYNC_DEVICE=1 EMBER_TEST_DEVICE=reference
ASYNC_FILTER ?= AsyncDeviceTest*:*OptimizerFailure*:PluginAbiTest*:ThreadStressTest*:*OpError*:*OpIndexing*:-*Million*:*vulkan*
# The file readers (malformed input, fuzz corpora, the ONNX loader) and the in-process
# collectives run here too. The Vulkan plugin runs under ASan and UBSan in processes of its own
# (the Vulkan suite and the thread-stress tests on the machine's driver, lavapipe in CI, about
# 50 s; then again with 4 KiB bindings, so that launches run in pieces, with the random-program
# and large-tensor tests, which only that run has: 90 s; tools/lsan.supp names the driver's leak); the other runs point the Vulkan loader at no driver (so the plugin loads and
# reports no device). Not under TSan: the driver (an LLVM JIT with its own threads) is not
# instrumented, so TSan cannot see its synchronization.
# The data-parallel equivalence suite (matched by *Op*) runs in ctest's own processes only: its
# run-to-run bit check depends on where the CPU tier switch falls, which depends on what the
# process ran before (tests/dist/data_parallel_test.cpp).
NO_VULKAN_DRIVER = VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json
VULKAN_FILTER ?= Vulkan*:*vulkan*:ThreadStressTest.*
ASAN_FILTER ?= DType*:OnnxLoaderTest*:*RecurrenceTest*:*IndexAddTest*:RecurrenceModule*:RecurrentTest*:OnnxFuzzCorpusTest*:CollectivesInProcessTest*:DataParallelTest*:SyncBatchNormTest*:ShardTest*:NpyTest*:OptionsJsonTest*:PluginAbi*:DeviceRegistry*:Graph*:*TensorTest*:*Op*:CpuDnnlThreads*:*EpilogueNonFinite*:EpilogueTest*:ExportedModelTest*:ShapeTest*:LossTest*:*Donation*:ProgramCache*:FileTypes*:SafetensorsStrict*:SafetensorsTest.Fuzz*:SafetensorsTest.Malformed*:Idx*:Csv*:CorpusReplay*:ImageLoad*:CaptureTest*:-*Million*:*vulkan*:VulkanTest.*:Optimizers/DataParallelEquivalenceTest.*

# ThreadSanitizer on the tests that run threads (user threads, the device queue's worker, data
# loader workers, the profiler). The CPU plugin's own loops are built without OpenMP
# (EMBER_OPENMP=OFF: libgomp is not instrumented); tools/tsan.supp lists what is left from
# uninstrumented libraries, each with its reason. OMP_NUM_THREADS=1 keeps oneDNN on one thread.
tsan:
	@bash scripts/setup.sh
	@cmake --preset tsan $(EMBER_CMAKE_ARGS) >/dev/null
	@cmake --build --preset tsan -j$(JOBS) --target ember_tests
# Address-space randomization off (setarch -R, where allowed): TSan maps its shadow memory at fixed
# addresses and once failed at start-up ("failed to allocate ... errno 12") when a randomized
# mapping was in the way; the same binary passed on a rerun.
TSAN_RUN := $(shell setarch $$(uname -m) -R true >/dev/null 2>&1 && echo "setarch $$(uname -m) -R")
tsan-test: tsan
	@$(NO_VULKAN_DRIVER) OMP_NUM_THREADS=1 TSAN_OPTIONS="suppressions=$(CURDIR)/tools/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
	  $(TSAN_RUN) ./build/tsan/bin/ember_tests --gtest_brief=1 --gtest_filter='$(TSAN_FILTER)'
	@$(NO_VULKAN_DRIVER) OMP_NUM_THREADS=1 TSAN_OPTIONS="suppressions=$(CURDIR)/tools/tsan.supp halt_on_error=1 second_deadlock_stack=1" \
	  $(ASYNC_DEVICE_ENV) $(TSAN_RUN) ./build/tsan/bin/ember_tests --gtest_brief=1 \
	  --gtest_filter='$(ASYNC_FILTER):AsyncDeviceTest.ReadsThatDoNotWaitForTheirWorkAreCaught'
TSAN_FILTER ?= ThreadStressTest*:CollectivesInProcessTest*:DataParallelTest*:SyncBatchNormTest*:LearnerDataParallelTest*:CpuDnnlThreads*:*OptimizerFailure*:GraphTest*:ProgramCacheTest*:ProgramDiskCacheTest*:*DonationTest.*:AutogradTest*:LoaderTest*:LearnerTest*:ProfilerTest*:BufferCacheTest*:OptimizerTest*:*CaptureTest*:-*Million*

# Warning check with clang 14: the library, the plugins and the command (the tests are checked
# by the g++ build; compiling them twice would double CI time).
clang:
	@cmake --preset clang $(EMBER_CMAKE_ARGS) >/dev/null
	@cmake --build --preset clang -j$(JOBS) --target ember ember_static ember-cli

clean:
	rm -rf build
