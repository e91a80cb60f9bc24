#!/usr/bin/env bash
# ctest backend.vulkan: the Vulkan tests and every Devices/* conformance test on vulkan:0, in one
# process (shaders are compiled once), with the Khronos validation layer on (the plugin turns
# its first error or warning into a failed synchronize, so the test that caused it fails) and
# every generated shader written out, then compiled again and checked with spirv-val.
# Without a Vulkan device the tests skip (exit 0) unless CI=true or EMBER_REQUIRE_VULKAN=1.
# Usage: vulkan_checks.sh path/to/ember_tests
set -euo pipefail
bin=$1
dump=$(mktemp -d)
trap 'rm -rf "$dump"' EXIT
validation=1
if ! ls /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json >/dev/null 2>&1; then
  if [ "${CI:-}" = "true" ]; then echo "vulkan checks: the validation layer is missing (vulkan-validationlayers)"; exit 1; fi
  echo "vulkan checks: no validation layer installed; running without it"
  validation=0
fi
EMBER_VULKAN_VALIDATION=$validation EMBER_VULKAN_DUMP="$dump" "$bin" --gtest_brief=1 \
  --gtest_filter='VulkanTest.*:*vulkan*'
n=0
for f in "$dump"/*.comp; do
  [ -e "$f" ] || continue
  glslangValidator --target-env vulkan1.2 -V "$f" -o "$dump/shader.spv" >/dev/null ||
    { echo "vulkan checks: glslangValidator rejects $f"; cat "$f"; exit 1; }
  spirv-val --target-env vulkan1.2 "$dump/shader.spv" || { echo "vulkan checks: spirv-val rejects $f"; exit 1; }
  n=$((n + 1))
done
if [ "$n" -eq 0 ] && { [ "${CI:-}" = "true" ] || [ "${EMBER_REQUIRE_VULKAN:-}" = "1" ]; }; then
  echo "vulkan checks: no shader was generated (no Vulkan device?)"
  exit 1
fi
echo "vulkan checks: $n generated shaders pass spirv-val"
# Again as a device without f64, int8 and int16: those kernels and library calls take the host
# fallback (scheduler/host_fallback.h), and every result must still match.
EMBER_VULKAN_DISABLE=f64,int8,int16 "$bin" --gtest_brief=1 --gtest_filter='VulkanTest.*:*vulkan*'
echo "vulkan checks: the suite passes on vulkan:0 without f64, int8 and int16 (host fallback)"
