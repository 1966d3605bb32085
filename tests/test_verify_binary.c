/* SPDX-License-Identifier: MIT
 *
 * `kpack verify --binary` as a packager and a user with a failing load run
 * it: split trees with an archive missing, unreadable or declaring other
 * arches, agents given as the HIP runtime names them (--arch), directories
 * walked for binaries, and the --json document.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "fixture_program.h"
#include "support.h"

/* The arches of every code object of the fixture binaries. */
static const char* const fat_arches[] = {"gfx1100", "gfx90a:xnack-",
                                         "gfx942:sramecc+:xnack-"};

/* A HIP-like shared object (fixture_program.h) at `path` whose one bundle
 * holds a code object for each of fat_arches. */
static void write_fat(const char* path, uint32_t seed) {
  void* k[3];
  fx_entry e[4] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  for (size_t a = 0; a < 3; a++) {
    char* id;
    assert_true(asprintf(&id, "hipv4-amdgcn-amd-amdhsa--%s", fat_arches[a]) >
                0);
    k[a] = kt_pattern(900 + 31 * a, seed + (uint32_t)a);
    e[a + 1] = (fx_entry){id, k[a], 900 + 31 * a};
  }
  fx_buf bundle = fx_bundle(e, 4);
  char* dir = kt_path(kt_tmp, "build");
  mkdir(dir, 0755);
  fx_program_opts o = {
      .kind = FX_PROGRAM_SHARED, .bundles = &bundle, .bundle_count = 1};
  assert_true(fx_build_program(dir, &o, path));
  kt_rmtree(dir);
  free(dir);
  fx_free(&bundle);
  for (size_t a = 0; a < 3; a++) {
    free((char*)e[a + 1].id);
    free(k[a]);
  }
}

/* kt_tmp/in/lib/libfat.so.1 split into kt_tmp/out with prefix "p"; the
 * split binary's path (malloc'ed). */
static char* split_one(void) {
  char* in = kt_path(kt_tmp, "in");
  char* out = kt_path(kt_tmp, "out");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  write_fat(lib, 7);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", out, "--prefix", "p", in), 0);
  char* o_lib = kt_path(out, "lib/libfat.so.1");
  free(lib);
  free(in);
  free(out);
  return o_lib;
}

static char* archive_of(const char* arch) {
  char* path;
  assert_true(asprintf(&path, "%s/out/.kpack/p_%s.kpack", kt_tmp, arch) > 0);
  return path;
}

/* Fails the test unless `text` has the line prefix BINARY: record 0
 * (lib/libfat.so.1#0) AGENT: STATUS: followed by `why`. */
static void assert_failure_line(const char* text, const char* binary,
                                const char* agent, const char* status,
                                const char* why) {
  char* line;
  assert_true(asprintf(&line, "%s: record 0 (lib/libfat.so.1#0) %s: %s: %s",
                       binary, agent, status, why) > 0);
  kt_assert_contains(text, line);
  free(line);
}

/* ---- without --arch: the arches the split recorded ----------------------- */

/* The case of the issue: an archive moved away. Checking only the arches
 * of the archives still there, verify found nothing wrong. */
static void test_missing_archive_is_caught_without_arch(void** state) {
  (void)state;
  char* lib = split_one();
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", lib), 0);
  kt_assert_contains(text, "OK, 1 record, 3 loads");
  free(text);
  char* archive = archive_of("gfx90a:xnack-");
  char* moved = kt_path(kt_tmp, "moved.kpack");
  assert_int_equal(rename(archive, moved), 0);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", lib), 1);
  char* why;
  /* The loader looks for the arch, then for the bare processor, then for
   * portable SPIR-V. */
  assert_true(asprintf(&why,
                       "no archive for this arch is installed (looked for "
                       "%s, %s/out/.kpack/p_gfx90a.kpack, "
                       "%s/out/.kpack/p_amdgcnspirv.kpack)",
                       archive, kt_tmp, kt_tmp) > 0);
  assert_failure_line(text, lib, "gfx90a:xnack-",
                      "KPACK_ERROR_ARCHIVE_NOT_FOUND", why);
  kt_assert_contains(text, "1 problem in 1 record");
  free(why);
  free(text);
  free(moved);
  free(archive);
  free(lib);
}

/* An agent the split had no code for is told from a missing install. */
static void test_an_arch_the_split_never_had_is_no_missing_install(
    void** state) {
  (void)state;
  char* lib = split_one();
  char* text;
  assert_int_equal(
      KT_KPACK(&text, NULL, "verify", "--binary", "--arch", "gfx1030", lib), 1);
  assert_failure_line(text, lib, "gfx1030", "KPACK_ERROR_ARCHIVE_NOT_FOUND",
                      "no code for this GPU in this build: the split "
                      "recorded gfx1100, gfx90a:xnack-, "
                      "gfx942:sramecc+:xnack- (looked for ");
  free(text);
  free(lib);
}

/* An archive that is there but does not open is told apart from a missing
 * one, with the reason: the kpack status of a corrupt file, the system's
 * error text of a file that cannot be read. */
static void test_unreadable_archive_is_named_with_its_error(void** state) {
  (void)state;
  char* lib = split_one();
  char* archive = archive_of("gfx1100");
  size_t size;
  void* bytes = kt_read_file(archive, &size);
  assert_non_null(bytes);
  kt_write_file(archive, bytes, size / 2);
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", lib), 1);
  char* why;
  assert_true(asprintf(&why, "archive unreadable: %s: KPACK_ERROR_", archive) >
              0);
  assert_failure_line(text, lib, "gfx1100", "KPACK_ERROR_ARCHIVE_NOT_FOUND",
                      why);
  free(why);
  free(text);

  kt_write_file(archive, bytes, size);
  assert_int_equal(chmod(archive, 0), 0);
  int rc =
      kt_run_as_user((char* const[]){kt_kpack, "verify", "--binary", lib, NULL},
                     30.0, &text, NULL);
  if (rc < 0) {
    print_message(
        "cannot drop CAP_DAC_OVERRIDE: Permission denied case "
        "not checked\n");
  } else {
    assert_int_equal(rc, 1);
    assert_true(asprintf(&why, "archive unreadable: %s: %s", archive,
                         strerror(EACCES)) > 0);
    assert_failure_line(text, lib, "gfx1100", "KPACK_ERROR_ARCHIVE_NOT_FOUND",
                        why);
    free(why);
  }
  free(text);
  free(bytes);
  free(archive);
  free(lib);
}

/* An archive at the arch's name that declares other arches: archives were
 * found, and they do not declare it. */
static void test_archive_declaring_other_arches_is_told_apart(void** state) {
  (void)state;
  char* lib = split_one();
  char* archive = archive_of("gfx1100");
  const char* other[] = {"gfx906"};
  kt_kernel k = {"lib/libfat.so.1#0", "gfx906", "abc", 3};
  kt_write_archive(archive, KPACK_COMPRESSION_ZSTD_PER_KERNEL, other, 1, &k, 1);
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", lib), 1);
  char* why;
  assert_true(asprintf(&why,
                       "the archives found do not declare this arch (%s "
                       "declares gfx906)",
                       archive) > 0);
  assert_failure_line(text, lib, "gfx1100", "KPACK_ERROR_ARCH_NOT_FOUND", why);
  free(why);
  free(text);
  free(archive);
  free(lib);
}

/* ---- --arch: the agents of a machine ------------------------------------- */

static void test_arch_takes_agent_targets_as_the_runtime_names_them(
    void** state) {
  (void)state;
  char* lib = split_one();
  char* text;
  /* Features more specific than the archive's, and a full triple; both
   * the repeated and the comma-separated form. */
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "--arch",
                            "gfx90a:sramecc+:xnack-,amdgcn-amd-amdhsa--gfx1100",
                            "--arch", "gfx942:sramecc+:xnack-", lib),
                   0);
  kt_assert_contains(text, "OK, 1 record, 3 loads (the --arch agents)");
  free(text);
  /* An agent whose arch has no archive at all, and one whose xnack
   * setting no archive serves. */
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "--arch",
                            "gfx1151,gfx90a:xnack+", lib),
                   1);
  char* why;
  char* missing = archive_of("gfx1151");
  /* Neither is a broken install: the split had no code for them. */
  assert_true(asprintf(&why,
                       "no code for this GPU in this build: the split "
                       "recorded gfx1100, gfx90a:xnack-, "
                       "gfx942:sramecc+:xnack- (looked for %s, "
                       "%s/out/.kpack/p_amdgcnspirv.kpack)",
                       missing, kt_tmp) > 0);
  assert_failure_line(text, lib, "gfx1151", "KPACK_ERROR_ARCHIVE_NOT_FOUND",
                      why);
  assert_failure_line(text, lib, "gfx90a:xnack+",
                      "KPACK_ERROR_ARCHIVE_NOT_FOUND",
                      "no code for this GPU in this build");
  kt_assert_contains(text, "2 problems in 1 record");
  free(why);
  free(missing);
  free(text);
  /* A bare gfx90a agent (xnack either way) against a build for
   * gfx90a:xnack-: the archive is there, for other settings; the message
   * says which agent the build serves, and how to check that one. */
  assert_int_equal(
      KT_KPACK(&text, NULL, "verify", "--binary", "--arch", "gfx90a", lib), 1);
  missing = archive_of("gfx90a");
  char* spirv = archive_of("amdgcnspirv");
  assert_true(asprintf(&why,
                       "no archive for this arch is installed (looked for "
                       "%s, %s); the split recorded gfx90a:xnack-, which "
                       "serves an agent with those settings (--arch "
                       "gfx90a:xnack-), not a gfx90a agent, for which the "
                       "loader looks for gfx90a itself",
                       missing, spirv) > 0);
  free(spirv);
  assert_failure_line(text, lib, "gfx90a", "KPACK_ERROR_ARCHIVE_NOT_FOUND",
                      why);
  free(why);
  free(missing);
  free(text);
  /* What is not a target is a bad command line, naming it. */
  static const char* const bad[] = {"sm_80",
                                    "gfx90a:xnack",
                                    "gfx90a:xnack+:xnack-",
                                    "gfx90a:foo+",
                                    "gfx1100,",
                                    "gfx1100,,gfx90a",
                                    "",
                                    "amdgcn-amd-amdhsa--"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char* err;
    assert_int_equal(
        KT_KPACK(NULL, &err, "verify", "--binary", "--arch", bad[i], lib), 2);
    kt_assert_contains(err, "not a GPU target");
    free(err);
  }
  char* err;
  assert_int_equal(
      KT_KPACK(NULL, &err, "verify", "--binary", "--arch", "sm_80", lib), 2);
  kt_assert_contains(err, "'sm_80'");
  free(err);
  free(lib);
}

/* ---- directories --------------------------------------------------------- */

/* A tree: every kpack-ified binary under it is checked; other files, fat
 * binaries and what symbolic links lead to are passed over in silence
 * (named on the command line, a fat binary is reported). */
static void test_directory_checks_every_split_binary_under_it(void** state) {
  (void)state;
  char* in = kt_path(kt_tmp, "in");
  char* out = kt_path(kt_tmp, "out");
  char* lib = kt_tree_path(in, "lib/libfat.so.1");
  char* other = kt_tree_path(in, "lib/sub/libother.so");
  char* note = kt_tree_path(in, "share/note.txt");
  write_fat(lib, 11);
  write_fat(other, 21);
  kt_write_file(note, "not a binary\n", 13);
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", out, "--prefix", "p", in), 0);
  /* Outside the split tree: a fat binary, and a link to its directory. */
  char* fat = kt_tree_path(out, "opt/libstill-fat.so");
  write_fat(fat, 31);
  char* link = kt_path(out, "lib/elsewhere");
  assert_int_equal(symlink(in, link), 0);
  char* o_lib = kt_path(out, "lib/libfat.so.1");
  char* o_other = kt_path(out, "lib/sub/libother.so");
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", out), 0);
  char* expected;
  assert_true(asprintf(&expected,
                       "%s: OK, 1 record, 3 loads (the arches recorded by the "
                       "split)\n%s: OK, 1 record, 3 loads (the arches "
                       "recorded by the split)\n",
                       o_lib, o_other) > 0);
  assert_string_equal(text, expected);
  free(expected);
  free(text);
  /* A missing archive fails both binaries. */
  char* archive = archive_of("gfx942:sramecc+:xnack-");
  assert_int_equal(unlink(archive), 0);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "-q", out), 1);
  assert_failure_line(text, o_lib, "gfx942:sramecc+:xnack-",
                      "KPACK_ERROR_ARCHIVE_NOT_FOUND",
                      "no archive for this arch is installed");
  kt_assert_contains(text, o_other);
  free(text);
  /* Named, the fat binary is reported and skipped; a text file is no
   * binary. */
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", fat), 0);
  kt_assert_contains(text, "not kpack-ified");
  free(text);
  char* o_note = kt_path(out, "share/note.txt");
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", o_note), 1);
  kt_assert_contains(text, "KPACK_ERROR_INVALID_FORMAT");
  free(text);
  /* A tree without any checks nothing: a failure that says so, quiet or
   * not; the tree before the split (fat binaries only) too. */
  char* share = kt_path(out, "share");
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", share), 1);
  kt_assert_contains(text, "no kpack-ified binary in it: nothing was checked");
  free(text);
  char* empty = kt_path(kt_tmp, "empty");
  assert_int_equal(mkdir(empty, 0755), 0);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "-q", empty), 1);
  kt_assert_contains(text, "no kpack-ified binary in it");
  free(text);
  char* unsplit = kt_path(kt_tmp, "unsplit");
  char* unsplit_lib = kt_tree_path(unsplit, "lib/libfat.so");
  kt_copy_file(fat, unsplit_lib);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", unsplit), 1);
  kt_assert_contains(text, "no kpack-ified binary in it");
  free(text);
  char* json = NULL;
  assert_int_equal(
      KT_KPACK(&json, NULL, "verify", "--binary", "--json", unsplit), 1);
  kt_assert_contains(json, "\"ok\": false");
  free(json);
  free(unsplit_lib);
  free(unsplit);
  free(empty);
  free(share);
  free(o_note);
  free(archive);
  free(o_lib);
  free(o_other);
  free(link);
  free(fat);
  free(note);
  free(other);
  free(lib);
  free(in);
  free(out);
}

/* ---- --json -------------------------------------------------------------- */

/* jq -e FILTER over `json`: true when the filter's last output is true. */
static bool jq_true(const char* json, const char* filter) {
  char* file = kt_path(kt_tmp, "out.json");
  kt_write_file(file, json, strlen(json));
  char* argv[] = {"jq", "-e", (char*)filter, file, NULL};
  int rc = kt_run(argv, 30, NULL, NULL);
  free(file);
  return rc == 0;
}

static void test_json_gives_every_binary_record_and_agent(void** state) {
  (void)state;
  char* lib = split_one();
  char* archive = archive_of("gfx1100");
  char* moved = kt_path(kt_tmp, "moved.kpack");
  assert_int_equal(rename(archive, moved), 0);
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "--json", lib),
                   1);
  if (!jq_true(text, "."))
    fail_msg("not JSON:\n%s", text);
  static const char* const checks[] = {
      ".summary == {\"binaries\": 1, \"skipped\": 0, \"records\": 1, "
      "\"loads\": 3, \"failures\": 1, \"ok\": false, \"interrupted\": false}",
      ".binaries | length == 1",
      ".binaries[0].kind == \"kpack-ified\" and .binaries[0].ok == false",
      ".binaries[0].recorded_arches == [\"gfx1100\", \"gfx90a:xnack-\", "
      "\"gfx942:sramecc+:xnack-\"]",
      ".binaries[0].records[0] | .record == 0 and .co_index == 0 and "
      ".kernel == \"lib/libfat.so.1\" and .checked == \"recorded\"",
      ".binaries[0].records[0].agents | map(.agent) == [\"gfx1100\", "
      "\"gfx90a:xnack-\", \"gfx942:sramecc+:xnack-\"]",
      ".binaries[0].records[0].agents[0] | .ok == false and .status == "
      "\"KPACK_ERROR_ARCHIVE_NOT_FOUND\" and .reason == \"no-archive\" and "
      "(.message | startswith(\"no archive for this arch\"))",
      ".binaries[0].records[0].agents[1] | .ok and .reason == null and "
      "(.archive | endswith(\"/p_gfx90a:xnack-.kpack\")) and .size == 931",
  };
  for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
    if (!jq_true(text, checks[i]))
      fail_msg("jq -e '%s' is not true of:\n%s", checks[i], text);
  free(text);
  /* All good, with --arch, and a fat binary skipped: exit 0. */
  char* fat = kt_path(kt_tmp, "in/lib/libfat.so.1");
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "--json",
                            "--arch", "gfx90a:sramecc-:xnack-", lib, fat),
                   0);
  static const char* const good[] = {
      ".summary.ok and .summary.loads == 1 and .summary.skipped == 1",
      ".binaries[0].records[0].checked == \"--arch\"",
      (".binaries[1] | .kind == \"fat\" and .ok and (.skipped | "
       "startswith(\"not kpack-ified\"))"),
  };
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    if (!jq_true(text, good[i]))
      fail_msg("jq -e '%s' is not true of:\n%s", good[i], text);
  free(text);
  free(fat);
  free(moved);
  free(archive);
  free(lib);
}

/* ---- what the split records ---------------------------------------------- */

/* The arches recorded are those of the code objects written, after
 * --arch; `kpack info` shows them, and verify checks exactly them. */
static void test_split_records_the_arches_it_wrote(void** state) {
  (void)state;
  char* lib = split_one();
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "info", lib), 0);
  kt_assert_contains(text,
                     "split for:    gfx1100 gfx90a:xnack- "
                     "gfx942:sramecc+:xnack- (kpack_arches)\n");
  free(text);
  char* in = kt_path(kt_tmp, "in");
  char* out = kt_path(kt_tmp, "out-1100");
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", out, "--arch", "gfx1100", in),
      0);
  char* o_lib = kt_path(out, "lib/libfat.so.1");
  assert_int_equal(KT_KPACK(&text, NULL, "info", "--json", o_lib), 0);
  if (!jq_true(text, ".[0].records[0].recorded_arches == [\"gfx1100\"]"))
    fail_msg("recorded_arches is not [gfx1100] in:\n%s", text);
  free(text);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", o_lib), 0);
  kt_assert_contains(text, "OK, 1 record, 1 load (the arches recorded");
  free(text);
  free(o_lib);
  free(out);
  free(in);
  free(lib);
}

/* A library linked from objects built for different --offload-arch sets:
 * record 0's bundle holds gfx1100 and gfx90a:xnack-, record 1's only
 * gfx942:sramecc+:xnack-. Each record is checked for its own arches: the
 * correct split verifies, a missing archive is still caught, and an
 * --arch agent a record has no code for says so for that record. */
static void test_records_built_for_different_arches_are_each_checked(
    void** state) {
  (void)state;
  void* k[3];
  fx_entry a[3] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  fx_entry b[2] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0}};
  char* ids[3];
  for (size_t i = 0; i < 3; i++) {
    assert_true(
        asprintf(&ids[i], "hipv4-amdgcn-amd-amdhsa--%s", fat_arches[i]) > 0);
    k[i] = kt_pattern(700 + 13 * i, 40 + (uint32_t)i);
  }
  a[1] = (fx_entry){ids[0], k[0], 700};
  a[2] = (fx_entry){ids[1], k[1], 713};
  b[1] = (fx_entry){ids[2], k[2], 726};
  fx_buf bundles[2] = {fx_bundle(a, 3), fx_bundle(b, 2)};
  size_t target[2] = {0, 1};
  char* in = kt_path(kt_tmp, "in");
  char* out = kt_path(kt_tmp, "out");
  char* lib = kt_tree_path(in, "lib/libmixed.so.1");
  char* dir = kt_path(kt_tmp, "build");
  mkdir(dir, 0755);
  fx_program_opts o = {.kind = FX_PROGRAM_SHARED,
                       .bundles = bundles,
                       .bundle_count = 2,
                       .target = target,
                       .record_count = 2};
  assert_true(fx_build_program(dir, &o, lib));
  assert_int_equal(
      KT_KPACK(NULL, NULL, "split", "-q", "-o", out, "--prefix", "p", in), 0);
  char* o_lib = kt_path(out, "lib/libmixed.so.1");
  char* text;
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", o_lib), 0);
  kt_assert_contains(text, "OK, 2 records, 3 loads (the arches recorded");
  free(text);
  /* What each record recorded, and the binary's whole list. */
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "--json", o_lib),
                   0);
  if (!jq_true(text,
               ".binaries[0].recorded_arches == [\"gfx1100\", "
               "\"gfx90a:xnack-\", \"gfx942:sramecc+:xnack-\"] and "
               "([.binaries[0].records[].agents | length] == [2, 1])"))
    fail_msg("per-record checks are not as recorded in:\n%s", text);
  free(text);
  assert_int_equal(KT_KPACK(&text, NULL, "info", "--json", o_lib), 0);
  if (!jq_true(text,
               "[.[0].records[].recorded_arches] == [[\"gfx1100\", "
               "\"gfx90a:xnack-\"], [\"gfx942:sramecc+:xnack-\"]]"))
    fail_msg("info does not show each record's arches in:\n%s", text);
  free(text);
  /* gfx942's archive gone: record 1 fails, record 0 does not. */
  char* archive = archive_of("gfx942:sramecc+:xnack-");
  char* moved = kt_path(kt_tmp, "moved.kpack");
  assert_int_equal(rename(archive, moved), 0);
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", o_lib), 1);
  kt_assert_contains(text,
                     "record 1 (lib/libmixed.so.1#1) "
                     "gfx942:sramecc+:xnack-: "
                     "KPACK_ERROR_ARCHIVE_NOT_FOUND: no archive for "
                     "this arch is installed");
  kt_assert_contains(text, "1 problem in 2 records");
  free(text);
  assert_int_equal(rename(moved, archive), 0);
  /* An agent record 0 was not built for: that record has no code for it. */
  assert_int_equal(KT_KPACK(&text, NULL, "verify", "--binary", "--arch",
                            "gfx942:sramecc+:xnack-", o_lib),
                   1);
  kt_assert_contains(text,
                     "record 0 (lib/libmixed.so.1#0) "
                     "gfx942:sramecc+:xnack-: "
                     "KPACK_ERROR_KERNEL_NOT_FOUND: kernel missing from ");
  kt_assert_contains(text,
                     "; no code for this GPU in this record: the split "
                     "recorded gfx1100, gfx90a:xnack- for it\n");
  kt_assert_contains(text, "1 problem in 2 records");
  free(text);
  kt_rmtree(dir);
  free(dir);
  free(archive);
  free(moved);
  free(o_lib);
  free(lib);
  free(out);
  free(in);
  for (size_t i = 0; i < 2; i++)
    fx_free(&bundles[i]);
  for (size_t i = 0; i < 3; i++) {
    free(ids[i]);
    free(k[i]);
  }
}

int main(void) {
#define T(name) \
  cmocka_unit_test_setup_teardown(name, kt_kpack_setup, kt_kpack_teardown)
  const struct CMUnitTest tests[] = {
      T(test_missing_archive_is_caught_without_arch),
      T(test_an_arch_the_split_never_had_is_no_missing_install),
      T(test_unreadable_archive_is_named_with_its_error),
      T(test_archive_declaring_other_arches_is_told_apart),
      T(test_arch_takes_agent_targets_as_the_runtime_names_them),
      T(test_directory_checks_every_split_binary_under_it),
      T(test_json_gives_every_binary_record_and_agent),
      T(test_split_records_the_arches_it_wrote),
      T(test_records_built_for_different_arches_are_each_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
