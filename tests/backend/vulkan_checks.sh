#!/usr/bin/env bash
# ctest backend.vulkan: the Vulkan tests, every Devices/* conformance test on vulkan:0 and the
# thread-stress tests (threads sharing parameters and histories on vulkan:0), in one
# process per configuration (shaders are compiled once), with the Khronos validation layer on
# (the plugin turns its first error or warning into a failed synchronize, so the test that caused
# it fails), including its synchronization validation (a dispatch or copy that races with an
# earlier one for want of a barrier: the plugin places barriers only where ranges overlap), and
# every generated shader written out, then compiled again and checked with
# spirv-val. Four configurations:
#   1. lavapipe (Mesa's CPU driver): every feature the plugin uses;
#   2. lavapipe without f64, int8 and int16 (EMBER_VULKAN_DISABLE): those kernels and library
#      calls take the host fallback (scheduler/host_fallback.h), and every result must still match;
#   3. SwiftShader (Debian's chromium-common), a real weak device: no int64, f64 or 16-bit storage,
#      so its shaders are the int-only variant and everything else takes the host fallback;
#   4. lavapipe binding at most 4 KiB per descriptor (EMBER_VULKAN_MAX_BINDING): nearly every
#      launch runs in pieces (src/backend/vulkan/launch_pieces.h), and what one output point reads
#      beyond a binding (long reductions, gathered tables, library operands) takes the host
#      fallback; every result must still match.
# Without a Vulkan device the tests skip (exit 0) unless CI=true or EMBER_REQUIRE_VULKAN=1 (then
# SwiftShader must be installed too).
# Usage: vulkan_checks.sh path/to/ember_tests [lavapipe|without-f64|swiftshader|small-bindings]
# (default: all; ctest runs them as separate tests so that they run beside the others)
set -euo pipefail
bin=$1
only=${2:-all}
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
required=0
if [ "${CI:-}" = "true" ] || [ "${EMBER_REQUIRE_VULKAN:-}" = "1" ]; then required=1; fi
validation=1
if ! ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1; then
  if [ "$required" = 1 ]; then echo "vulkan checks: the validation layer is missing (vulkan-validationlayers)"; exit 1; fi
  echo "vulkan checks: no validation layer installed; running without it"
  validation=0
fi
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$dump}"

# run LABEL [VAR=VALUE...]: the suite on vulkan:0 with these variables, then spirv-val on every
# shader it generated.
run() {
  local label=$1
  shift
  rm -f "$dump"/*.comp
  echo "vulkan checks: $label"
  env EMBER_VULKAN_VALIDATION=$validation VK_LAYER_ENABLES=VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT \
    "$@" EMBER_VULKAN_DUMP="$dump" EMBER_TEST_DEVICE=vulkan:0 "$bin" --gtest_brief=1 \
    --gtest_filter='Vulkan*:*vulkan*:ThreadStressTest.*'
  local n=0
  if [ "${check_shaders:-1}" = 0 ]; then
    echo "vulkan checks: $label: the suite passes (its shaders are the lavapipe configuration's: not checked again)"
    return
  fi
  for f in "$dump"/*.comp; do
    [ -e "$f" ] || continue
    glslangValidator --target-env vulkan1.2 -V "$f" -o "$dump/shader.spv" >/dev/null ||
      { echo "vulkan checks: glslangValidator rejects $f"; cat "$f"; exit 1; }
    spirv-val --target-env vulkan1.2 "$dump/shader.spv" || { echo "vulkan checks: spirv-val rejects $f"; exit 1; }
    n=$((n + 1))
  done
  if [ "$n" -eq 0 ] && [ "$required" = 1 ]; then
    echo "vulkan checks: no shader was generated (no Vulkan device?)"
    exit 1
  fi
  echo "vulkan checks: $label: the suite passes; $n generated shaders pass spirv-val"
}

if [ "$only" = all ] || [ "$only" = lavapipe ]; then run "lavapipe"; fi
# (Without the validation layer here: same driver as above, and the layer triples the run time.)
if [ "$only" = all ] || [ "$only" = without-f64 ]; then
  run "lavapipe without f64, int8 and int16 (host fallback)" EMBER_VULKAN_DISABLE=f64,int8,int16 EMBER_VULKAN_VALIDATION=0
fi
if [ "$only" = all ] || [ "$only" = small-bindings ]; then
  check_shaders=0 run "lavapipe binding 4 KiB at most (launches in pieces, larger operands on the host)" \
    EMBER_VULKAN_MAX_BINDING=4096
fi
[ "$only" = all ] || [ "$only" = swiftshader ] || exit 0
swiftshader=/usr/lib/chromium/vk_swiftshader_icd.json
if [ -f "$swiftshader" ]; then
  run "SwiftShader" VK_ICD_FILENAMES="$swiftshader" VK_DRIVER_FILES="$swiftshader"
elif [ "$required" = 1 ]; then
  echo "vulkan checks: SwiftShader ($swiftshader, Debian's chromium-common) is missing"
  exit 1
else
  echo "vulkan checks: SwiftShader not installed (chromium-common); skipped"
fi
