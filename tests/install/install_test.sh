#!/usr/bin/env bash
# Installs Ember from a build tree into a temporary prefix, builds the consumer project against
# it with find_package, and runs it (shared and static). Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/lib/cmake/Ember/EmberConfig.cmake"
test -f "$tmp/prefix/lib/pkgconfig/ember.pc"
ls "$tmp/prefix/lib/ember/plugins/"
cmake -S "$src/tests/install/consumer" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/build" >/dev/null
# Shared: plugins are found next to the installed libember.so.
env -u EMBER_PLUGIN_PATH "$tmp/build/consumer"
# Static: the plugin folder is named by EMBER_PLUGIN_PATH (the compiled-in prefix is another one).
EMBER_PLUGIN_PATH="$tmp/prefix/lib/ember/plugins" "$tmp/build/consumer_static"
# pkg-config sees the package.
PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig" pkg-config --modversion ember
echo "install test passed"
