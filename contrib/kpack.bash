# SPDX-License-Identifier: MIT
#
# Bash completion for kpack: commands, each command's options (read from
# its own --help, so they never drift), and the binary and arch names of
# the archives named so far on the command line (for --arch, --kernel and
# `kpack cat ARCHIVE BINARY ARCH`). Installed as
# share/bash-completion/completions/kpack, where the bash-completion
# package's loader finds it (Debian: apt-get install bash-completion; or
# `source` this file from ~/.bashrc).

# The archives among the words typed so far: *.kpack files, and those in
# a directory (at most 64 of them, so that a large tree stays quick).
_kpack_archives() {
  local w
  for w in "${_kpack_words[@]:2}"; do
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
    "${_kpack_words[0]}" info --json "${archives[@]}" 2>/dev/null |
      grep -o '"gfx_arches": \[[^]]*\]' | grep -o '"[^"]*"' |
      grep -v '^"gfx_arches"$' | tr -d '"'
  else
    "${_kpack_words[0]}" list --json "${archives[@]}" 2>/dev/null |
      grep -o '"binary": "[^"]*"' | sed 's/^"binary": "//; s/"$//'
  fi | sort -u
}

# A command's options, from the OPTIONS section of its manual.
_kpack_options() {
  "${_kpack_words[0]}" "$1" --help 2>/dev/null |
    sed -n '/^OPTIONS/,/^[A-Z]/s/^ \{4,8\}\(-.*\)/\1/p' |
    sed 's/   .*//' | grep -o -- '--\?[A-Za-z][-A-Za-z0-9]*' | sort -u
}

# The words typed so far into _kpack_words and the index of the one being
# completed into _kpack_cword. With ':' in COMP_WORDBREAKS (bash's default)
# bash hands gfx90a:xnack- over as three words, gfx90a, : and xnack-: they
# are joined again here, as bash-completion's _get_comp_words_by_ref -n :
# joins them, so that an arch or an archive named for one stays one word.
_kpack_join_words() {
  local i w joined=0
  _kpack_words=()
  _kpack_cword=0
  for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
    w=${COMP_WORDS[i]}
    if ((i > 0)) && [[ $w == : || $joined == 1 ]]; then
      _kpack_words[-1]+=$w
    else
      _kpack_words+=("$w")
    fi
    [[ $w == : ]] && joined=1 || joined=0
    ((i == COMP_CWORD)) && _kpack_cword=$((${#_kpack_words[@]} - 1))
  done
}

_kpack() {
  local _kpack_words _kpack_cword
  _kpack_join_words
  local cur=${_kpack_words[_kpack_cword]} prev=${_kpack_words[_kpack_cword-1]}
  local IFS=$'\n'
  local commands=$'list\ninfo\ncat\nextract\ncreate\nverify\nresolve\nsplit\ndiff\nhelp'
  COMPREPLY=()
  if ((_kpack_cword == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$commands"$'\n--help\n--version' -- "$cur")
    return 0
  fi
  local cmd=${_kpack_words[1]} names=
  if [[ $cmd == help ]]; then
    ((_kpack_cword == 2)) &&
      mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
    return 0
  fi
  case $prev in
  --arch) names=arch ;;
  --kernel) [[ $cmd == list ]] || names=binary ;;
  -a) [[ $cmd == extract ]] && names=arch ;;
  -b | --binary) [[ $cmd == extract ]] && names=binary ;;
  esac
  if [[ -z $names && $cmd == cat && $cur != -* ]]; then
    # kpack cat ARCHIVE BINARY ARCH: the place among the operands
    local i n=0
    for ((i = 2; i < _kpack_cword; i++)); do
      [[ ${_kpack_words[i]} == -* ]] || n=$((n + 1))
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
