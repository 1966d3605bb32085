/* SPDX-License-Identifier: MIT
 *
 * kpack(1) and kpackfs(8), as the build makes them from the programs' own
 * manuals (contrib/manpage.sh): they are what the current programs print,
 * groff formats them without a warning, and every command, option and
 * synopsis of the --help texts is in the formatted page.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "support.h"

static const char* build_dir; /* $KPACK_TEST_BUILD */
static const char* source_dir;

static int setup(void** state) {
  const char* b = getenv("KPACK_TEST_BUILD"); /* exported by the Makefile */
  const char* s = getenv("KPACK_SOURCE_DIR");
  build_dir = b != NULL ? b : "build";
  source_dir = s != NULL ? s : ".";
  return kt_tmp_setup(state);
}

/* Runs a shell command; returns its exit status and its output (stdout and
 * stderr together when `merge`). */
static int run(char** out, bool merge, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int run(char** out, bool merge, const char* fmt, ...) {
  char *cmd, *full;
  va_list ap;
  va_start(ap, fmt);
  assert_true(vasprintf(&cmd, fmt, ap) > 0);
  va_end(ap);
  char* file = kt_path(kt_tmp, "out");
  assert_true(asprintf(&full, "(%s) >'%s' %s", cmd, file,
                       merge ? "2>&1" : "2>/dev/null") > 0);
  int status = system(full);
  size_t n = 0;
  *out = kt_read_file(file, &n);
  assert_non_null(*out);
  free(file);
  free(full);
  free(cmd);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static char* page_path(const char* page) {
  char* path;
  assert_true(asprintf(&path, "%s/man/%s", build_dir, page) > 0);
  return path;
}

/* The page formatted as plain text on lines long enough that nothing is
 * broken or hyphenated, so a help line's words are found as they are. */
static char* formatted(const char* page) {
  char* path = page_path(page);
  char* text;
  assert_int_equal(
      run(&text, false, "groff -man -Tascii -P-cbou -rLL=2000n '%s'", path), 0);
  free(path);
  return text;
}

/* Some line of `text` starts (after its indentation) with the words of
 * `line`, runs of spaces collapsed. */
static bool has_words(const char* text, const char* line) {
  char* want = strdup(line);
  char* w = want;
  for (char* r = want; *r; r++)
    if (*r != ' ' || (w > want && w[-1] != ' '))
      *w++ = *r;
  while (w > want && w[-1] == ' ')
    w--;
  *w = '\0';
  bool found = false;
  for (const char* l = text; *l && !found;) {
    const char* end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    char* copy = strndup(l, len);
    char* c = copy;
    for (char* r = copy; *r; r++) /* the same collapsing */
      if (*r != ' ' || (c > copy && c[-1] != ' '))
        *c++ = *r;
    *c = '\0';
    const char* start = copy + strspn(copy, " ");
    found = strncmp(start, want, strlen(want)) == 0;
    free(copy);
    l += len + (end != NULL);
  }
  if (!found)
    fprintf(stderr, "not in the page: \"%s\"\n", want);
  free(want);
  return found;
}

/* Every line of a --help text that a reader looks up (synopsis lines and
 * option terms) is in the formatted page. Returns how many were checked. */
static size_t expect_manual_in(const char* manual, const char* text) {
  size_t checked = 0, failures = 0;
  bool synopsis = false, options = false;
  for (const char* l = manual; *l;) {
    const char* end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    char* line = strndup(l, len);
    l += len + (end != NULL);
    if (line[0] >= 'A' && line[0] <= 'Z') {
      synopsis = strcmp(line, "SYNOPSIS") == 0;
      options = strstr(line, "OPTIONS") != NULL;
    } else if (synopsis && strncmp(line, "    ", 4) == 0 && line[4] != ' ') {
      checked++;
      failures += !has_words(text, line + 4);
    } else if (options) {
      /* "    -o, --output OUT      the archive..." -> "-o, --output OUT" */
      char* term = line + strspn(line, " ");
      char* gap = strstr(term, "  ");
      if (*term == '-' && term - line <= 8) {
        if (gap != NULL)
          *gap = '\0';
        /* libfuse separates its terms with blanks; the page with ", ". */
        for (char* p; (p = strstr(term, "   ")) != NULL;)
          memmove(p + 1, p + 3, strlen(p + 3) + 1), p[0] = ',', p[1] = ' ';
        checked++;
        failures += !has_words(text, term);
      }
    }
    free(line);
  }
  assert_int_equal(failures, 0);
  return checked;
}

static void test_pages_are_what_the_programs_print_now(void** state) {
  (void)state;
  static const char* const pages[][2] = {{"kpack", "kpack.1"},
                                         {"kpackfs", "kpackfs.8"}};
  for (size_t i = 0; i < 2; i++) {
    char *now, *path = page_path(pages[i][1]);
    assert_int_equal(
        run(&now, false, "'%s/contrib/manpage.sh' %s '%s/bin/%s' %s",
            source_dir, pages[i][0], build_dir, pages[i][0],
            KPACK_VERSION_STRING),
        0);
    size_t n;
    char* built = kt_read_file(path, &n);
    assert_non_null(built);
    assert_string_equal(built, now);
    free(built);
    free(now);
    free(path);
  }
}

static void test_groff_formats_the_pages_without_a_warning(void** state) {
  (void)state;
  static const char* const pages[] = {"kpack.1", "kpackfs.8"};
  for (size_t i = 0; i < 2; i++) {
    char *out, *path = page_path(pages[i]);
    int rc = run(&out, true, "groff -ww -man -z '%s'", path);
    if (rc != 0 || out[0] != '\0')
      fail_msg("groff -ww on %s: exit %d\n%s", path, rc, out);
    free(out);
    free(path);
  }
}

static void test_kpack_page_has_every_command_and_option(void** state) {
  (void)state;
  char* text = formatted("kpack.1");
  char *overview, *tool;
  assert_true(asprintf(&tool, "%s/bin/kpack", build_dir) > 0);
  assert_int_equal(run(&overview, false, "'%s' help", tool), 0);
  size_t checked = expect_manual_in(overview, text);
  /* Each command of the overview has its manual in the page. */
  size_t commands = 0;
  bool in_commands = false;
  for (const char* l = overview; *l;) {
    const char* end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    char* line = strndup(l, len);
    l += len + (end != NULL);
    if (line[0] >= 'A' && line[0] <= 'Z')
      in_commands = strcmp(line, "COMMANDS") == 0;
    char name[32];
    if (in_commands && sscanf(line, "    %31[a-z]  ", name) == 1 &&
        strstr(line, "  ") != NULL && line[4 + strlen(name)] == ' ' &&
        line[5 + strlen(name)] == ' ') {
      char* manual;
      assert_int_equal(run(&manual, false, "'%s' help %s", tool, name), 0);
      checked += expect_manual_in(manual, text);
      commands++;
      free(manual);
    }
    free(line);
  }
  assert_true(commands >= 7);
  assert_true(checked > 40);
  free(overview);
  free(tool);
  free(text);
}

/* A manual line never ends inside a word: the page joins lines with a
 * space, so "hipv4-amdgcn-amd-amdhsa--" + newline + "<arch>" would read
 * "amdhsa-- <arch>". Such a cut leaves a word ending in "--" at the end of
 * a line (a lone "--" is an argument, not a cut). */
static void test_manuals_break_no_word_at_a_line_end(void** state) {
  (void)state;
  char *all, *text = formatted("kpack.1");
  assert_int_equal(run(&all, false,
                       "t='%s/bin/kpack'; \"$t\" help; for c in $(\"$t\" help "
                       "| awk '/^    [a-z]+  /{print $1}'); do \"$t\" help "
                       "$c; done",
                       build_dir),
                   0);
  size_t lines = 0;
  for (const char* l = all; *l;) {
    const char* end = strchr(l, '\n');
    size_t len = end ? (size_t)(end - l) : strlen(l);
    if (len > 2 && strncmp(l + len - 2, "--", 2) == 0 && l[len - 3] != ' ')
      fail_msg("a word is cut at the line end: \"%.*s\"", (int)len, l);
    lines++;
    l += len + (end != NULL);
  }
  assert_true(lines > 300);
  /* The one that was cut reads whole in the page. */
  assert_non_null(strstr(text, "hipv4-amdgcn-amd-amdhsa--<arch> (or"));
  free(all);
  free(text);
}

static void test_kpackfs_page_has_every_option(void** state) {
  (void)state;
  char* text = formatted("kpackfs.8");
  char* help;
  assert_int_equal(run(&help, false, "'%s/bin/kpackfs' --help", build_dir), 0);
  /* Its own options and libfuse's. */
  assert_true(expect_manual_in(help, text) >= 10);
  free(help);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pages_are_what_the_programs_print_now),
      cmocka_unit_test(test_groff_formats_the_pages_without_a_warning),
      cmocka_unit_test(test_kpack_page_has_every_command_and_option),
      cmocka_unit_test(test_manuals_break_no_word_at_a_line_end),
      cmocka_unit_test(test_kpackfs_page_has_every_option),
  };
  return cmocka_run_group_tests(tests, setup, kt_tmp_teardown);
}
