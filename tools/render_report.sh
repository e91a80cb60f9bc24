#!/usr/bin/env bash
# Renders a training run's HTML report to a PNG with headless Chromium, to check that it
# displays (plots, table) without a network. Chromium is a developer tool: scripts/setup-dev.sh
# installs it (Debian's `chromium` package); CI does not need it.
#
#   tools/render_report.sh runs/fashion-cnn/report.html [out.png]
set -euo pipefail
report=${1:?usage: tools/render_report.sh REPORT.html [OUT.png]}
png=${2:-${report%.html}.png}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
  echo "render_report: no chromium found; run scripts/setup-dev.sh (installs Debian's chromium)" >&2
  exit 1
fi
abs=$(readlink -f "$report")
# --no-sandbox: root in containers; a temporary profile so nothing persists.
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile" \
  --window-size=1000,1100 --screenshot="$(readlink -f "$(dirname "$png")")/$(basename "$png")" "file://$abs" >/dev/null 2>&1
echo "render_report: wrote $png"
