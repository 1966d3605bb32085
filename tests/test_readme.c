/* SPDX-License-Identifier: MIT
 *
 * README.md says what it shows: its library snippet compiles with
 * -std=c11 -pedantic-errors against the headers `make install` puts in
 * place, and links and runs as the README builds it (its pkg-config cc
 * lines, shared and static, and its CMake lines, both targets); every `kpack`
 * example in it runs and succeeds, from a directory holding Debian's librocrand
 * as the README says, and each command has one, and so do the examples of
 * `kpack cat --help`; its kpackfs session mounts and
 * unmounts, and so does each of its fstab lines, through mount.fuse3 (the
 * helper mount(8) runs for them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support.h"

static char* readme;
static char* sandbox;

static int setup(void** state) {
  kt_tmp_setup(state);
  const char* src = getenv("KPACK_SOURCE_DIR");
  char* path = kt_path(src != NULL && *src ? src : ".", "README.md");
  size_t size;
  readme = kt_read_file(path, &size);
  assert_non_null(readme);
  free(path);
  sandbox = kt_path(kt_tmp, "session");
  return 0;
}

static int teardown(void** state) {
  free(readme);
  free(sandbox);
  return kt_tmp_teardown(state);
}

/* ---- README blocks ---------------------------------------------------- */

/* Calls fn for each line of each fenced block whose info string is one of
 * `kinds` (space-separated; "plain" names a fence without one), with the
 * block's number. */
typedef void (*line_fn)(const char* line, size_t block, void* user);

static void for_each_block_line(const char* kinds, line_fn fn, void* user) {
  bool inside = false, wanted = false;
  size_t block = 0;
  for (const char* p = readme; *p;) {
    const char* end = strchr(p, '\n');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    char* line = strndup(p, len);
    if (strncmp(line, "```", 3) == 0) {
      if (!inside) {
        char kind[32];
        snprintf(kind, sizeof(kind), " %s ", line[3] ? line + 3 : "plain");
        char* list;
        assert_true(asprintf(&list, " %s ", kinds) > 0);
        wanted = strstr(list, kind) != NULL;
        free(list);
        block++;
      }
      inside = !inside;
    } else if (inside && wanted) {
      fn(line, block, user);
    }
    free(line);
    p += len + (end != NULL);
  }
}

typedef struct lines {
  char* items[64];
  size_t count;
  /* collect_all: the block of the first kpackfs line; collect_fstab: the
   * fstab block's. */
  size_t block;
} lines;

static void collect_kpack(const char* line, size_t block, void* user) {
  lines* l = user;
  (void)block;
  if (strncmp(line, "$ ", 2) == 0)
    line += 2;
  if (strncmp(line, "kpack ", 6) == 0) {
    assert_true(l->count < 64);
    l->items[l->count++] = strdup(line);
  }
}

static void collect_all(const char* line, size_t block, void* user) {
  lines* l = user;
  assert_true(l->count < 64);
  l->items[l->count++] = strdup(line);
  if (l->block == 0 && strncmp(line, "kpackfs ", 8) == 0)
    l->block = block;
}

/* The README's `cc app.c ...` commands, continuation lines joined. */
static void collect_cc(const char* line, size_t block, void* user) {
  lines* l = user;
  (void)block;
  size_t n = l->count;
  bool continued =
      n > 0 && l->items[n - 1][strlen(l->items[n - 1]) - 1] == '\\';
  if (continued) {
    char* joined;
    assert_true(asprintf(&joined, "%s\n%s", l->items[n - 1], line) > 0);
    free(l->items[n - 1]);
    l->items[n - 1] = joined;
  } else if (strncmp(line, "cc app.c ", 9) == 0) {
    assert_true(n < 64);
    l->items[l->count++] = strdup(line);
  }
}

static void free_lines(lines* l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->items[i]);
}

/* ---- running in the session directory ---------------------------------- */

/* Runs `script` with bash in the session directory, the programs under
 * test first on PATH; fails the test, showing the script and its output,
 * unless it exits 0. */
static void run_in_session(const char* script) {
  char* bin = realpath(kt_bin_dir(), NULL);
  assert_non_null(bin);
  char *cmd, *out, *err;
  assert_true(asprintf(&cmd, "cd '%s' && PATH='%s':\"$PATH\" && %s", sandbox,
                       bin, script) > 0);
  const char* args[] = {"-ec", cmd, NULL};
  int status = kt_run_args("bash", args, 300, &out, &err);
  if (status != 0)
    fail_msg("README example exited %d:\n%s\nstdout:\n%.2000s\nstderr:\n%s",
             status, script, out, err);
  free(out);
  free(err);
  free(cmd);
  free(bin);
}

static void make_session(void) {
  kt_rmtree(sandbox);
  char *lib = kt_librocrand(), *cmd;
  assert_true(asprintf(&cmd,
                       "mkdir -p '%s' && ln -s '%s' '%s/librocrand.so.1.1'",
                       sandbox, lib, sandbox) > 0);
  const char* args[] = {"-c", cmd, NULL};
  assert_int_equal(kt_run_args("sh", args, 30, NULL, NULL), 0);
  free(cmd);
  free(lib);
}

/* The commands `kpack help` lists. */
static size_t tool_commands(char names[32][32]) {
  char *tool = kt_program("kpack"), *out;
  const char* args[] = {"help", NULL};
  assert_int_equal(kt_run_args(tool, args, 30, &out, NULL), 0);
  char* p = strstr(out, "\nCOMMANDS\n");
  assert_non_null(p);
  p += strlen("\nCOMMANDS\n");
  size_t n = 0;
  while (strncmp(p, "    ", 4) == 0 && n < 32) {
    sscanf(p + 4, "%31s", names[n++]);
    p = strchr(p, '\n') + 1;
  }
  free(out);
  free(tool);
  return n;
}

/* The README's fstab block (the plain fenced block that starts
 * "# <source>"), its lines but the comments, one string each. */
static void collect_fstab(const char* line, size_t block, void* user) {
  lines* l = user;
  if (l->block == 0 && strncmp(line, "# <source>", 10) == 0)
    l->block = block;
  if (block == l->block && line[0] != '#') {
    assert_true(l->count < 64);
    l->items[l->count++] = strdup(line);
  }
}

/* Where the README's fstab sources stand in the session: the split's
 * archive directory, two archives of the example session and one of the
 * split's, its ':' escaped as the README says. */
static const char* const fstab_sources[][2] = {
    {"/opt/rocm/lib/.kpack", "out/.kpack"},
    {"/srv/a/blas_gfx942.kpack", "rand.kpack"},
    {"/srv/b/blas_gfx90a\\:xnack-.kpack",
     "out/.kpack/rand_lib_gfx90a\\:xnack-.kpack"},
};
#define FSTAB_SOURCES (sizeof(fstab_sources) / sizeof(fstab_sources[0]))
/* The program a `fuse` line names in its source (PROGRAM#SOURCE). */
#define FSTAB_PROGRAM "/opt/rocm-kpack/bin/kpackfs"

/* Writes the stand-in of one fstab source item of `len` bytes. */
static void put_source_item(FILE* s, const char* item, size_t len) {
  for (size_t k = 0; k < FSTAB_SOURCES; k++)
    if (strlen(fstab_sources[k][0]) == len &&
        strncmp(item, fstab_sources[k][0], len) == 0) {
      fputs(fstab_sources[k][1], s);
      return;
    }
  fail_msg("README fstab source '%.*s' has no stand-in here", (int)len, item);
}

/* Each fstab line mounts as mount(8) mounts it, as written but for its
 * paths: the sources are the session's archives (a list split at each ':'
 * not escaped as '\\:'), the mount points directories of the session, the
 * options (noauto, nofail, defaults, allow_other, cache_size,
 * x-systemd.automount) as they are. mount(8) runs the helper mount.fuse3
 * for them: `mount.fuse3 SOURCE DIR -o OPTIONS -t fuse.kpackfs` for the
 * type fuse.kpackfs, which starts `kpackfs` by name (the kpackfs under test
 * is first on PATH here, as one in /usr/local/bin is on the shell's default
 * PATH), and `mount.fuse3 PROGRAM#SOURCE DIR -o OPTIONS` for the type fuse,
 * run here with no environment at all, as mount(8) may: the program is
 * the kpackfs under test by its absolute path. */
static void mount_fstab_lines(void) {
  lines l = {.count = 0};
  for_each_block_line("plain", collect_fstab, &l);
  assert_true(l.count >= 4);
  char* bin = realpath(kt_bin_dir(), NULL);
  assert_non_null(bin);
  char* script = NULL;
  size_t size = 0;
  FILE* s = open_memstream(&script, &size);
  fprintf(s, "export PATH=\"$PATH:/usr/sbin:/sbin\"\n");
  bool program_line = false;
  for (size_t i = 0; i < l.count; i++) {
    char source[512], point[256], type[64], options[256];
    if (sscanf(l.items[i], "%511s %255s %63s %255s", source, point, type,
               options) != 4)
      fail_msg("README fstab line '%s' has not four fields", l.items[i]);
    bool plain_fuse = strcmp(type, "fuse") == 0;
    const char* items = source;
    fprintf(s, "mkdir -p '.%s' && ", point);
    if (plain_fuse) {
      const char* hash = strchr(source, '#');
      if (hash == NULL || strncmp(source, FSTAB_PROGRAM, hash - source) != 0 ||
          (size_t)(hash - source) != strlen(FSTAB_PROGRAM))
        fail_msg("README fstab line '%s': no %s#SOURCE", l.items[i],
                 FSTAB_PROGRAM);
      items = hash + 1;
      program_line = true;
      fprintf(s, "env -i \"$(command -v mount.fuse3)\" '%s/kpackfs#", bin);
    } else {
      assert_string_equal(type, "fuse.kpackfs");
      fprintf(s, "mount.fuse3 '");
    }
    /* the items, split at each ':' not escaped */
    const char* start = items;
    for (const char* p = items;; p++) {
      if (*p == '\\' && p[1] != '\0') {
        p++;
        continue;
      }
      if (*p == ':' || *p == '\0') {
        if (start != items)
          fputc(':', s);
        put_source_item(s, start, (size_t)(p - start));
        if (*p == '\0')
          break;
        start = p + 1;
      }
    }
    fprintf(s, "' '.%s' -o '%s'%s%s\n", point, options,
            plain_fuse ? "" : " -t ", plain_fuse ? "" : type);
    fprintf(s,
            "test -n \"$(ls '.%s')\" || { echo '%s: empty'; exit 1; }\n"
            "fusermount3 -u '.%s'\n",
            point, point, point);
  }
  fclose(s);
  if (!program_line)
    fail_msg("README fstab block has no line of the type fuse");
  run_in_session(script);
  free(script);
  free(bin);
  free_lines(&l);
}

/* The EXAMPLES of `kpack cat --help` run in the README's session, where
 * the rand.kpack they read is (a pipe fails when any of its commands does):
 * readelf, for one, reads regular files only. */
static void run_cat_manual_examples(void) {
  char *tool = kt_program("kpack"), *manual;
  const char* args[] = {"cat", "--help", NULL};
  assert_int_equal(kt_run_args(tool, args, 30, &manual, NULL), 0);
  char* p = strstr(manual, "\nEXAMPLES\n");
  assert_non_null(p);
  p += strlen("\nEXAMPLES\n");
  size_t n = 0;
  while (strncmp(p, "    ", 4) == 0) {
    char* end = strchr(p, '\n');
    assert_non_null(end);
    char* script;
    assert_true(asprintf(&script, "set -o pipefail; %.*s", (int)(end - p - 4),
                         p + 4) > 0);
    run_in_session(script);
    free(script);
    n++;
    p = end + 1;
  }
  assert_true(n >= 2);
  free(manual);
  free(tool);
}

/* ---- tests ------------------------------------------------------------ */

static void test_every_kpack_example_runs(void** state) {
  (void)state;
  lines l = {.count = 0};
  for_each_block_line("sh console", collect_kpack, &l);
  char names[32][32];
  size_t commands = tool_commands(names);
  assert_true(commands >= 9);
  for (size_t c = 0; c < commands; c++) {
    char* prefix;
    assert_true(asprintf(&prefix, "kpack %s ", names[c]) > 0);
    bool shown = false;
    for (size_t i = 0; i < l.count && !shown; i++)
      shown = strncmp(l.items[i], prefix, strlen(prefix)) == 0;
    if (!shown)
      fail_msg("README has no example of `kpack %s`", names[c]);
    free(prefix);
  }
  make_session();
  for (size_t i = 0; i < l.count; i++)
    run_in_session(l.items[i]);
  free_lines(&l);
  run_cat_manual_examples();
}

static void test_kpackfs_session_mounts_and_unmounts(void** state) {
  (void)state;
  lines all = {.count = 0};
  for_each_block_line("sh", collect_all, &all);
  free_lines(&all);
  assert_true(all.block > 0);
  /* the kpack examples first: the mount session continues them */
  lines l = {.count = 0};
  for_each_block_line("sh console", collect_kpack, &l);
  make_session();
  for (size_t i = 0; i < l.count; i++)
    run_in_session(l.items[i]);
  free_lines(&l);
  /* the block that mounts, as one script */
  size_t block = 0;
  char* script = NULL;
  size_t size = 0;
  FILE* f = open_memstream(&script, &size);
  bool inside = false;
  for (const char* p = readme; *p;) {
    const char* end = strchr(p, '\n');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (strncmp(p, "```", 3) == 0) {
      if (!inside)
        block++;
      inside = !inside;
    } else if (inside && block == all.block) {
      fprintf(f, "%.*s\n", (int)len, p);
    }
    p += len + (end != NULL);
  }
  fclose(f);
  kt_assert_contains(script, "fusermount3 -u");
  run_in_session(script);
  free(script);
  mount_fstab_lines();
}

static void test_library_snippet_compiles_against_installed_headers(
    void** state) {
  (void)state;
  lines all = {.count = 0};
  for_each_block_line("c", collect_all, &all);
  assert_true(all.count > 10);
  char* snippet = kt_path(kt_tmp, "snippet.c");
  FILE* f = fopen(snippet, "w");
  assert_non_null(f);
  for (size_t i = 0; i < all.count; i++)
    fprintf(f, "%s\n", all.items[i]);
  fclose(f);
  free_lines(&all);

  const char* src = getenv("KPACK_SOURCE_DIR");
  const char* build = getenv("KPACK_TEST_BUILD");
  char* prefix = kt_path(kt_tmp, "usr");
  char* archive = kt_path(kt_tmp, "snippet.kpack");
  static const char* const arches[] = {"gfx942"};
  void* data = kt_pattern(4096, 7);
  kt_kernel k = {"lib/libx.so#0", "gfx942", data, 4096};
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 1, &k,
                   1);
  free(data);
  /* How the README builds against the library: its cc lines with the
   * test's prefix for /usr/local, and a CMake project of its lines. */
  lines cc = {.count = 0}, cmake = {.count = 0};
  for_each_block_line("sh", collect_cc, &cc);
  for_each_block_line("cmake", collect_all, &cmake);
  assert_int_equal(cc.count, 2);
  assert_true(cmake.count >= 3);
  char* build_sh = kt_path(kt_tmp, "build.sh");
  f = fopen(build_sh, "w");
  assert_non_null(f);
  for (size_t i = 0; i < cc.count; i++) {
    for (const char* p = cc.items[i]; *p;) {
      if (strncmp(p, "/usr/local", 10) == 0) {
        fputs(prefix, f);
        p += 10;
      } else {
        fputc(*p++, f);
      }
    }
    fprintf(f,
            "\ntest \"$(LD_LIBRARY_PATH='%s/lib' ./a.out snippet.kpack "
            "'lib/libx.so#0' gfx942)\" = '4096 bytes'\nrm a.out\n",
            prefix);
  }
  fclose(f);
  char* cmake_dir = kt_path(kt_tmp, "cmake");
  char* cmake_file = kt_path(cmake_dir, "CMakeLists.txt");
  assert_int_equal(mkdir(cmake_dir, 0755), 0);
  f = fopen(cmake_file, "w");
  assert_non_null(f);
  fprintf(f,
          "cmake_minimum_required(VERSION 3.13)\n"
          "project(readme C)\n"
          "add_executable(app ../snippet.c)\n"
          "add_executable(app_static ../snippet.c)\n");
  for (size_t i = 0; i < cmake.count; i++)
    fprintf(f, "%s\n", cmake.items[i]);
  fclose(f);
  free_lines(&cc);
  free_lines(&cmake);
  /* a sanitizer build's library needs its runtime: compile only */
  const char* sanitize = getenv("KPACK_SANITIZE");
  bool link = sanitize == NULL || *sanitize == '\0';
  char* script;
  assert_true(
      asprintf(&script,
               "unset MAKEFLAGS MFLAGS MAKELEVEL\n"
               "make -s -C '%s' install PREFIX='%s' BUILD='%s' >/dev/null\n"
               "cd '%s'\n"
               "cc -std=c11 -pedantic-errors -Wall -Wextra -Werror "
               "-I'%s/include' -c snippet.c -o snippet.o\n"
               "if %s; then\n"
               "  cc snippet.o -o snippet -L'%s/lib' -lrocm_kpack "
               "-Wl,-rpath,'%s/lib'\n"
               "  test \"$(./snippet snippet.kpack 'lib/libx.so#0' gfx942)\" "
               "= '4096 bytes'\n"
               "  ! ./snippet snippet.kpack 'lib/libx.so#0' gfx90a 2>err\n"
               "  grep -q 'KPACK_ERROR_KERNEL_NOT_FOUND' err\n"
               "  cp snippet.c app.c\n"
               "  PKG_CONFIG_PATH='%s/lib/pkgconfig' bash -e build.sh\n"
               "  cmake -S cmake -B cmake/build -DCMAKE_PREFIX_PATH='%s' "
               ">/dev/null\n"
               "  cmake --build cmake/build >/dev/null\n"
               "  for app in app app_static; do\n"
               "    test \"$(cmake/build/$app snippet.kpack 'lib/libx.so#0' "
               "gfx942)\" = '4096 bytes'\n"
               "  done\n"
               "  ! readelf -d cmake/build/app_static | grep -q librocm_kpack\n"
               "fi\n",
               src != NULL && *src ? src : ".", prefix,
               build != NULL && *build ? build : "build", kt_tmp, prefix,
               link ? "true" : "false", prefix, prefix, prefix, prefix) > 0);
  const char* args[] = {"-ec", script, NULL};
  char *out, *err;
  int status = kt_run_args("bash", args, 300, &out, &err);
  if (status != 0)
    fail_msg("the README's snippet:\n%s\nstdout:\n%s\nstderr:\n%s", script, out,
             err);
  free(out);
  free(err);
  free(script);
  free(prefix);
  free(archive);
  free(snippet);
  free(build_sh);
  free(cmake_dir);
  free(cmake_file);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_library_snippet_compiles_against_installed_headers),
      cmocka_unit_test(test_every_kpack_example_runs),
      cmocka_unit_test(test_kpackfs_session_mounts_and_unmounts),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
