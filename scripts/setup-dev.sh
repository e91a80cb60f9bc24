#!/usr/bin/env bash
# Optional developer tools, not needed to build or test: PyTorch and NumPy (reference values and
# side-by-side benchmarks), clang's sanitizer runtime and linters, and Chromium (tools/render_report.sh
# renders training reports to PNG with it).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-numpy clang-tidy clang-format chromium >/dev/null
echo "setup-dev: done (PyTorch: $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'))"
