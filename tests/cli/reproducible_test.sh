#!/usr/bin/env bash
# Reproducibility of the default settings (EMBER_CPU_TIER=auto): two identical training commands
# give byte-identical models, the first with an empty compiled-kernel cache (kernels compile
# while it trains) and the second with that cache filled (kernels are ready at once). Before the
# tier switch depended on the launch count only, the two switched at different steps and their
# weights differed. Usage: reproducible_test.sh path/to/ember
set -u
ember=$1
data=${EMBER_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ ! -e "$data/train-images-idx3-ubyte.gz" ] && [ ! -e "$data/train-images-idx3-ubyte" ]; then
  echo "SKIP: Fashion-MNIST not found in $data (Debian's dataset-fashion-mnist)"
  exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
unset EMBER_CPU_TIER
export EMBER_CACHE_DIR="$out/kernels"
for run in first second; do
  if ! "$ember" train fashion-mnist --model cnn --limit 1000 --epochs 1 --plain --out "$out/$run" >"$out/$run.log" 2>&1; then
    echo "FAIL: the $run run failed:"
    tail -20 "$out/$run.log"
    exit 1
  fi
done
if ! ls "$EMBER_CACHE_DIR"/cpu-*.bin >/dev/null 2>&1; then
  echo "note: no compiled kernels were cached (no compiler?): both runs stayed on the interpreter"
fi
if cmp "$out/first/last.safetensors" "$out/second/last.safetensors"; then
  echo "ok   identical models from a cold and a warm kernel cache"
  grep "test accuracy" "$out/first.log"
else
  echo "FAIL: the two runs' models differ"
  grep "test accuracy" "$out/first.log" "$out/second.log"
  exit 1
fi
