#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Builds the programs of tests/test_hipcc.c with Debian's hipcc once
# (cells.mk, in parallel) and prints the directory that holds them:
# BASE/KEY, KEY a hash of the sources, cells.mk, this script and the
# versions of the packages that compile and link them. A later run with
# the same key prints the same directory without compiling, so the
# plain, sanitizer and valgrind runs of `make check` share one build.
# Usage: tests/hipcc/build.sh BASE
set -eu
here=$(cd "$(dirname "$0")" && pwd)
base=$1
key=$({
  cat "$here/cells.mk" "$here/build.sh" "$here"/*.hip
  dpkg-query -W hipcc clang-15 lld-14 lld-15 rocm-device-libs \
    libamdhip64-dev binutils 2>&1
} | sha256sum | cut -c1-16)
dir=$base/$key
mkdir -p "$base"
# One build at a time; the others wait for it and reuse it.
exec 9>"$base/.lock"
flock 9
if [ ! -f "$dir/.built" ]; then
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  jobs=$(nproc 2>/dev/null || echo 2)
  if ! make -s -f "$here/cells.mk" -j"$jobs" OUT="$dir.tmp" \
      >"$dir.tmp/.log" 2>&1; then
    cat "$dir.tmp/.log" >&2
    exit 1
  fi
  touch "$dir.tmp/.built"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
fi
echo "$dir"
