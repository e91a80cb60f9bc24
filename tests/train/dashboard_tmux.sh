#!/usr/bin/env bash
# The live dashboard in a real terminal: `ember train` runs inside tmux panes of 80x24 and 120x40;
# the pane (with its scrollback, wrapped lines joined) is captured every 0.1 s while it runs and at
# the end. Every captured line must fit the pane (a wrapped line would show up as a longer joined
# line), a capture during training must show the train bar and the waiting or running valid bar,
# and the end must show both epoch lines, the summary and no left-over live block.
# Usage: dashboard_tmux.sh path/to/ember. Without tmux: skipped (exit 77), but under CI=true a
# missing tmux (scripts/setup.sh installs it) or a missing Fashion-MNIST fails.
set -u
ember=$(readlink -f "$1")
missing() {  # missing WHAT
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $1 (scripts/setup.sh installs it; CI must not skip this test)"
    exit 1
  fi
  echo "SKIP: $1"
  exit 77
}
command -v tmux >/dev/null || missing "tmux is not installed (Debian package tmux)"
if [ ! -e "${EMBER_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}/train-images-idx3-ubyte.gz" ]; then
  missing "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)"
fi
export LC_ALL=C.UTF-8  # ${#line} counts characters (the bars are UTF-8), not bytes
work=$(mktemp -d)
# One tmux server per pane size: killing a server's last session makes it exit, and a new session
# started on the same socket while it shuts down can reach the dying server ("server exited
# unexpectedly"), so the second run never shares the first run's socket.
cleanup() {
  local s
  for s in "$work"/tmux*.sock; do [ -e "$s" ] && tmux -S "$s" kill-server 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
fail=0
bad() {
  echo "FAIL $*"
  fail=1
}

# check_widths COLS FILE: no line of the capture wider than the pane.
check_widths() {
  local cols=$1 file=$2 line n=0
  while IFS= read -r line; do
    n=$((n + 1))
    line="${line%"${line##*[! ]}"}"  # trailing blanks are the pane's, not the program's
    if [ ${#line} -gt "$cols" ]; then
      bad "${cols}: line $n of $(basename "$file") is ${#line} columns wide: $line"
      return
    fi
  done <"$file"
}

run_in_pane() {  # run_in_pane COLS ROWS
  local cols=$1 rows=$2 session="dash$1" i=0 mid=0 waiting=0 cap shown=""
  local dir="$work/run$cols" sock="$work/tmux$1.sock"
  # The run: 20,000 images in batches of 32 on one thread (a few seconds an epoch), then a note of
  # the exit status; `sleep` keeps the pane for the last capture. COLUMNS/LINES unset: the
  # dashboard must ask the terminal.
  tmux -S "$sock" -f /dev/null new-session -d -s "$session" -x "$cols" -y "$rows" \
    "env -u COLUMNS -u LINES TERM=screen '$ember' train fashion-mnist --model mlp --limit 20000 --epochs 2 \
       --batch-size 32 --threads 1 --workers 1 --out '$dir'; echo \"exit status \$?\"; sleep 600" || {
    bad "${cols}x$rows: tmux could not start the session"
    return
  }
  local start=$SECONDS
  while :; do
    cap="$work/${cols}_$i.txt"
    tmux -S "$sock" capture-pane -p -J -S - -t "$session" >"$cap"
    check_widths "$cols" "$cap"
    if grep -q '^exit status' "$cap"; then break; fi
    # A capture during training: the train bar (a count) and the valid bar below it.
    if grep -Eq '^train .*[0-9]+% [0-9]+/[0-9]+' "$cap" && grep -Eq '^valid ' "$cap"; then
      mid=$((mid + 1))
      if grep -Eq '^valid .*0/0' "$cap"; then bad "${cols}x$rows: the valid bar reads 0/0: $(grep '^valid' "$cap")"; fi
      grep -Eq '^valid .*waiting' "$cap" && waiting=$((waiting + 1))
      grep -Eq '^train .* [1-9][0-9]*/[0-9]+ .*items/s' "$cap" && shown=$cap  # with progress (and plots)
    fi
    if [ $((SECONDS - start)) -gt 60 ]; then
      bad "${cols}x$rows: the run did not end within 60 s"
      cat "$cap"
      return
    fi
    i=$((i + 1))
    sleep 0.1
  done
  if [ -n "$shown" ]; then
    echo "--- ${cols}x$rows during the run:"
    grep -v '^$' "$shown"
  fi
  echo "--- ${cols}x$rows at the end ($i captures during the run, $mid with the bars, $waiting with 'valid waiting'):"
  grep -v '^$' "$cap"
  [ $mid -gt 0 ] || bad "${cols}x$rows: no capture showed the train and valid bars"
  [ $waiting -gt 0 ] || bad "${cols}x$rows: no capture showed the valid bar waiting during training"
  grep -q '^exit status 0' "$cap" || bad "${cols}x$rows: ember train failed"
  grep -Eq '^epoch 1/2  train loss [0-9.]+ acc [0-9.]+%  valid loss [0-9.]+ acc [0-9.]+%' "$cap" ||
    bad "${cols}x$rows: no line for epoch 1"
  grep -Eq '^epoch 2/2  train loss [0-9.]+ acc [0-9.]+%  valid loss [0-9.]+ acc [0-9.]+%' "$cap" ||
    bad "${cols}x$rows: no line for epoch 2"
  if [ "$cols" -ge 120 ] && ! grep -Eq '^epoch 2/2  .* items/s  .*\(ETA' "$cap"; then
    bad "${cols}x$rows: the epoch line does not fit one line"
  fi
  grep -Eq '^test accuracy [0-9.]+% after 2 epoch' "$cap" || bad "${cols}x$rows: no test accuracy"
  grep -q 'valid_accuracy' "$cap" || bad "${cols}x$rows: no validation accuracy in the summary"
  # The live block (title line with the run ETA, the bars) is gone once the run ends.
  if grep -Eq 'run ETA|^train .*[0-9]+/[0-9]+|^valid ' "$cap"; then bad "${cols}x$rows: the live block was left on screen"; fi
  tmux -S "$sock" kill-server 2>/dev/null
}

run_in_pane 80 24
run_in_pane 120 40
[ $fail = 0 ] && echo "dashboard_tmux: ok"
exit $fail
