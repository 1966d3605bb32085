/* SPDX-License-Identifier: MIT
 *
 * The build on a machine that lacks a dependency: `make` names the Debian
 * package to install before it compiles anything, instead of failing at
 * the link with pages of undefined references. pkg-config is given a
 * search path that holds every module of the machine but the one left out.
 * And make check's own guard: a suite that writes into the source tree
 * fails it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* A directory of links to every *.pc pkg-config finds here, but `left_out`;
 * free() it. */
static char* modules_but(const char* left_out) {
  char* dir = kt_path(kt_tmp, "pkgconfig");
  char* script;
  assert_true(asprintf(&script,
                       "mkdir -p '%s' && IFS=: && "
                       "for d in $(pkg-config --variable pc_path pkg-config); "
                       "do for f in \"$d\"/*.pc; do [ -e \"$f\" ] || continue; "
                       "n=${f##*/}; [ \"$n\" = '%s.pc' ] || "
                       "ln -sf \"$f\" '%s'/\"$n\"; done; done",
                       dir, left_out, dir) > 0);
  const char* args[] = {"-ec", script, NULL};
  assert_int_equal(kt_run_args("sh", args, 60, NULL, NULL), 0);
  free(script);
  return dir;
}

static void test_make_names_the_missing_package_before_compiling(void** state) {
  (void)state;
  const char* src = getenv("KPACK_SOURCE_DIR");
  char* pc = modules_but("msgpack");
  char* build = kt_path(kt_tmp, "build");
  char *script, *out, *err;
  assert_true(asprintf(&script,
                       "unset MAKEFLAGS MFLAGS MAKELEVEL\n"
                       "PKG_CONFIG_LIBDIR='%s' make -s -j2 -C '%s' BUILD='%s' "
                       "all\n",
                       pc, src != NULL && *src ? src : ".", build) > 0);
  const char* args[] = {"-c", script, NULL};
  int rc = kt_run_args("sh", args, 300, &out, &err);
  assert_int_equal(rc, 2);
  static const char want[] =
      "kpack: missing build dependencies (Debian packages): libmsgpack-dev\n"
      "  install them as root: apt-get install libmsgpack-dev\n"
      "  (make demo and make check, run as root, install what is missing)\n";
  if (strncmp(err, want, strlen(want)) != 0)
    fail_msg("make said:\n%s\nnot first:\n%s", err, want);
  /* After it, only make's own lines: which step failed, and with -j that
   * it waits for the others. */
  for (const char* line = err + strlen(want); *line;) {
    const char* end = strchr(line, '\n');
    if (strncmp(line, "make: *** ", 10) != 0 || end == NULL)
      fail_msg("after the message, make said:\n%s", err + strlen(want));
    line = end + 1;
  }
  free(out);
  free(err);
  /* Nothing was compiled. */
  char* find;
  assert_true(
      asprintf(&find, "find '%s' -name '*.o' 2>/dev/null || true", build) > 0);
  const char* find_args[] = {"-c", find, NULL};
  assert_int_equal(kt_run_args("sh", find_args, 60, &out, NULL), 0);
  assert_string_equal(out, "");
  free(out);
  free(find);
  free(script);
  free(build);
  free(pc);
}

/* make check's runner (tests/run_suites.sh) counts a suite that leaves a
 * file in the source tree, outside the build trees, as one failure and
 * names the file; one that writes into build/ only passes. Run here in a
 * scratch git checkout with two stand-in suites. */
static void test_check_fails_when_a_suite_writes_into_the_source_tree(
    void** state) {
  (void)state;
  const char* env = getenv("KPACK_SOURCE_DIR");
  char* src = realpath(env != NULL && *env ? env : ".", NULL);
  assert_non_null(src);
  char* repo = kt_path(kt_tmp, "checkout");
  char* script;
  assert_true(
      asprintf(
          &script,
          "unset PYTEST\n"
          "mkdir -p '%s/tests' && cd '%s' && git init -q .\n"
          "printf 'ignored/\\n' > .gitignore\n"
          "printf '#!/bin/sh\\necho \"layers: 1 passed, 0 failed\"\\n' "
          "> tests/layers.sh\n"
          "printf '#!/bin/sh\\nmkdir -p build && : > build/ok\\n"
          "echo \"[  PASSED  ] 1 test(s).\"\\n' > clean\n"
          "printf '#!/bin/sh\\nmkdir -p split ignored && : > split/x.kpack "
          "&& : > ignored/y\\necho \"[  PASSED  ] 1 test(s).\"\\n' "
          "> stray\n"
          "chmod +x tests/layers.sh clean stray\n"
          "git add -A && git -c user.name=t -c user.email=t@t commit -qm t\n"
          "sh '%s/tests/run_suites.sh' '' cc '' ./clean > clean.log\n"
          "tail -n 1 clean.log\n"
          "rm clean.log\n"
          "if sh '%s/tests/run_suites.sh' '' cc '' ./stray > stray.log; "
          "then echo 'stray passed'; fi\n"
          "grep -e '^check:' -e split/ -e ignored/ stray.log\n",
          repo, repo, src != NULL && *src ? src : ".",
          src != NULL && *src ? src : ".") > 0);
  const char* args[] = {"-ec", script, NULL};
  char *out, *err;
  int status = kt_run_args("sh", args, 120, &out, &err);
  if (status != 0)
    fail_msg("exit %d\nstdout:\n%s\nstderr:\n%s", status, out, err);
  assert_string_equal(out,
                      "check: 2 passed, 0 failed\n"
                      "  ?? split/\n"
                      "  !! ignored/\n"
                      "check: 2 passed, 1 failed\n");
  free(out);
  free(err);
  free(script);
  free(repo);
  free(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_make_names_the_missing_package_before_compiling),
      cmocka_unit_test(
          test_check_fails_when_a_suite_writes_into_the_source_tree),
  };
  return cmocka_run_group_tests(tests, kt_tmp_setup, kt_tmp_teardown);
}
