# SPDX-License-Identifier: MIT
#
# Bash completion for kpack: commands, each command's options (read from
# its own --help, so they never drift), and the binary and arch names of
# the archives named so far on the command line (for --arch, --kernel and
# `kpack cat ARCHIVE BINARY ARCH`). Installed as
# share/bash-completion/completions/kpack.

# The archives among the words typed so far: *.kpack files, and those in
# a directory (at most 64 of them, so that a large tree stays quick).
_kpack_archives() {
  local w
  for w in "${COMP_WORDS[@]:2}"; do
    if [[ -f $w && $w == *.kpack ]]; then
      printf '%s\n' "$w"
    elif [[ -d $w && $w != . && $w != .. ]]; then
      find "$w" -name '*.kpack' -type f 2>/dev/null | head -n 64
    fi
  done
}

# The arches the archives declare, or the binaries they hold, one a line.
_kpack_names() {
  local what=$1 archives
  mapfile -t archives < <(_kpack_archives)
  ((${#archives[@]})) || return 0
  if [[ $what == arch ]]; then
    "${COMP_WORDS[0]}" info --json "${archives[@]}" 2>/dev/null |
      grep -o '"gfx_arches": \[[^]]*\]' | grep -o '"[^"]*"' |
      grep -v '^"gfx_arches"$' | tr -d '"'
  else
    "${COMP_WORDS[0]}" list --json "${archives[@]}" 2>/dev/null |
      grep -o '"binary": "[^"]*"' | sed 's/^"binary": "//; s/"$//'
  fi | sort -u
}

# A command's options, from the OPTIONS section of its manual.
_kpack_options() {
  "${COMP_WORDS[0]}" "$1" --help 2>/dev/null |
    sed -n '/^OPTIONS/,/^[A-Z]/s/^ \{4,8\}\(-.*\)/\1/p' |
    sed 's/   .*//' | grep -o -- '--\?[A-Za-z][-A-Za-z0-9]*' | sort -u
}

_kpack() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local IFS=$'\n'
  local commands=$'list\ninfo\ncat\nextract\ncreate\nverify\nresolve\nsplit\ndiff\nhelp'
  COMPREPLY=()
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$commands"$'\n--help\n--version' -- "$cur")
    return 0
  fi
  local cmd=${COMP_WORDS[1]} names=
  if [[ $cmd == help ]]; then
    ((COMP_CWORD == 2)) &&
      mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
    return 0
  fi
  case $prev in
  --arch) names=arch ;;
  --kernel) [[ $cmd == list ]] || names=binary ;;
  esac
  if [[ -z $names && $cmd == cat && $cur != -* ]]; then
    # kpack cat ARCHIVE BINARY ARCH: the place among the operands
    local i n=0
    for ((i = 2; i < COMP_CWORD; i++)); do
      [[ ${COMP_WORDS[i]} == -* ]] || n=$((n + 1))
    done
    ((n == 1)) && names=binary
    ((n == 2)) && names=arch
  fi
  if [[ -n $names ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_kpack_names "$names")" -- "$cur")
  elif [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$(_kpack_options "$cmd")" -- "$cur")
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    compopt -o filenames 2>/dev/null
  fi
  # With ':' in COMP_WORDBREAKS (bash's default), readline replaces only the
  # part after the last ':' of an arch such as gfx90a:xnack-.
  if [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
    local prefix=${cur%"${cur##*:}"} i
    for i in "${!COMPREPLY[@]}"; do
      COMPREPLY[i]=${COMPREPLY[i]#"$prefix"}
    done
  fi
  return 0
}
complete -F _kpack kpack
