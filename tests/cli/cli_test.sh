#!/usr/bin/env bash
# The `ember` command: each subcommand runs, bad arguments give exit code 2 and a usage line,
# a missing device gives a clear message (exit 1). Usage: cli_test.sh path/to/ember
set -u
ember=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name=$1 want=$2 pattern=$3
  shift 4
  local text rc
  text=$("$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -q -- "$pattern" <<<"$text"; then
    echo "FAIL $name: exit $rc (want $want), output:"
    echo "$text" | tail -20
    fail=1
  else
    echo "ok   $name"
  fi
}
check info 0 "backends:" -- "$ember" info
# The compiled-kernel cache: what it holds, clearing it (entries and older versions' files only).
mkdir -p "$out/cache"
head -c 2048 /dev/zero >"$out/cache/cpu-0123456789abcdef.bin"
head -c 1024 /dev/zero >"$out/cache/ember_0123456789abcdef.so"
echo mine >"$out/cache/notes.txt"
check cache-info 0 "cache: $out/cache: 1 entries, 0.0 MiB of at most 64.0 MiB (and 1 files of older" -- \
  env EMBER_CACHE_DIR="$out/cache" EMBER_CACHE_MAX_BYTES=64M "$ember" cache
check info-cache 0 "compiled-kernel cache: $out/cache: 1 entries" -- env EMBER_CACHE_DIR="$out/cache" "$ember" info
check cache-clear 0 "cleared $out/cache" -- env EMBER_CACHE_DIR="$out/cache" "$ember" cache clear
check cache-cleared 0 "0 entries, 0.0 MiB" -- env EMBER_CACHE_DIR="$out/cache" "$ember" cache info
if [ "$(ls "$out/cache")" != notes.txt ]; then echo "FAIL cache-clear-kept: $(ls "$out/cache")"; fail=1; fi
check cache-off 0 "off (EMBER_CACHE_MAX_BYTES=0)" -- env EMBER_CACHE_MAX_BYTES=0 "$ember" cache
check cache-unusable 0 "/dev/null/x cannot be created or written" -- env EMBER_CACHE_DIR=/dev/null/x "$ember" cache
check cache-bad-action 2 "cache: unknown action 'purge' (info or clear)" -- "$ember" cache purge
check cache-extra 2 "cache: unexpected argument 'now'" -- "$ember" cache clear now
check help 0 "usage: ember train" -- "$ember" --help
check no-command 2 "usage:" -- "$ember"
check unknown-command 2 "usage:" -- "$ember" frobnicate
check unknown-option 2 "unknown option --bogus" -- "$ember" train fashion-mnist --bogus
check bad-epochs 2 "expects an integer" -- "$ember" train fashion-mnist --epochs two
check zero-epochs 2 "between 1" -- "$ember" train fashion-mnist --epochs 0
check bad-lr 2 "positive number" -- "$ember" train fashion-mnist --lr -1
check bad-model 2 "must be cnn or mlp" -- "$ember" train fashion-mnist --model rnn
check bad-dataset 2 "unknown dataset" -- "$ember" train cifar10
check missing-value 2 "needs a value" -- "$ember" train fashion-mnist --epochs
check bad-device 2 "unknown device" -- "$ember" train fashion-mnist --device tpu
check eval-no-checkpoint 2 "--checkpoint PATH is required" -- "$ember" eval
check absent-device 1 "is not available" -- "$ember" train fashion-mnist --device cuda:3
check absent-cpu-index 1 "device cpu:1 is not available: the cpu backend has 1 device (cpu:0)" -- \
  "$ember" train fashion-mnist --device cpu:1
# Option values: empty, looking like an option, out of range, overflowing, given twice.
check out-empty 2 "--out needs a value" -- "$ember" train fashion-mnist --out=
check out-option 2 "--out needs a value (got the option --plain)" -- "$ember" train fashion-mnist --out --plain
check device-empty 2 "--device needs a value" -- "$ember" train fashion-mnist --device=
check lr-empty 2 "--lr needs a value" -- "$ember" train fashion-mnist --lr ""
check model-option 2 "--model needs a value" -- "$ember" train fashion-mnist --model --resume
check limit-zero 2 "--limit must be between 1 and" -- "$ember" train fashion-mnist --limit 0
check limit-negative 2 "--limit must be between 1 and" -- "$ember" train fashion-mnist --limit -5
check threads-zero 2 "--threads must be between 1 and 1024" -- "$ember" train fashion-mnist --threads 0
check workers-huge 2 "--workers must be between 0 and 64" -- "$ember" train fashion-mnist --workers 1000
check epochs-overflow 2 "--epochs must be between 1 and 10000" -- "$ember" train fashion-mnist --epochs 99999999999999999999
check seed-negative 2 "--seed must be between 0 and" -- "$ember" train fashion-mnist --seed -1
check batch-not-integer 2 "--batch-size expects an integer" -- "$ember" train fashion-mnist --batch-size 1e9
check lr-huge 2 "--lr expects a positive number" -- "$ember" train fashion-mnist --lr 1e999
check bad-precision 2 "--precision must be f32, bf16 or f16, got 'fp8'" -- "$ember" train fashion-mnist --precision fp8
check given-twice 2 "--epochs is given twice" -- "$ember" train fashion-mnist --epochs 2 --epochs 3
check eval-batch-zero 2 "--batch-size must be between 1" -- "$ember" eval --checkpoint x --batch-size 0
# eval --checkpoint must name a regular file (a folder or a FIFO would fail or hang in the loader).
check eval-directory 1 "is not a regular file" -- "$ember" eval --checkpoint "$out"
mkfifo "$out/fifo"
check eval-fifo 1 "is not a regular file" -- timeout 20 "$ember" eval --checkpoint "$out/fifo"
if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || [ -n "${EMBER_FASHION_MNIST_DIR:-}" ]; then
  check train-smoke 0 "test accuracy" -- "$ember" train fashion-mnist --model mlp --limit 500 --epochs 1 --out "$out/run" --plain
  check eval 0 "accuracy" -- "$ember" eval --checkpoint "$out/run/last.safetensors"
  check eval-missing 1 "no checkpoint" -- "$ember" eval --checkpoint "$out/none.safetensors"
  # Resume refuses other settings (listing old and new values), unless explicitly allowed.
  check resume-changed 1 "batch_size: 64 -> 32" -- \
    "$ember" train fashion-mnist --model mlp --limit 500 --epochs 1 --out "$out/run" --plain --resume --batch-size 32
  check resume-changed-limit 1 "limit: 500 -> 400" -- \
    "$ember" train fashion-mnist --model mlp --limit 400 --epochs 1 --out "$out/run" --plain --resume
  check resume-allowed 0 "settings changed on resume: batch_size 64 -> 32" -- \
    "$ember" train fashion-mnist --model mlp --limit 500 --epochs 1 --out "$out/run" --plain --resume --batch-size 32 \
    --allow-config-change
  grep -q '"type":"config_change"' "$out/run/metrics.jsonl" && echo "ok   config change logged" ||
    { echo "FAIL config change not in metrics.jsonl"; fail=1; }
  [ -s "$out/run/report.html" ] && echo "ok   report.html" || { echo "FAIL report.html missing"; fail=1; }
  # Mixed precision: bf16 and f16 runs (f16 with loss scaling) and the precision in the summary.
  check train-bf16 0 "precision: bfloat16" -- \
    "$ember" train fashion-mnist --model mlp --limit 500 --epochs 1 --out "$out/run-bf16" --plain --precision bf16
  check train-f16 0 "precision: float16 (dynamic loss scaling" -- \
    "$ember" train fashion-mnist --model mlp --limit 500 --epochs 1 --out "$out/run-f16" --plain --precision f16
  grep -q '"precision": "float16"' "$out/run-f16/checkpoint.json" && echo "ok   precision in checkpoint.json" ||
    { echo "FAIL precision not in checkpoint.json"; fail=1; }
else
  echo "skip train/eval: dataset-fashion-mnist not installed"
fi
exit $fail
