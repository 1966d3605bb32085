/* SPDX-License-Identifier: MIT
 *
 * `make install` and `make uninstall` as README.md describes them, into the
 * suite's temporary directory: the installed rocm_kpack.pc still finds the
 * headers and the library after the tree is moved, with a multiarch LIBDIR,
 * with plain pkg-config (--define-prefix, which the README advises against,
 * also moves the prefix of msgpack's .pc); the CMake package file repeats no
 * line of a block; `make uninstall` leaves no file and no directory of its own,
 * and keeps the standard ones only for /usr and /usr/local; every installed
 * file is in the README's table of them, and the README's dependency list names
 * every package `make demo`, `make check` and `make bench` install.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* Runs a shell script in the source tree with make's own variables
 * cleared (a suite runs under make check); fails the test, showing its
 * output, unless it exits 0. Returns its standard output; free() it. */
static char* sh(const char* script) {
  const char* src = getenv("KPACK_SOURCE_DIR");
  const char* build = getenv("KPACK_TEST_BUILD");
  char *cmd, *out, *err;
  assert_true(asprintf(&cmd,
                       "unset MAKEFLAGS MFLAGS MAKELEVEL\n"
                       "cd '%s'\nBUILD='%s'\n%s",
                       src != NULL && *src ? src : ".",
                       build != NULL && *build ? build : "build", script) > 0);
  const char* args[] = {"-ec", cmd, NULL};
  int status = kt_run_args("sh", args, 300, &out, &err);
  if (status != 0)
    fail_msg("exit %d:\n%s\nstdout:\n%.3000s\nstderr:\n%.3000s", status, cmd,
             out, err);
  free(err);
  free(cmd);
  return out;
}

/* make install PREFIX=prefix [more], quietly. */
static void install(const char* prefix, const char* more) {
  char* script;
  assert_true(asprintf(&script,
                       "make -s install BUILD=\"$BUILD\" PREFIX='%s' %s "
                       ">/dev/null",
                       prefix, more) > 0);
  free(sh(script));
  free(script);
}

static char* readme_text(void) {
  const char* src = getenv("KPACK_SOURCE_DIR");
  char* path = kt_path(src != NULL && *src ? src : ".", "README.md");
  size_t size;
  char* text = kt_read_file(path, &size);
  assert_non_null(text);
  free(path);
  return text;
}

/* A tree installed with a multiarch LIBDIR and then moved elsewhere:
 * pkg-config's -I holds kpack.h, its -L the library, and a program built
 * with them runs (compiles, in a sanitizer build). */
static void test_pkgconfig_finds_a_moved_multiarch_tree(void** state) {
  (void)state;
  char* prefix = kt_path(kt_tmp, "opt");
  char* more;
  assert_true(asprintf(&more, "LIBDIR='%s/lib/x86_64-linux-gnu'", prefix) > 0);
  install(prefix, more);
  /* a sanitizer build's library needs its runtime: compile only */
  const char* sanitize = getenv("KPACK_SANITIZE");
  bool link = sanitize == NULL || *sanitize == '\0';
  char* script;
  assert_true(
      asprintf(
          &script,
          "mv '%s' '%s/moved'\n"
          "export PKG_CONFIG_PATH='%s/moved/lib/x86_64-linux-gnu/pkgconfig'\n"
          "for f in $(pkg-config --cflags-only-I rocm_kpack); do\n"
          "  test -f \"${f#-I}/rocm_kpack/kpack.h\" ||\n"
          "    { echo \"pkg-config: $f: no kpack.h\"; exit 1; }\n"
          "done\n"
          "for f in $(pkg-config --libs-only-L rocm_kpack); do\n"
          "  test -e \"${f#-L}/librocm_kpack.so\" ||\n"
          "    { echo \"pkg-config: $f: no librocm_kpack.so\"; exit 1; }\n"
          "done\n"
          "printf '#include <rocm_kpack/kpack.h>\\n"
          "int main(void) { kpack_archive_t a;\\n"
          "  return kpack_open(\"/\", &a) == KPACK_SUCCESS; }\\n' "
          "> '%s/v.c'\n"
          "if %s; then\n"
          "  cc '%s/v.c' -o '%s/v' $(pkg-config --cflags --libs rocm_kpack)\n"
          "  LD_LIBRARY_PATH=$(pkg-config --variable=libdir rocm_kpack) "
          "'%s/v'\n"
          "else\n"
          "  cc -c '%s/v.c' -o '%s/v.o' $(pkg-config --cflags rocm_kpack)\n"
          "fi\n"
          "echo ok\n",
          prefix, kt_tmp, kt_tmp, kt_tmp, link ? "true" : "false", kt_tmp,
          kt_tmp, kt_tmp, kt_tmp, kt_tmp) > 0);
  char* out = sh(script);
  assert_string_equal(out, "ok\n");
  free(out);
  free(script);
  free(more);
  free(prefix);
}

/* No two neighbouring lines of the installed CMake package files are the
 * same statement. */
static void test_cmake_package_repeats_no_line(void** state) {
  (void)state;
  char* prefix = kt_path(kt_tmp, "cmake-usr");
  install(prefix, "");
  char* script;
  assert_true(
      asprintf(
          &script,
          "for f in '%s'/lib/cmake/rocm-kpack/*.cmake; do\n"
          "  sed 's/^ *//' \"$f\" | grep -v -e '^$' -e '^endif()$' | uniq -d\n"
          "done\n",
          prefix) > 0);
  char* out = sh(script);
  if (*out != '\0')
    fail_msg("repeated in the CMake package:\n%s", out);
  free(out);
  free(script);
  free(prefix);
}

/* make uninstall with the install's PREFIX, LIBDIR and DESTDIR leaves
 * nothing below DESTDIR/PREFIX, PREFIX itself included; for PREFIX=/usr
 * (staged: nothing of the machine's) only what a DESTDIR-less run would
 * keep is listed as kept. */
static void test_uninstall_leaves_no_directory(void** state) {
  (void)state;
  char* prefix = kt_path(kt_tmp, "un/opt/rocm-kpack");
  char* stage = kt_path(kt_tmp, "stage");
  char* script;
  assert_true(
      asprintf(&script,
               "make -s install BUILD=\"$BUILD\" PREFIX='%s' "
               "LIBDIR='%s/lib/x86_64-linux-gnu' >/dev/null\n"
               "make -s uninstall BUILD=\"$BUILD\" PREFIX='%s' "
               "LIBDIR='%s/lib/x86_64-linux-gnu'\n"
               "test ! -e '%s' || { find '%s'; exit 1; }\n"
               "make -s install BUILD=\"$BUILD\" PREFIX=/usr DESTDIR='%s' "
               ">/dev/null\n"
               "make -s uninstall BUILD=\"$BUILD\" PREFIX=/usr DESTDIR='%s'\n"
               "test ! -e '%s/usr' || { find '%s'; exit 1; }\n"
               "for d in '' '%s'; do\n"
               "  make -s --eval 'keep: ; @echo \"$(UNINSTALL_KEEP)\"' keep "
               "PREFIX=/usr/local DESTDIR=\"$d\"\n"
               "done\n",
               prefix, prefix, prefix, prefix, prefix, prefix, stage, stage,
               stage, stage, stage) > 0);
  char* out = sh(script);
  /* without DESTDIR, /usr/local's standard directories are kept */
  kt_assert_contains(out, " /usr/local/bin /usr/local/lib ");
  kt_assert_contains(out, " /usr/local/share/man/man1 ");
  assert_non_null(strstr(out, "\n\n"));
  free(out);
  free(script);
  free(stage);
  free(prefix);
}

/* The backquoted paths of the README's table of installed files. */
static size_t table_paths(const char* readme, char* paths[64]) {
  const char* p = strstr(readme, "| path | what |");
  assert_non_null(p);
  size_t n = 0;
  for (; *p == '|'; p = strchr(p, '\n') + 1) {
    const char* cell_end = strchr(p + 1, '|');
    assert_non_null(cell_end);
    for (const char* q = p;;) {
      const char* open = strchr(q, '`');
      if (open == NULL || open >= cell_end)
        break;
      const char* close = strchr(open + 1, '`');
      assert_non_null(close);
      assert_true(n < 64);
      paths[n++] = strndup(open + 1, (size_t)(close - open - 1));
      q = close + 1;
    }
  }
  return n;
}

/* Every file `make install` writes is named by a row of the README's
 * table: exactly, by a pattern, or as a file of a directory named with
 * its trailing '/'. */
static void test_readme_table_names_every_installed_file(void** state) {
  (void)state;
  char* prefix = kt_path(kt_tmp, "table");
  install(prefix, "");
  char* script;
  assert_true(asprintf(&script, "cd '%s' && find . ! -type d | sort", prefix) >
              0);
  char* files = sh(script);
  char* readme = readme_text();
  char* paths[64];
  size_t n = table_paths(readme, paths);
  assert_true(n >= 10);
  size_t count = 0;
  for (char* line = strtok(files, "\n"); line != NULL;
       line = strtok(NULL, "\n")) {
    const char* file = line + 2; /* "./" */
    bool named = false;
    for (size_t i = 0; i < n && !named; i++) {
      size_t len = strlen(paths[i]);
      named = fnmatch(paths[i], file, FNM_PATHNAME) == 0 ||
              (len > 0 && paths[i][len - 1] == '/' &&
               strncmp(file, paths[i], len) == 0);
    }
    if (!named)
      fail_msg("README.md's install table does not name %s", file);
    count++;
  }
  assert_true(count >= 10);
  for (size_t i = 0; i < n; i++)
    free(paths[i]);
  free(readme);
  free(files);
  free(script);
  free(prefix);
}

/* Whether `name` stands in `text` as a word of a backquoted list. */
static bool names_word(const char* text, const char* name) {
  size_t len = strlen(name);
  for (const char* p = strstr(text, name); p != NULL; p = strstr(p + 1, name)) {
    bool before = p > text && strchr(" `\n", p[-1]) != NULL;
    bool after = p[len] != '\0' && strchr(" `\n", p[len]) != NULL;
    if (before && after)
      return true;
  }
  return false;
}

/* Each package contrib/demo.sh installs (for make demo, make check and
 * make bench) is named, backquoted, in the README's Install section. */
static void test_readme_names_every_package_installed_for_you(void** state) {
  (void)state;
  char* out =
      sh("sed -n 's/^\\(bench_\\)\\{0,1\\}packages=\"\\(.*\\)\"$/\\2/p' "
         "contrib/demo.sh | tr ' ' '\\n'");
  char* readme = readme_text();
  char* install = strstr(readme, "## Install");
  assert_non_null(install);
  char* end = strstr(install, "\n```");
  assert_non_null(end);
  *end = '\0';
  size_t count = 0;
  for (char* name = strtok(out, "\n"); name != NULL;
       name = strtok(NULL, "\n")) {
    if (!names_word(install, name))
      fail_msg("README.md's Install section does not name %s", name);
    count++;
  }
  assert_true(count >= 10);
  free(readme);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pkgconfig_finds_a_moved_multiarch_tree),
      cmocka_unit_test(test_cmake_package_repeats_no_line),
      cmocka_unit_test(test_uninstall_leaves_no_directory),
      cmocka_unit_test(test_readme_table_names_every_installed_file),
      cmocka_unit_test(test_readme_names_every_package_installed_for_you),
  };
  return cmocka_run_group_tests(tests, kt_tmp_setup, kt_tmp_teardown);
}
