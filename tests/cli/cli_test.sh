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
if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || [ -n "${EMBER_FASHION_MNIST_DIR:-}" ]; then
  check train-smoke 0 "test accuracy" -- "$ember" train fashion-mnist --model mlp --limit 500 --epochs 1 --out "$out/run" --plain
  check eval 0 "accuracy" -- "$ember" eval --checkpoint "$out/run/last.safetensors"
  check eval-missing 1 "no checkpoint" -- "$ember" eval --checkpoint "$out/none.safetensors"
  [ -s "$out/run/report.html" ] && echo "ok   report.html" || { echo "FAIL report.html missing"; fail=1; }
else
  echo "skip train/eval: dataset-fashion-mnist not installed"
fi
exit $fail
