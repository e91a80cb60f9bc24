#!/usr/bin/env bash
# Renders a training run's HTML report to a PNG with headless Chromium, to check that it
# displays (plots, legend, table) without a network, and to look at it. Chromium is a developer
# tool: scripts/setup-dev.sh installs it (Debian's `chromium` package; scripts/setup.sh installs
# only `chromium-common`, the SwiftShader Vulkan driver of the tests, which has no browser). CI
# does not run this.
#
#   tools/render_report.sh runs/fashion-mlp/report.html [out.png]
#   tools/render_report.sh        # no report: a short `ember train` run (build/release) makes one;
#                                 # the picture goes to runs/report-check.png
# Exit status: 0 with a picture that is not blank, 1 otherwise (no chromium included).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "render_report: Chromium is not installed, so no screenshot. Debian's 'chromium' package is the" >&2
  echo "  browser ('chromium-common' alone, which scripts/setup.sh installs, is not): install it with" >&2
  echo "  scripts/setup-dev.sh or apt-get install chromium, or open the report in any browser." >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ $# -eq 0 ]; then
  ember="$here/build/release/bin/ember"
  [ -x "$ember" ] || { echo "render_report: no $ember; build first (cmake --build --preset release)" >&2; exit 1; }
  "$ember" train fashion-mnist --model mlp --limit 12000 --epochs 4 --plain --out "$work/run" >"$work/train.log" 2>&1 ||
    { cat "$work/train.log" >&2; exit 1; }
  report="$work/run/report.html"
  mkdir -p "$here/runs"
  png="$here/runs/report-check.png"
else
  report=$1
  png=${2:-${report%.html}.png}
fi
[ -f "$report" ] || { echo "render_report: no report at $report" >&2; exit 1; }
abs=$(readlink -f "$report")
out="$(readlink -f "$(dirname "$png")")/$(basename "$png")"
rm -f "$out"
# --no-sandbox: root in containers; a temporary profile so nothing persists.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=1000,1100 --screenshot="$out" "file://$abs" >"$work/chromium.log" 2>&1 || true
# A blank 1000x1100 page compresses to a few KB; the report's plots and tables take tens.
size=$(stat -c %s "$out" 2>/dev/null || echo 0)
if [ "$size" -lt 20000 ]; then
  echo "render_report: Chromium wrote no picture or a blank one ($size bytes) for $report:" >&2
  tail -20 "$work/chromium.log" >&2
  exit 1
fi
echo "render_report: wrote $png ($size bytes); look at it"
