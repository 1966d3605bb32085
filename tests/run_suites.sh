#!/bin/sh
# SPDX-License-Identifier: MIT
#
# `make check`'s runner: runs every cmocka suite (under WRAP, e.g.
# valgrind, when given), tests/layers.sh and, when the environment's
# PYTEST holds a command, the Python package's pytest suite; shows their
# output as it comes, and ends with one line totalling them: "check: N
# passed, N failed".
# A suite that dies before cmocka's summary (a crash, a valgrind error)
# counts as one failure. A test writes only inside its temporary directory
# or the build tree: when the source tree, as git sees it (ignored files
# included, build*/ and .cache/ left out), differs after the suites from
# before, that is one failure more, and the runner says what appeared or
# changed. Exits 1 when anything failed.
# Usage: tests/run_suites.sh "WRAP" CC "CPPFLAGS CFLAGS" SUITE...
set -u
wrap=$1
cc=$2
flags=$3
shift 3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kpack-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
skipped=0

# count LOG STATUS PASSED_RE FAILED_RE: adds what the log reports.
count() {
  p=$(sed -n "s/$3/\\1/p" "$1" | tail -n 1)
  f=$(sed -n "s/$4/\\1/p" "$1" | tail -n 1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test(s)\..*/\1/p' "$1" | tail -n 1)
  passed=$((passed + ${p:-0}))
  skipped=$((skipped + ${s:-0}))
  if [ "$2" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then f=1; fi
  failed=$((failed + ${f:-0}))
}

# The source tree as git sees it, but for the build trees and .cache/;
# nothing when this is no git checkout.
tree_state() {
  git status --porcelain --ignored 2>/dev/null |
    grep -v -e '^.. build/' -e '^.. build-[^/]*/' -e '^.. \.cache/'
}
tree_state >"$tmp/tree-before"

cmocka_passed='^\[  PASSED  \] \([0-9]*\) test(s)\..*'
cmocka_failed='^\[  FAILED  \] \([0-9]*\) test(s), listed below:.*'
for suite in "$@"; do
  echo "== $suite"
  # shellcheck disable=SC2086
  { $wrap "$suite" 2>&1; echo $? >"$tmp/status"; } | tee "$tmp/log"
  count "$tmp/log" "$(cat "$tmp/status")" "$cmocka_passed" "$cmocka_failed"
done

echo "== tests/layers.sh"
{ tests/layers.sh "$cc" "$flags" 2>&1; echo $? >"$tmp/status"; } | tee "$tmp/log"
count "$tmp/log" "$(cat "$tmp/status")" \
  '^layers: \([0-9]*\) passed, [0-9]* failed$' \
  '^layers: [0-9]* passed, \([0-9]*\) failed$'

# pytest's closing line, e.g. "2 failed, 51 passed, 1 skipped in 9.1s"; an
# error (a failed fixture) counts as a failure.
if [ -n "${PYTEST:-}" ]; then
  echo "== $PYTEST"
  # shellcheck disable=SC2086
  { $PYTEST 2>&1; echo $? >"$tmp/status"; } | tee "$tmp/log"
  line=$(grep -E '^(=+ )?[0-9]+ [a-z]+.* in [0-9.]+s' "$tmp/log" | tail -n 1)
  pytest_count() {
    n=$(printf '%s\n' "$line" | sed -n "s/.*\b\([0-9][0-9]*\) $1.*/\1/p")
    echo "${n:-0}"
  }
  f=$(($(pytest_count failed) + $(pytest_count error)))
  if [ "$(cat "$tmp/status")" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  passed=$((passed + $(pytest_count passed)))
  skipped=$((skipped + $(pytest_count skipped)))
  failed=$((failed + f))
fi

tree_state >"$tmp/tree-after"
if ! cmp -s "$tmp/tree-before" "$tmp/tree-after"; then
  echo "== source tree: written outside the temporary directories and the build tree:"
  diff "$tmp/tree-before" "$tmp/tree-after" | sed -n 's/^[<>] /  /p'
  failed=$((failed + 1))
fi

[ "$skipped" -eq 0 ] || echo "check: $skipped skipped"
echo "check: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
