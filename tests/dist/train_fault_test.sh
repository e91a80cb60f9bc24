#!/bin/bash
# ctest dist.mpi.train_fault_np2: rank 1 of `mpirun -np 2 ember train` is killed (SIGKILL) after
# the first epoch's checkpoint; the job ends non-zero within a bounded time naming rank 1, the
# checkpoint stays intact (ember eval loads it) and the run resumes on 1 process. Then rank 1 of
# a second run is stopped (SIGSTOP, a hang): rank 0 fails after EMBER_DIST_TIMEOUT (10 s) naming
# rank 1, and the job ends.
# Usage: train_fault_test.sh MPIRUN EMBER. Exit 77 (skip) without the Fashion-MNIST files.
set -u
mpirun=$1 ember=$2
dir=$(mktemp -d) && trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$dir/log"; exit 1; }
if ! "$ember" info | grep -q "fashion-mnist data: .*(found)"; then echo "SKIP: no Fashion-MNIST data"; exit 77; fi
export OMP_NUM_THREADS=1 EMBER_DIST_TIMEOUT=10

# Starts a 2-process run into $1 and, once its first checkpoint is written, sets $launcher and
# $victim (rank 1's pid).
start_run() {
  "$mpirun" --oversubscribe --allow-run-as-root -np 2 "$ember" train fashion-mnist --limit 3000 --epochs 50 --plain \
    --out "$1" >"$dir/log" 2>&1 &
  launcher=$!
  for _ in $(seq 600); do  # up to 60 s for the first checkpoint
    grep -q '"epoch": 1' "$1/checkpoint.json" 2>/dev/null && break
    sleep 0.1
  done
  grep -q '"epoch": 1' "$1/checkpoint.json" 2>/dev/null || { kill "$launcher"; fail "no checkpoint within 60 s"; }
  victim=""
  for pid in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$pid; fi
  done
  [ -n "$victim" ] || { kill "$launcher"; fail "rank 1's process not found among mpirun's children"; }
}

start_run "$dir/run"
kill -9 "$victim"
start=$(date +%s)
wait "$launcher"
status=$? took=$(( $(date +%s) - start ))
[ "$status" != 0 ] || fail "the job exited with 0 after rank 1 was killed"
[ "$took" -le 30 ] || fail "the job took $took s to end after rank 1 was killed (timeout 10 s)"
grep -qi "rank 1" "$dir/log" || fail "the output does not name rank 1"
grep -i "rank 1" "$dir/log" | head -3
echo "job ended with status $status $took s after rank 1 was killed"

"$ember" eval --checkpoint "$dir/run/last.safetensors" >"$dir/log" 2>&1 || fail "ember eval of the last checkpoint failed"
"$ember" train fashion-mnist --limit 3000 --epochs 2 --plain --resume --out "$dir/run" >"$dir/log" 2>&1 \
  || fail "resuming on 1 process failed"
grep -q "resuming $dir/run after epoch" "$dir/log" || fail "the 1-process run did not resume"

start_run "$dir/hang"
kill -STOP "$victim"
start=$(date +%s)
wait "$launcher"
status=$? took=$(( $(date +%s) - start ))
kill -9 "$victim" 2>/dev/null
[ "$status" != 0 ] || fail "the job exited with 0 while rank 1 hung"
[ "$took" -le 40 ] || fail "the job took $took s to end while rank 1 hung (timeout 10 s)"
# "waiting for" when rank 1 stopped before its part of the collective, "sending to" when it had
# sent its part but stopped before taking rank 0's (which depends on when SIGSTOP lands).
grep -Eq "timed out after 10 s (waiting for|sending to) rank 1" "$dir/log" || fail "rank 0 did not name the hung rank 1"
grep -m1 "timed out" "$dir/log"
echo "hung job ended with status $status after $took s"
"$ember" eval --checkpoint "$dir/hang/last.safetensors" >/dev/null 2>&1 || fail "the hung run's checkpoint does not load"
echo "PASS"
