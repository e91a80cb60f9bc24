#!/usr/bin/env bash
# The checks of issue 19 that need an NVIDIA GPU, as one run for a machine lent for a few minutes:
# what the machine has (GPU, driver, CUDA libraries, build tools), a build of what the checks need,
# then the CUDA tests with a GPU required (tests/backend/cuda_driver_test.cpp: the generated
# kernels compiled for the device's architecture and run against the reference interpreter, in
# both reduction modes; tests/backend/cuda_plugin_test.cpp: the plugin's buffers, queues, events
# and deferred errors; the emulation and KIR text tests beside them), `ember info`, and the whole
# conformance suite on cuda:0 against the reference (library calls on the host fallback).
# Each step prints its time; the script stops at the first failure, naming the step.
#   bash scripts/gpu-check.sh [build-dir]    (default build/gpu; OUT=dir keeps the logs there)
# Not yet here (the plugin has no library calls on the GPU so far): a Fashion-MNIST epoch on the
# GPU and the benchmarks against PyTorch on the same card.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/gpu}
out=${OUT:-/tmp/ember-gpu-check}
mkdir -p "$out"
step() {
  local name=$1
  shift
  local t0=$(date +%s)
  echo "::: $name"
  if ! "$@" > "$out/$name.log" 2>&1; then
    tail -40 "$out/$name.log"
    echo "::: $name FAILED after $(( $(date +%s) - t0 )) s (log: $out/$name.log)"
    exit 1
  fi
  tail -5 "$out/$name.log"
  echo "::: $name took $(( $(date +%s) - t0 )) s"
}
machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv || echo "no nvidia-smi"
  ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/local/cuda/lib64/libnvrtc.so* 2>&1 || true
  for tool in cmake ninja g++ ccache; do command -v "$tool" || echo "missing: $tool"; done
  nproc
}
step machine machine
# Only what the CUDA checks need: no Vulkan, ONNX, MPI, examples or benchmarks.
step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEMBER_BACKEND_VULKAN=OFF \
  -DEMBER_ONNX=OFF -DEMBER_DIST_MPI=OFF -DEMBER_BUILD_EXAMPLES=OFF -DEMBER_BUILD_BENCH=OFF
step build cmake --build "$build" -j"$(nproc)" --target ember_tests ember-cli ember-cuda-compile-check
step cuda-tests env EMBER_REQUIRE_CUDA=1 EMBER_REQUIRE_CUDA_DEVICE=1 "$build/bin/ember_tests" \
  --gtest_filter='Cuda*:KirText*:PluginAbi*'
step info "$build/bin/ember" info
step conformance env EMBER_REQUIRE_CUDA_DEVICE=1 EMBER_TEST_DEVICE=cuda:0 "$build/bin/ember_tests" --gtest_brief=1 \
  --gtest_filter='Devices/*/cuda_0:ThreadStressTest.*'
echo "::: gpu check passed"
