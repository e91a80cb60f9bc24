#!/usr/bin/env bash
# ctest backend.cuda.nvrtc: every KIR program the conformance suite produces, rendered as CUDA C
# and compiled for sm_90 by NVRTC, without a GPU (issue 19's CI check). The suite runs on the cpu
# device with EMBER_KIR_DUMP set (runtime/registry.cpp writes each program it compiles; the
# programs are the device-independent ones the scheduler lowers, before any per-device
# decomposition), then ember-cuda-compile-check renders and compiles the distinct ones.
# Without NVRTC the test skips (exit 77) unless CI=true or EMBER_REQUIRE_CUDA_COMPILER=1.
#
# ctest backend.cuda.emulated (third argument `emulated`, fourth the emulation library): the
# CUDA plugin on the host emulation of a GPU (tests/backend/fake_cuda/), which compiles each
# kernel with the system compiler (0.1 s each, 1,800 kernels: 3 minutes of one core): the
# plugin's own tests, the thread-stress tests and every conformance suite on cuda:0 against the
# reference, library calls other than matmul on the host fallback. Left out: the two large-batch
# recurrence tests, whose per-step products the emulation runs on one core for 160 s (the GPU
# check runs them).
# Usage: cuda_checks.sh path/to/ember_tests path/to/ember-cuda-compile-check [emulated path/to/libember_fake_cuda.so]
set -euo pipefail
tests=$1
check=$2
if [ "${3:-}" = emulated ]; then
  export EMBER_CUDA_DRIVER=$4 EMBER_NVRTC=$4 EMBER_REQUIRE_CUDA_DEVICE=1 EMBER_TEST_DEVICE=cuda:0
  cache=$(mktemp -d)
  trap 'rm -rf "$cache"' EXIT
  export EMBER_CACHE_DIR="$cache"
  exec "$tests" --gtest_brief=1 \
    --gtest_filter="CudaPluginTest.*:ThreadStressTest.*:Devices/*/cuda_0:-*RecurrenceTest.LargeBatchMatchesF64/*"
fi
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
EMBER_KIR_DUMP="$dump" EMBER_TEST_DEVICE=cpu "$tests" --gtest_brief=1 --gtest_filter='Devices/*/cpu'
status=0
# A quarter of the batches with the plugin's options, the rest with --Ofast-compile=max (CI time).
"$check" --arch sm_90 --fast-every 4 "$dump" || status=$?
if [ "$status" = 77 ]; then
  if [ "${CI:-}" = "true" ] || [ "${EMBER_REQUIRE_CUDA_COMPILER:-}" = "1" ]; then
    echo "cuda checks: NVRTC is required here (CI=true or EMBER_REQUIRE_CUDA_COMPILER=1): install the CUDA toolkit"
    exit 1
  fi
  echo "cuda checks: skipped, NVRTC is not installed"
fi
exit "$status"
