#!/usr/bin/env bash
# Installs the Debian packages that building and testing Ember needs. Idempotent: installs only
# what is missing, so it is cheap to run before every build. Heavy optional tools (PyTorch for
# reference scripts and benchmarks) are in scripts/setup-dev.sh.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ clang pkg-config   # toolchain (g++ 12 and clang 14 on Debian 12)
  libhwy-dev libsleef-dev                         # SIMD (Highway) and vector math (SLEEF)
  libdnnl-dev                                     # oneDNN: matmul/conv on the CPU
  libfmt-dev nlohmann-json3-dev                   # formatting, JSON
  libgtest-dev libgmock-dev libbenchmark-dev      # tests and micro-benchmarks
  zlib1g-dev libstb-dev                           # data: gzip-compressed IDX files, PNG/JPEG images
  dataset-fashion-mnist                           # the default training data (/usr/share/datasets/fashion-mnist)
  libvulkan-dev mesa-vulkan-drivers              # Vulkan loader/headers and lavapipe (a CPU Vulkan driver for tests)
  libshaderc-dev glslang-dev                      # GLSL -> SPIR-V at run time (the Vulkan plugin links them statically)
  spirv-tools glslang-tools vulkan-validationlayers  # spirv-val, glslangValidator and the validation layer (Vulkan tests)
  chromium-common                                 # SwiftShader, the second CPU Vulkan driver (no int64/f64/16-bit: the weak device)
  libopenmpi-dev openmpi-bin                      # MPI for ember::dist (ember_dist_mpi, mpirun; optional at build time)
  libonnx-dev libprotobuf-dev                     # ONNX import: onnx-ml.pb.h + libonnx_proto (ONNX 1.12) and protobuf 3.21
  tmux                                            # a real terminal for the dashboard test (tests/train/dashboard_tmux.sh)
  libmimalloc-dev                                 # the ember command's allocator (small graph allocations; CMakeLists.txt)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
