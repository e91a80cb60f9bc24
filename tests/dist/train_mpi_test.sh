#!/bin/bash
# ctest dist.mpi.train_np2: `mpirun -np 2 ember train fashion-mnist --limit 2000 --epochs 1 --plain`
# completes, rank 0 alone prints (one header, one summary), the checkpoint is written; that
# checkpoint resumes on 1 process for a second epoch; and `--nproc 2` (ember running mpirun itself)
# resumes it again for a third. Usage: train_mpi_test.sh MPIRUN EMBER. Exit 77 (skip) without the
# Fashion-MNIST files.
set -u
mpirun=$1 ember=$2
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$dir/log"; exit 1; }
if ! "$ember" info | grep -q "fashion-mnist data: .*(found)"; then echo "SKIP: no Fashion-MNIST data"; exit 77; fi
export OMP_NUM_THREADS=1

"$mpirun" --oversubscribe --allow-run-as-root -np 2 "$ember" train fashion-mnist --limit 2000 --epochs 1 --plain \
  --out "$dir/run" >"$dir/log" 2>&1 || fail "mpirun -np 2 ember train exited with $?"
[ "$(grep -c '^ember train fashion-mnist: ' "$dir/log")" = 1 ] && [ "$(grep -c '^  .*epoch(s), .*2 processes (MPI)' "$dir/log")" = 1 ] \
  || fail "expected one header (two lines) naming 2 processes"
[ "$(grep -c '^test accuracy' "$dir/log")" = 1 ] || fail "expected one 'test accuracy' line (rank 0 alone)"
[ "$(grep -c '^run folder' "$dir/log")" = 1 ] || fail "expected one summary"
[ -f "$dir/run/checkpoint.json" ] && [ -f "$dir/run/last.safetensors" ] || fail "no checkpoint written"
grep -q '"ranks": 2' "$dir/run/checkpoint.json" || fail "checkpoint.json does not record 2 ranks"
acc=$(sed -n 's/^test accuracy \([0-9.]*\)%.*/\1/p' "$dir/log")
awk -v a="$acc" 'BEGIN { exit !(a > 60) }' || fail "test accuracy $acc% after one epoch of 2000 images (expected > 60%)"

# The 2-process checkpoint on 1 process.
"$ember" train fashion-mnist --limit 2000 --epochs 2 --plain --resume --out "$dir/run" >"$dir/log" 2>&1 \
  || fail "1-process resume exited with $?"
grep -q "resuming $dir/run after epoch 1" "$dir/log" || fail "the 1-process run did not resume"
grep -q '"epoch": 2' "$dir/run/checkpoint.json" || fail "no epoch 2 checkpoint"
grep -q '"ranks": 1' "$dir/run/checkpoint.json" || fail "checkpoint.json does not record 1 rank"

# --nproc 2: ember runs mpirun itself; it resumes the 1-process checkpoint.
"$ember" train fashion-mnist --limit 2000 --epochs 3 --plain --resume --nproc 2 --out "$dir/run" >"$dir/log" 2>&1 \
  || fail "--nproc 2 exited with $?"
[ "$(grep -c "resuming $dir/run after epoch 2" "$dir/log")" = 1 ] || fail "--nproc 2 did not resume once (rank 0)"
grep -q '"ranks": 2' "$dir/run/checkpoint.json" && grep -q '"epoch": 3' "$dir/run/checkpoint.json" \
  || fail "no 2-rank epoch 3 checkpoint"
echo "PASS"
