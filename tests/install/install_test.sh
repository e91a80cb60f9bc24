#!/usr/bin/env bash
# Installs Ember from a build tree into a temporary (non-default) prefix and checks what a user
# gets: the installed `ember` starts (relative RUNPATH), ember.pc names that prefix, consumers built
# with find_package and with pkg-config (shared and static) run and find the backend plugins
# without EMBER_PLUGIN_PATH, and the tree still works after being moved.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset EMBER_PLUGIN_PATH LD_LIBRARY_PATH
step() { echo "-- $*"; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
prefix=$tmp/prefix
test -f "$prefix/lib/cmake/Ember/EmberConfig.cmake"
test -f "$prefix/lib/pkgconfig/ember.pc"
test -f "$prefix/lib/pkgconfig/ember-static.pc"
ls "$prefix/lib/ember/plugins/"
# The configured prefix's plugin folder must not be what makes the static consumers work.
configured=$(grep -o 'CMAKE_INSTALL_PREFIX:PATH=.*' "$build/CMakeCache.txt" | cut -d= -f2)
if [ -e "$configured/lib/ember/plugins" ]; then echo "note: $configured/lib/ember/plugins exists"; fi

step "installed bin/ember runs (RUNPATH \$ORIGIN/../lib)"
readelf -d "$prefix/bin/ember" | grep -q 'RUNPATH.*\$ORIGIN/../lib'
"$prefix/bin/ember" info | tee "$tmp/info.txt"
grep -q "cpu: 1 device(s)" "$tmp/info.txt"

step "CMake consumer (find_package), shared and static"
cmake -S "$src/tests/install/consumer" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tmp/build" >/dev/null
"$tmp/build/consumer"
"$tmp/build/consumer_static"
if [ -f "$prefix/lib/libember_dist_mpi.so" ]; then
  step "CMake consumer of Ember::ember_dist_mpi (one MPI process, singleton mode)"
  test -x "$tmp/build/consumer_dist"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$tmp/build/consumer_dist" | grep -q "dist consumer ok"
fi

step "pkg-config: prefix, shared and static consumers"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --modversion ember
test "$(realpath "$(pkg-config --variable=prefix ember)")" = "$(realpath "$prefix")"
pkg-config --static --libs ember | grep -q -- "-lz" && pkg-config --static --libs ember | grep -q -- "-lstb"
# shellcheck disable=SC2046
g++ -O1 "$src/tests/install/consumer/main.cpp" -o "$tmp/pc_shared" $(pkg-config --cflags --libs ember) \
  -Wl,-rpath,"$(pkg-config --variable=libdir ember)"
"$tmp/pc_shared"
# shellcheck disable=SC2046
g++ -O1 "$src/tests/install/consumer/main.cpp" -o "$tmp/pc_static" $(pkg-config --cflags --libs ember-static)
if ldd "$tmp/pc_static" | grep -q libember; then echo "pc_static links libember.so"; exit 1; fi
"$tmp/pc_static"

step "the moved tree still works"
mv "$prefix" "$tmp/moved"
"$tmp/moved/bin/ember" info >/dev/null
test "$(realpath "$(PKG_CONFIG_PATH=$tmp/moved/lib/pkgconfig pkg-config --variable=prefix ember)")" = "$(realpath "$tmp/moved")"
echo "install test passed"
