#!/usr/bin/env bash
# The benchmark peer's virtual environment: PyTorch 2.x, ONNX Runtime, onnx and NumPy from PyPI,
# in a venv outside the repository (shared by every checkout and worktree), so that `make bench`
# compares Ember with the PyTorch a user installs today. Optional: never a build, runtime, test or
# CI dependency (bench/run falls back to /usr/bin/python3 and Debian's python3-torch 1.13).
#
#   bash scripts/bench-venv.sh            create or update it (scripts/setup-dev.sh calls this)
#   EMBER_BENCH_VENV=DIR bash scripts/bench-venv.sh   elsewhere (bench/run reads the same variable)
#   EMBER_BENCH_PIP_ARGS="--index-url URL" ...         e.g. a CPU-only torch index, where reachable
#
# Default place: ${XDG_CACHE_HOME:-~/.cache}/ember/bench-venv. Plain PyPI's torch wheel for Linux
# x86-64 is the CUDA build: it pulls about 4 GB of nvidia-* packages (the venv is about 5.5 GB);
# bench/run uses only its CPU side. Here it took about 12 minutes (mostly the download).
set -euo pipefail
VENV="${EMBER_BENCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ember/bench-venv}"
PY="${EMBER_BENCH_BASE_PYTHON:-/usr/bin/python3}"
if [ ! -x "$VENV/bin/python" ]; then
  mkdir -p "$(dirname "$VENV")"
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q --disable-pip-version-check ${EMBER_BENCH_PIP_ARGS:-} \
  'torch>=2,<3' numpy onnxruntime onnx
"$VENV/bin/python" - <<'EOF'
import onnxruntime, torch
print("bench-venv: torch %s (MKL %s, oneDNN %s), onnxruntime %s"
      % (torch.__version__, torch.backends.mkl.is_available(), torch.backends.mkldnn.is_available(),
         onnxruntime.__version__))
EOF
echo "bench-venv: $VENV (bench/run uses $VENV/bin/python by default)"
