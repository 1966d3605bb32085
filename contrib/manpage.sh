#!/bin/sh
# SPDX-License-Identifier: MIT
#
# Makes a man page from the manuals the programs print, so that `--help`
# and the man page are one text:
#
#   contrib/manpage.sh kpack BUILD/bin/kpack VERSION    > kpack.1
#   contrib/manpage.sh kpackfs BUILD/bin/kpackfs VERSION > kpackfs.8
#
# kpack(1) is `kpack help` with every command's `kpack help CMD` as a
# subsection of COMMANDS; kpackfs(8) is `kpackfs --help`. The manuals share
# one plain layout, which is all this reads: a section is a line of
# capitals at column 0; its body is indented 4 spaces; in *OPTIONS,
# COMMANDS and ENVIRONMENT an item is a line with a term, two or more
# spaces, and a description that continues at the same column; "- " starts
# a bullet; a block indented further after a blank line is shown as is;
# SYNOPSIS and EXAMPLES are shown as is.
set -eu

[ $# = 3 ] || { echo "usage: $0 kpack|kpackfs PROGRAM VERSION" >&2; exit 2; }
name=$1
program=$2
version=$3

case "$name" in
  kpack)
    section=1
    manual="User Commands"
    texts() {
      "$program" help
      # The command names: the first word of each "NAME  summary" line of
      # COMMANDS.
      for cmd in $("$program" help | awk '
          /^[A-Z]/ { in_commands = ($0 == "COMMANDS"); next }
          in_commands && /^    [a-z]+  / { print $1 }'); do
        printf '\f\n'
        "$program" help "$cmd"
      done
    }
    ;;
  kpackfs)
    section=8
    manual="System Administration"
    texts() { "$program" --help; }
    ;;
  *)
    echo "$0: unknown program $name" >&2
    exit 2
    ;;
esac

# The texts first, so that a program that fails stops the build.
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
texts >"$tmp"

awk -v name="$name" -v section="$section" -v version="$version" \
  -v manual="$manual" '
# ---- roff text ----------------------------------------------------------

# Text as roff input: backslashes and hyphens escaped (\- is the
# hyphen-minus that options need, and what copy and paste give back).
function esc(s) {
  gsub(/\\/, "\\e", s)
  gsub(/-/, "\\-", s)
  return s
}

# An input line of text: a leading "." or "'\''" must not read as a request.
function textline(s) {
  return s ~ /^[.'\'']/ ? "\\&" s : s
}

# Command lines and option terms: names and options bold, METAVARIABLES
# italic, punctuation plain.
function styled(s,    out, word, c) {
  out = ""
  while (s != "") {
    if (match(s, /^[A-Za-z0-9_-]+/)) {
      word = substr(s, 1, RLENGTH)
      s = substr(s, RLENGTH + 1)
      if (word ~ /^[A-Z][A-Z0-9_]*$/)
        out = out "\\fI" esc(word) "\\fR"
      else
        out = out "\\fB" esc(word) "\\fR"
    } else {
      c = substr(s, 1, 1)
      s = substr(s, 2)
      out = out esc(c)
    }
  }
  return out
}

# "kpackfs(8)" as a reference: the name bold.
function references(s,    out, ref, open) {
  out = ""
  while (match(s, /[a-z][a-z0-9._-]*\([1-8]\)/)) {
    ref = substr(s, RSTART, RLENGTH)
    open = index(ref, "(")
    out = out esc(substr(s, 1, RSTART - 1)) "\\fB" esc(substr(ref, 1, open - 1)) \
      "\\fR" substr(ref, open)
    s = substr(s, RSTART + RLENGTH)
  }
  return out esc(s)
}

function indent_of(s) {
  match(s, /^ */)
  return RLENGTH
}

# ---- output, by page and section -------------------------------------------
# Page 0 is the main manual; the others (kpack commands) go at the end of
# its COMMANDS section. Sections are kept in order and assembled at the end.

function out(s) {
  if (page == 0)
    body[nsections] = body[nsections] s "\n"
  else
    commands = commands s "\n"
}

# Ends the block in progress: filled text (para, item, bullet), or text
# as written (nf: a whole section; indented: a block within one).
function close_block() {
  if (mode == "nf" || mode == "indented")
    out(".fi")
  if (mode == "indented")
    out(".RE")
  if (mode == "item" || mode == "bullet" || mode == "para")
    flush_text()
  mode = ""
}

# Filled text is collected and written once a paragraph or item ends.
function flush_text() {
  if (text != "")
    out(text)
  text = ""
}

function add_text(s) {
  text = text (text == "" ? "" : "\n") textline(references(s))
}

function close_section() {
  close_block()
  if (page > 0 && sub_heading != "")
    out(".RE")
  sub_heading = ""
}

function start_section(title) {
  close_section()
  section_name = title
  blank = 0
  if (page == 0) {
    nsections++
    titles[nsections] = title
    if (title != "NAME")
      out(".SH \"" title "\"")
    return
  }
  # A command page: its NAME is the subsection heading, SYNOPSIS and
  # DESCRIPTION follow it untitled, the others get a label.
  if (title == "NAME" || title == "SYNOPSIS" || title == "DESCRIPTION")
    return
  label = substr(title, 1, 1) tolower(substr(title, 2))
  out(".PP")
  out(".B \"" label "\"")
  out(".RS 4")
  sub_heading = label
}

# The NAME body, joined into one line: "kpack list - what it does".
function name_line(s) {
  name_text = name_text (name_text == "" ? "" : " ") s
}

function finish_name() {
  if (name_text == "")
    return
  dash = index(name_text, " - ")
  cmd = substr(name_text, 1, dash - 1)
  what = substr(name_text, dash + 3)
  if (page == 0) {
    out(esc(cmd) " \\- " esc(what))
  } else {
    out(".SS \"" cmd "\"")
    out(".PP")
    out(esc(toupper(substr(what, 1, 1)) substr(what, 2)) ".")
  }
  name_text = ""
}

function is_item_section() {
  return section_name ~ /OPTIONS$/ || section_name == "COMMANDS" ||
         section_name == "ENVIRONMENT"
}

# A line that starts an item: its term and the column its text starts at.
function item_start(line, ind,    rest, gap, p) {
  if (!is_item_section() || ind > 8)
    return 0
  rest = substr(line, ind + 1)
  if (rest !~ /^-/ && (section_name ~ /OPTIONS$/ || ind != 4))
    return 0
  # The description follows the last gap of two or more spaces: libfuse
  # writes terms like "-d   -o debug".
  gap = 0
  for (p = 1; match(substr(rest, p), /[^ ]  +[^ ]/); p += RSTART + RLENGTH - 2)
    gap = p + RSTART - 1 # 1-based start of the gap match in rest
  if (gap > 0) {
    match(substr(rest, gap), /[^ ]  +[^ ]/)
    term = substr(rest, 1, gap)
    desc_col = ind + gap + RLENGTH - 2
    desc = substr(rest, gap + RLENGTH - 1)
  } else if (rest ~ /^-/) {
    term = rest
    desc_col = -1 # set by the next, deeper line
    desc = ""
  } else {
    return 0
  }
  gsub(/  +/, ", ", term)
  return 1
}

BEGIN {
  page = 0
  nsections = 0
  mode = ""
  text = ""
  commands = ""
}

/^\f$/ {
  close_section()
  finish_name()
  page++
  section_name = ""
  next
}

/^[A-Z][A-Z ]*[A-Z]$/ {
  if (section_name == "NAME")
    finish_name()
  start_section($0)
  next
}

{
  line = $0
  sub(/ +$/, "", line)
  ind = indent_of(line)
  content = substr(line, ind + 1)

  if (section_name == "NAME") {
    if (content != "")
      name_line(content)
    next
  }

  if (content == "") {
    if (mode == "item" || mode == "bullet" || mode == "para")
      close_block()
    blank = 1
    next
  }

  # SYNOPSIS and EXAMPLES: as written, one block, relative indentation kept.
  if (section_name == "SYNOPSIS" || section_name == "EXAMPLES") {
    if (mode != "nf") {
      close_block()
      if (page > 0)
        out(".PP")
      out(".nf")
      mode = "nf"
    } else if (blank) {
      out("")
    }
    blank = 0
    rel = substr(line, 5)
    out(textline(section_name == "SYNOPSIS" ? styled(rel) : esc(rel)))
    next
  }

  # Inside an item or a bullet, a line at its text column continues it.
  if (mode == "item" && (ind == desc_col || (desc_col < 0 && ind > item_ind))) {
    if (desc_col < 0)
      desc_col = ind
    add_text(content)
    blank = 0
    next
  }
  if (mode == "bullet" && ind == bullet_col) {
    add_text(content)
    blank = 0
    next
  }

  if (item_start(line, ind)) {
    close_block()
    out(".TP")
    out(textline(styled(term)))
    mode = "item"
    item_ind = ind
    if (desc != "")
      add_text(desc)
    blank = 0
    next
  }

  if (content ~ /^- /) {
    close_block()
    out(".IP \\(bu 2")
    mode = "bullet"
    bullet_col = ind + 2
    add_text(substr(content, 3))
    blank = 0
    next
  }

  # Indented further than the body after a blank line: shown as is.
  if (ind > 4 && (blank || mode == "indented")) {
    if (mode != "indented") {
      close_block()
      out(".PP")
      out(".RS 4")
      out(".nf")
      mode = "indented"
    } else if (blank) {
      out("")
    }
    out(textline(esc(substr(line, 9))))
    blank = 0
    next
  }

  if (mode != "para") {
    close_block()
    out(".PP")
    mode = "para"
  }
  add_text(content)
  blank = 0
}

END {
  close_section()
  finish_name()
  upper = toupper(name)
  printf ".\\\" Made by contrib/manpage.sh from %s'\''s own manual; edit that.\n", name
  printf ".TH %s %s \"\" \"kpack %s\" \"%s\"\n", upper, section, version, manual
  for (i = 1; i <= nsections; i++) {
    if (titles[i] == "NAME")
      print ".SH NAME"
    printf "%s", body[i]
    if (titles[i] == "COMMANDS")
      printf "%s", commands
  }
}
' "$tmp"
