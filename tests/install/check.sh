#!/bin/sh
# SPDX-License-Identifier: MIT
#
# `make install-check`: installs kpack into scratch trees and proves every
# way a consumer finds and links the library, as a ROCm build or
# installation would: pkg-config (shared and static), CMake's
# find_package(rocm-kpack) with rocm::rocm_kpack and
# rocm::rocm_kpack_static, and a program linked with
# -l:librocm_kpack.so.0 run against the installed tree. Then the tree is
# moved, and pkg-config (plain, as the .pc is relative to its own
# directory) and CMake still find it. Also
# checks the installed layout, the soname, that the library exports only
# kpack_* symbols, the CMake version rules and the man pages, that
# `make uninstall` removes every file `make install` wrote, and that the
# README's install block does what it says.
#
# Environment: BUILD (default build), MAKE (default make), CC (default cc).
# One line per check; each failure shows its log. Exits 1 on any failure.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
make_cmd=${MAKE:-make}
cc=${CC:-cc}
export BUILD="${BUILD:-build}"

work=$(mktemp -d "${TMPDIR:-/tmp}/kpack-install-check.XXXXXX")
trap 'rm -rf "$work"' EXIT
log="$work/log"
passed=0
failed=0

# check NAME COMMAND...: runs the command with its output in the log.
check() {
  name=$1
  shift
  if "$@" >"$log" 2>&1; then
    printf 'ok      %s\n' "$name"
    passed=$((passed + 1))
  else
    printf 'FAILED  %s\n' "$name"
    sed 's/^/        /' "$log"
    failed=$((failed + 1))
  fi
}

# The tree installed for PREFIX=$work/usr, and one staged with DESTDIR for
# PREFIX=/opt/rocm-kpack: found at a place it was not configured for.
tree="$work/usr"
staged="$work/stage/opt/rocm-kpack"

install_trees() {
  cd "$root" &&
    $make_cmd --no-print-directory install PREFIX="$tree" &&
    $make_cmd --no-print-directory install PREFIX=/opt/rocm-kpack \
      DESTDIR="$work/stage"
}

layout() {
  lib="$1/lib"
  for f in "$lib/librocm_kpack.so.0.1.0" "$lib/librocm_kpack.a" \
    "$1/include/rocm_kpack/kpack.h" "$1/include/rocm_kpack/kpack_ext.h" \
    "$lib/pkgconfig/rocm_kpack.pc" \
    "$lib/cmake/rocm-kpack/rocm-kpack-config.cmake" \
    "$lib/cmake/rocm-kpack/rocm-kpack-config-version.cmake" \
    "$1/bin/kpack" "$1/bin/kpackfs" \
    "$1/share/man/man1/kpack.1" "$1/share/man/man8/kpackfs.8" \
    "$1/share/bash-completion/completions/kpack"; do
    [ -f "$f" ] || { echo "missing: $f"; return 1; }
  done
  [ "$(readlink "$lib/librocm_kpack.so.0")" = librocm_kpack.so.0.1.0 ] &&
    [ "$(readlink "$lib/librocm_kpack.so")" = librocm_kpack.so.0 ] ||
    { ls -l "$lib"; return 1; }
}

soname() {
  readelf -d "$tree/lib/librocm_kpack.so.0.1.0" |
    grep -F '(SONAME)' | grep -F '[librocm_kpack.so.0]'
}

# Every dynamic symbol the library defines is kpack_*, and every function
# kpack.h declares is among them.
exports() {
  nm -D --defined-only "$tree/lib/librocm_kpack.so.0.1.0" |
    awk '{ print $NF }' | sort >"$work/exported"
  echo "exported:"
  cat "$work/exported"
  [ -s "$work/exported" ] || return 1
  if grep -v '^kpack_' "$work/exported"; then
    echo "^ exported but not kpack_*"
    return 1
  fi
  tr -s ' \n' '  ' <"$tree/include/rocm_kpack/kpack.h" |
    grep -o 'KPACK_API [^(]*(' | grep -o 'kpack_[a-z_]*($' | tr -d '(' |
    sort -u \
    >"$work/declared"
  [ -s "$work/declared" ] || { echo "no KPACK_API function in kpack.h"; return 1; }
  missing=$(comm -23 "$work/declared" "$work/exported")
  [ -z "$missing" ] || { echo "declared in kpack.h, not exported: $missing"; return 1; }
}

# needs BINARY: it was linked against the soname, not a file name.
needs_soname() {
  readelf -d "$1" | grep -F '(NEEDED)' | grep -F '[librocm_kpack.so.0]'
}

run_example() { # BINARY LIBDIR
  LD_LIBRARY_PATH="$2" "$1" "$work/$(basename "$1").kpack"
}

pkgconfig_shared() { # PKG_CONFIG_PATH [pkg-config options]
  pcpath=$1
  shift
  flags=$(PKG_CONFIG_PATH=$pcpath pkg-config "$@" --cflags --libs rocm_kpack) &&
    echo "pkg-config: $flags" &&
    libdir=$(PKG_CONFIG_PATH=$pcpath pkg-config "$@" --variable=libdir rocm_kpack) &&
    # shellcheck disable=SC2086
    $cc -std=c11 -Wall -Werror "$root/tests/install/example.c" \
      -o "$work/pc-shared" $flags &&
    needs_soname "$work/pc-shared" && run_example "$work/pc-shared" "$libdir"
}

pkgconfig_static() {
  pc="$tree/lib/pkgconfig"
  # shellcheck disable=SC2046
  $cc -std=c11 -Wall -Werror "$root/tests/install/example.c" \
    -o "$work/pc-static" $(PKG_CONFIG_PATH=$pc pkg-config --cflags rocm_kpack) \
    "$tree/lib/librocm_kpack.a" \
    $(PKG_CONFIG_PATH=$pc pkg-config --static --libs-only-other \
      --libs-only-l rocm_kpack | sed 's/-lrocm_kpack//') &&
    ! readelf -d "$work/pc-static" | grep -F librocm_kpack &&
    "$work/pc-static" "$work/pc-static.kpack"
}

plain_soname() {
  $cc -std=c11 -Wall -Werror "$root/tests/install/example.c" \
    -o "$work/plain" -I"$tree/include" -L"$tree/lib" -l:librocm_kpack.so.0 &&
    needs_soname "$work/plain" && run_example "$work/plain" "$tree/lib"
}

cmake_consumer() { # PREFIX_PATH BUILD_DIR
  CC=$cc cmake -S "$root/tests/install/cmake" -B "$2" \
    -DCMAKE_PREFIX_PATH="$1" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$2" &&
    needs_soname "$2/example" &&
    # CMake's build RPATH points at the imported library: no
    # LD_LIBRARY_PATH needed.
    "$2/example" "$2/example.kpack" &&
    # rocm::rocm_kpack_static: linked in, nothing of librocm_kpack needed
    ! readelf -d "$2/example_static" | grep -F librocm_kpack &&
    "$2/example_static" "$2/example_static.kpack"
}

# make uninstall with the PREFIX (and DESTDIR) of an install leaves no file
# and no directory: PREFIX itself is gone.
uninstall() { # PREFIX [DESTDIR]
  dir=$work/uninstall
  rm -rf "$dir"
  cd "$root" &&
    $make_cmd --no-print-directory install PREFIX="$1" DESTDIR="${2:-}" &&
    [ -n "$(find "${2:-}$1" -type f)" ] &&
    $make_cmd --no-print-directory uninstall PREFIX="$1" DESTDIR="${2:-}" &&
    { [ ! -e "${2:-}$1" ] || { echo "left behind:"; find "${2:-}$1"; false; }; }
}

# The README's install block, line by line as written but for two
# changes that keep the machine's own directories out of a test: `ldconfig`
# (the machine's loader cache) is left out, and every `make
# install`/`uninstall` gets DESTDIR=$work/readme (a DESTDIR on the line
# becomes that one). Then: the multiarch LIBDIR install and the
# staged PREFIX=/usr one are there, and the uninstall left nothing of the
# default /usr/local one.
readme_install() {
  into=$work/readme
  rm -rf "$into"
  block=$(awk '/^## Install/ { on = 1 } on && /^```sh/ { inside = 1; next }
    inside && /^```/ { exit } inside { print }' "$root/README.md")
  [ -n "$block" ] || { echo "README.md: no install block"; return 1; }
  echo "$block" | grep -q '^make uninstall' ||
    { echo "README.md: the install block has no uninstall"; return 1; }
  echo "$block" | while IFS= read -r line; do
    cmd=${line%%#*}
    cmd=$(echo "$cmd" | sed -e 's/DESTDIR=[^ ]*//')
    case $cmd in
      ldconfig*) continue ;;
      make\ install* | make\ uninstall*) cmd="$cmd DESTDIR=$into" ;;
    esac
    echo "+ $cmd"
    (cd "$root" && eval "$cmd --no-print-directory") || return 1
  done &&
    for f in opt/rocm-kpack/lib/x86_64-linux-gnu/librocm_kpack.so.0.1.0 \
      opt/rocm-kpack/lib/x86_64-linux-gnu/pkgconfig/rocm_kpack.pc \
      opt/rocm-kpack/bin/kpack usr/lib/librocm_kpack.a usr/bin/kpackfs; do
      [ -f "$into/$f" ] || { echo "missing: $f"; return 1; }
    done &&
    { [ ! -e "$into/usr/local" ] || { echo "left behind:"; find "$into/usr/local"; false; }; }
}

cmake_version() { # accept|refuse VERSION [EXACT]
  dir="$work/cmake-version-$(printf '%s' "$2$*" | tr -c 'a-zA-Z0-9' _)"
  cmake -S "$root/tests/install/cmake-version" -B "$dir" \
    -DCMAKE_PREFIX_PATH="$tree" -DWANT="$2" -DEXACT="${3:-}"
  rc=$?
  if [ "$1" = accept ]; then [ $rc = 0 ]; else [ $rc != 0 ]; fi
}

cmake_versions() {
  for v in 0.1 0.1.0 0.0.9 "0.1...<1" "0.0.1...0.1.0"; do
    cmake_version accept "$v" || { echo "refused $v"; return 1; }
  done
  cmake_version accept 0.1.0 EXACT || { echo "refused 0.1.0 EXACT"; return 1; }
  for v in 0.2 0.1.1 1.0 1 "1...2" "0.2...<1" "0.0.1...<0.1.0"; do
    cmake_version refuse "$v" || { echo "accepted $v"; return 1; }
  done
  cmake_version refuse 0.1 EXACT || { echo "accepted 0.1 EXACT"; return 1; }
}

# Man pages: rendered by man -l without a roff warning, and found by name
# in the installed tree's share/man.
man_pages() {
  for page in man1/kpack.1 man8/kpackfs.8; do
    f="$tree/share/man/$page"
    warnings=$(groff -ww -man -z "$f" 2>&1) || return 1
    [ -z "$warnings" ] || { echo "$f: $warnings"; return 1; }
    MANWIDTH=80 man -l "$f" >"$work/rendered" 2>"$work/man.err" || return 1
    [ ! -s "$work/man.err" ] || { cat "$work/man.err"; return 1; }
    grep -q 'SYNOPSIS' "$work/rendered" || return 1
  done
  MANWIDTH=80 man -M "$tree/share/man" kpackfs | grep -q 'kpackfs' &&
    MANWIDTH=80 man -M "$tree/share/man" 1 kpack | grep -q 'kpack list'
}

check "make install PREFIX=... and DESTDIR=... PREFIX=/opt/rocm-kpack" install_trees
if [ "$failed" -gt 0 ]; then
  echo "install-check: $passed passed, $failed failed"
  exit 1
fi
check "layout: soname links, headers, .pc, CMake package, programs, man pages" layout "$tree"
check "layout under DESTDIR" layout "$staged"
check "readelf -d: SONAME librocm_kpack.so.0" soname
check "exports: only kpack_*, every kpack.h function" exports
check "pkg-config --cflags --libs rocm_kpack (shared)" \
  pkgconfig_shared "$tree/lib/pkgconfig"
check "pkg-config --static with librocm_kpack.a" pkgconfig_static
check "cc ... -l:librocm_kpack.so.0, run against the tree" plain_soname
check "CMake find_package(rocm-kpack) + rocm::rocm_kpack, rocm::rocm_kpack_static" \
  cmake_consumer "$tree" "$work/cmake"
check "CMake version rules (SameMajorVersion, ranges, EXACT)" cmake_versions
if command -v man >/dev/null 2>&1 && command -v groff >/dev/null 2>&1; then
  check "man -l kpack.1 kpackfs.8: no roff warnings; man -M finds them" man_pages
else
  echo "FAILED  man pages: man and groff are needed (apt-get install man-db)"
  failed=$((failed + 1))
fi
check "DESTDIR tree: CMake finds it where it is" \
  cmake_consumer "$staged" "$work/cmake-staged"
check "DESTDIR tree: pkg-config" \
  pkgconfig_shared "$staged/lib/pkgconfig"
mv "$tree" "$work/moved"
tree="$work/moved"
check "moved tree: CMake" cmake_consumer "$tree" "$work/cmake-moved"
check "moved tree: pkg-config" \
  pkgconfig_shared "$tree/lib/pkgconfig"
check "moved tree: the -l:librocm_kpack.so.0 program runs against it" \
  run_example "$work/plain" "$tree/lib"

check "make uninstall PREFIX=... removes every installed file" \
  uninstall "$work/un"
check "make uninstall DESTDIR=... PREFIX=/opt/rocm-kpack" \
  uninstall /opt/rocm-kpack "$work/unstage"
check "README's install block (make, make install, LIBDIR, DESTDIR, uninstall)" \
  readme_install

echo "install-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
