#!/bin/bash
# PyTorch's best configuration needs an optimized BLAS: Debian's python3-torch calls the generic
# libblas.so.3, which is the slow reference BLAS unless OpenBLAS is installed (matmul 1024² took
# 370 ms instead of 17 ms here). This unpacks Debian's OpenBLAS into build/peer-openblas WITHOUT
# installing it, and bench/run puts it on the PyTorch child's LD_LIBRARY_PATH only (Ember does not
# use BLAS). Nothing happens when OpenBLAS is already installed; failures are not fatal.
set -u
root="$(cd "$(dirname "$0")/.." && pwd)"
for d in /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu/openblas-openmp; do
  [ -e "$d/libblas.so.3" ] && exit 0
done
dest="$root/build/peer-openblas"
[ -e "$dest/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3" ] && exit 0
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if (cd "$tmp" && apt-get download libopenblas0-pthread >/dev/null 2>&1); then
  mkdir -p "$dest" && dpkg-deb -x "$tmp"/libopenblas0-pthread_*.deb "$dest" && echo "bench: OpenBLAS for the PyTorch peer unpacked into $dest"
else
  echo "bench: could not download OpenBLAS; PyTorch will use the system BLAS (see bench/README.md)" >&2
fi
exit 0
