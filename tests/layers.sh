#!/bin/sh
# The layers of the code, checked: libkpack's parts include only themselves
# and the parts below them (common < archive < loader < binary < producer),
# and the programs (kpackfs/, contrib/) cannot reach libkpack's internal
# headers: compiling an include of one with a program's flags must fail. In
# kpackfs/, each part but main.c is a .c with a header of its own name, and
# what the parts include forms no cycle: a part is read, and changed,
# knowing only the parts below it.
# Usage: tests/layers.sh CC "CPPFLAGS of a program"; prints one line per
# check and "layers: N passed, N failed".
set -u
cc=$1
program_flags=$2
passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok      $*"; }
bad() { failed=$((failed + 1)); echo "FAILED  $*"; }

order="common archive loader binary producer"
rank() { n=0; for p in $order; do [ "$p" = "$1" ] && { echo $n; return; }; n=$((n + 1)); done; echo 99; }

for part in $order; do
  r=$(rank "$part")
  up=$(grep -Hn '#include "[a-z_]*/' libkpack/"$part"/*.[ch] | while IFS= read -r line; do
    target=$(printf '%s\n' "$line" | sed -n 's/.*#include "\([a-z_]*\)\/.*/\1/p')
    t=$(rank "$target"); [ "$t" -ne 99 ] && [ "$t" -gt "$r" ] && printf '%s\n' "$line"
  done)
  if [ -z "$up" ]; then ok "libkpack/$part/ includes nothing above it"
  else bad "libkpack/$part/ includes a higher part:"; printf '%s\n' "$up"; fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for header in $(cd libkpack && ls */*.h); do
  printf '#include "%s"\nint main(void) { return 0; }\n' "$header" > "$tmp/probe.c"
  # shellcheck disable=SC2086
  if $cc $program_flags -c "$tmp/probe.c" -o "$tmp/probe.o" 2>/dev/null; then
    bad "a program can include libkpack's $header"
  else
    ok "a program cannot include libkpack's $header"
  fi
done

# kpackfs/: part X depends on part Y when X.c or X.h includes Y.h.
headless=""
for c in kpackfs/*.c; do
  [ "$c" = kpackfs/main.c ] || [ -f "${c%.c}.h" ] || headless="$headless $c"
done
if [ -z "$headless" ]; then ok "kpackfs/: every part has a header of its own"
else bad "kpackfs/: no header of their own:$headless"; fi
for f in kpackfs/*.[ch]; do
  part=$(basename "${f%.?}")
  sed -n 's/^#include "\([a-z_]*\)\.h".*/\1/p' "$f" | while IFS= read -r dep; do
    [ "$dep" != "$part" ] && [ -f "kpackfs/$dep.h" ] && echo "$part $dep"
  done
done > "$tmp/depends"
if tsort "$tmp/depends" > /dev/null 2> "$tmp/loop"; then
  ok "kpackfs/ has no include cycle"
else
  bad "kpackfs/ has an include cycle:"; cat "$tmp/loop"
fi
echo "layers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
