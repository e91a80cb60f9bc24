#!/usr/bin/env bash
# Optional developer tools, not needed to build or test: the benchmark peer's venv (PyTorch 2.x,
# ONNX Runtime and NumPy from PyPI, scripts/bench-venv.sh; `make bench` uses it), Debian's PyTorch
# 1.13 and NumPy (reference values; the older peer: bench/run --python /usr/bin/python3), clang's
# sanitizer runtime and linters, and Chromium (tools/render_report.sh renders training reports to
# PNG with it). EMBER_SETUP_DEV_NO_VENV=1 skips the venv (about 5.5 GB).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-numpy python3-venv clang-tidy \
  clang-format chromium >/dev/null
echo "setup-dev: Debian's PyTorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"
if [ "${EMBER_SETUP_DEV_NO_VENV:-0}" != "1" ]; then
  bash "$(dirname "$0")/bench-venv.sh"
fi
echo "setup-dev: done"
