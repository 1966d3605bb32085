#!/bin/sh
# SPDX-License-Identifier: MIT
#
# `make demo`: packs the real AMD GPU code objects of Debian's librocrand1
# into a kpack archive, mounts it with kpackfs (or extracts it when kpackfs
# is not built or cannot mount), looks at one kernel and shows the loader's
# search. `contrib/demo.sh fetch` only downloads and unpacks the package into
# .cache/ and prints the library's path; the test suites use that.
#
# Environment: BUILD (build directory, default "build"), MAKE (default make).
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache"
build="$root/${BUILD:-build}"
make_cmd=${MAKE:-make}
# Build and test dependencies (make check); cmake and man-db are for make
# install-check (CMake consumer, man pages), groff-base for the man page
# suite, jq for the suite that parses every --json output, elfutils for
# eu-elflint and eu-strip on transformed binaries, libamdhip64-5 (Debian's
# HIP runtime) to load a split librocrand the way a program would, rsync
# for the mount tests that copy a fresh mount, lld-14 and patchelf for the
# suite that links programs with lld and patches transformed ones; hipcc,
# rocm-device-libs, libamdhip64-dev and lld-15 to build the real HIP
# programs the split is checked on (and the extension module of the wheel
# split's test), clang-tools-15 for the clang-offload-bundler that checks
# it; the python3 packages build and test the Python package (python/)
# offline; git for the check that the suites leave the clone as they found
# it.
packages="libzstd-dev libmsgpack-dev libfuse3-dev fuse3 libcmocka-dev pkg-config zlib1g-dev binutils elfutils groff-base cmake man-db jq libamdhip64-5 rsync lld-14 patchelf hipcc rocm-device-libs libamdhip64-dev lld-15 clang-tools-15 python3-dev python3-setuptools python3-wheel python3-pytest python3-venv python3-pip git"
# What `make bench` compares against: squashfuse_ll, mksquashfs, zstd;
# and what packs the wheel of its wheel-split row.
bench_packages="squashfuse squashfs-tools zstd python3-wheel"

if [ -t 1 ]; then bold='\033[1m' plain='\033[0m'; else bold='' plain=''; fi
say() { printf "\n${bold}== %s${plain}\n" "$*"; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
show() { printf '$ %s\n' "$*"; "$@"; }

is_root() { [ "$(id -u)" = 0 ]; }

# quietly WHAT COMMAND...: one line on the screen, the command's output in
# .cache/WHAT.log; on failure that log is shown in full.
quietly() {
  what=$1
  shift
  mkdir -p "$cache"
  log="$cache/$what.log"
  printf '%s (%s, log in .cache/%s.log) ... ' "$what" "$(basename "$1")" "$what"
  if "$@" >"$log" 2>&1; then
    echo "done"
  else
    status=$?
    echo "failed (exit $status); its output:"
    cat "$log"
    exit "$status"
  fi
}

# The unpacked librocrand.so.1.1, if a previous run left it.
cached_library() {
  find "$cache/librocrand1" -name 'librocrand.so.1.1' -type f 2>/dev/null | head -n 1
}

# Downloads librocrand1 (Debian 12 main, amd64) and unpacks it under .cache/.
# A lock keeps concurrent test suites from unpacking it twice.
fetch() {
  mkdir -p "$cache/deb"
  (
    flock 9
    if [ -z "$(cached_library)" ]; then
      cd "$cache/deb"
      if ! ls librocrand1_*.deb >/dev/null 2>&1; then
        # As root apt would hand the download to the _apt user, which
        # cannot write into a private checkout.
        sandbox=""
        is_root && sandbox="-o APT::Sandbox::User=root"
        # shellcheck disable=SC2086
        if ! apt-get -q $sandbox download librocrand1 >&2; then
          is_root || die "apt-get download librocrand1 failed (run 'apt-get update' as root?)"
          echo "demo: package lists may be stale; running apt-get update" >&2
          apt-get -q update >&2 || die "apt-get update failed: is the network reachable?"
          # shellcheck disable=SC2086
          apt-get -q $sandbox download librocrand1 >&2 ||
            die "apt-get download librocrand1 failed"
        fi
      fi
      rm -rf "$cache/librocrand1.tmp"
      dpkg-deb -x librocrand1_*.deb "$cache/librocrand1.tmp"
      rm -rf "$cache/librocrand1"
      mv "$cache/librocrand1.tmp" "$cache/librocrand1"
    fi
  ) 9>"$cache/.fetch.lock"
  lib=$(cached_library)
  [ -n "$lib" ] || die "librocrand.so.1.1 not found in the librocrand1 package"
  printf '%s\n' "$lib"
}

install_packages() {
  missing=""
  for p in $packages; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
      missing="$missing $p"
  done
  command -v cc >/dev/null 2>&1 || missing="$missing gcc libc6-dev"
  if [ -z "$missing" ]; then
    echo "all build dependencies are installed"
  elif is_root; then
    export DEBIAN_FRONTEND=noninteractive
    echo "installing:$missing"
    quietly apt-update apt-get update
    # shellcheck disable=SC2086
    quietly apt-install apt-get install -y --no-install-recommends $missing
  else
    die "missing packages:$missing (run 'make demo' as root to install them)"
  fi
}

# `make bench`: installs what it compares against when root; otherwise
# says what is missing, and the bench marks those rows as not run.
install_bench_packages() {
  missing=""
  for p in $bench_packages; do
    dpkg-query -W -f '${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
      missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  if is_root; then
    export DEBIAN_FRONTEND=noninteractive
    echo "bench: installing$missing"
    apt-get -qq update >/dev/null &&
      # shellcheck disable=SC2086
      apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
      die "could not install$missing"
  else
    echo "bench: missing packages:$missing (run 'make bench' as root to" \
      "install them); the rows that need them will not run" >&2
  fi
}

mnt=""
cleanup() {
  if [ -n "$mnt" ] && mountpoint -q "$mnt" 2>/dev/null; then
    fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || true
  fi
}

demo() {
  say "1. build dependencies"
  install_packages

  say "2. build"
  quietly build $make_cmd -C "$root" --no-print-directory BUILD="${BUILD:-build}"
  kpack="$build/bin/kpack"
  kpackfs="$build/bin/kpackfs"
  [ -x "$kpack" ] || die "$kpack was not built"

  say "3. Debian's librocrand1: a HIP library with real AMD GPU code objects"
  lib=$(fetch)
  echo "$lib"
  readelf -SW "$lib" | grep -E 'hip_fatbin|hipFatBinSegment'

  say "4. pack the code objects of its .hip_fatbin into a kpack archive"
  # The install tree a kpack'd ROCm looks like: the library in lib/, the
  # archive in .kpack/ next to it.
  work="$cache/demo"
  # A mount left by an interrupted run would make rm fail on a read-only fs.
  if mountpoint -q "$work/mnt" 2>/dev/null; then
    fusermount3 -u "$work/mnt" || umount "$work/mnt"
  fi
  rm -rf "$work"
  mkdir -p "$work/root/lib" "$work/root/.kpack"
  ln -s "$lib" "$work/root/lib/librocrand.so.1"
  archive="$work/root/.kpack/rand_lib.kpack"
  show "$kpack" create -o "$archive" --group rand --family gfx -j "$(nproc)" \
    --fatbin "$lib=lib/librocrand.so.1"
  show "$kpack" info "$archive"
  show "$kpack" list "$archive"
  show "$kpack" verify "$archive"

  say "5. look inside"
  tree="$work/extracted"
  trap cleanup EXIT INT TERM
  if [ -x "$kpackfs" ]; then
    mkdir -p "$work/mnt"
    if "$kpackfs" "$archive" "$work/mnt"; then
      mnt="$work/mnt"
      tree="$mnt"
      echo "mounted with kpackfs at $mnt"
    else
      echo "kpackfs could not mount here (no /dev/fuse?); extracting instead"
    fi
  else
    echo "kpackfs is not built yet; extracting instead"
  fi
  if [ -z "$mnt" ]; then
    show "$kpack" extract -C "$tree" "$archive"
  fi
  (cd "$tree" && find . -path ./.kpackfs -prune -o -type f -name 'kernel.*' -print |
    LC_ALL=C sort | while read -r f; do printf '%10s  %s\n' "$(wc -c <"$f")" "$f"; done)
  one="$tree/lib/librocrand.so.1#0/gfx90a:xnack-/kernel.hsaco"
  show readelf -h "$one"
  # Beside it, what the code object holds: one line per GPU kernel.
  if [ -n "$mnt" ]; then
    show ls "${one%/*}"
    show head -n 3 "${one%/*}/kernels"
  fi
  # After reading one code object two ways: decompressed once, rendered
  # once, the others not at all.
  if [ -n "$mnt" ] && [ -f "$mnt/.kpackfs/stats" ]; then
    show grep -E '^(kernels|decompressions|bytes_decompressed|renders)=' \
      "$mnt/.kpackfs/stats"
  fi

  say "6. the loader's search for a gfx90a:sramecc+:xnack- agent"
  show "$kpack" resolve --binary "$work/root/lib/librocrand.so.1" \
    --kernel lib/librocrand.so.1 --co-index 0 \
    --search-path ../.kpack/rand_lib.kpack --arch gfx90a:sramecc+:xnack-

  if [ -n "$mnt" ]; then
    say "7. unmount"
    show fusermount3 -u "$mnt"
    mnt=""
  fi

  say "8. split the library itself: its device code into per-arch archives"
  # An install tree with the library and its soname link, split into a
  # kpack-ified tree: the library without .hip_fatbin bytes, one archive
  # per architecture in .kpack/.
  install="$work/install"
  split="$work/split"
  mkdir -p "$install/lib"
  cp "$lib" "$install/lib/librocrand.so.1.1"
  ln -s librocrand.so.1.1 "$install/lib/librocrand.so.1"
  show "$kpack" split -o "$split" --prefix rand_lib -j "$(nproc)" "$install"
  printf 'host library: %s bytes before, %s bytes after\n' \
    "$(stat -c %s "$install/lib/librocrand.so.1.1")" \
    "$(stat -c %s "$split/lib/librocrand.so.1.1")"
  show ls "$split/.kpack"
  show "$kpack" verify --binary "$split/lib/librocrand.so.1"
  # What the HIP runtime does with its one record on a gfx90a agent.
  show "$kpack" resolve --binary "$split/lib/librocrand.so.1" \
    --arch gfx90a:sramecc+:xnack- --co-index 0
  if [ -x "$kpackfs" ] && mkdir -p "$work/mnt-split" &&
    "$kpackfs" "$split"/.kpack/*.kpack "$work/mnt-split"; then
    mnt="$work/mnt-split"
    echo "the archives it wrote, mounted with kpackfs at $mnt:"
    (cd "$mnt" && find . -path ./.kpackfs -prune -o -type f -name 'kernel.*' -print |
      LC_ALL=C sort | while read -r f; do printf '%10s  %s\n' "$(wc -c <"$f")" "$f"; done)
    show fusermount3 -u "$mnt"
    mnt=""
  fi
  echo
  echo "demo: done"
}

case "${1:-demo}" in
  fetch) fetch ;;
  deps) install_packages ;;
  bench-deps) install_bench_packages ;;
  demo) demo ;;
  *) die "usage: $0 [demo|fetch|deps|bench-deps]" ;;
esac
