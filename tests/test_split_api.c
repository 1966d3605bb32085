/* SPDX-License-Identifier: MIT
 *
 * The producer as any program uses it: a tree split and its binaries
 * verified through the public headers alone (kpack_split.h,
 * kpack_verify_binary.h). This suite is compiled without libkpack/ on its
 * include path and linked against the shared library, which exports only
 * the public API (Makefile). The plan read back as data, the execution
 * and its result, the verify records, a progress callback that cancels,
 * and the messages of a failure with their file and errno.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture_fatbin.h"
#include "fixture_program.h"
#include "rocm_kpack/kpack_ext.h"
#include "support.h"

/* ---- helpers ------------------------------------------------------------- */

/* The messages a call sent, copied. */
typedef struct api_messages {
  kpack_message_t items[64];
  size_t count;
} api_messages;

static void collect(const kpack_message_t* m, void* user) {
  api_messages* all = user;
  if (all->count == sizeof(all->items) / sizeof(all->items[0]))
    return;
  kpack_message_t* copy = &all->items[all->count++];
  *copy = *m;
  copy->file = m->file != NULL ? strdup(m->file) : NULL;
  copy->text = strdup(m->text);
}

static void messages_free(api_messages* all) {
  for (size_t i = 0; i < all->count; i++) {
    free((char*)all->items[i].file);
    free((char*)all->items[i].text);
  }
  all->count = 0;
}

/* The first message of `severity`, or a failure of the test. */
static const kpack_message_t* first_of(const api_messages* all,
                                       kpack_severity_t severity) {
  for (size_t i = 0; i < all->count; i++)
    if (all->items[i].severity == severity)
      return &all->items[i];
  fail_msg("no message of severity %d among %zu", (int)severity, all->count);
  return NULL;
}

/* A shared object linked by the system compiler whose one code object is
 * for gfx90a:xnack- and gfx1100, its bytes from `seed`. */
static void write_library(const char* path, uint32_t seed) {
  void* a = kt_pattern(3000, seed);
  void* b = kt_pattern(2000, seed + 1);
  fx_entry e[] = {{"host-x86_64-unknown-linux-gnu-", NULL, 0},
                  {"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", a, 3000},
                  {"hipv4-amdgcn-amd-amdhsa--gfx1100", b, 2000}};
  char* dir = kt_in_tmp("build");
  kt_mkdirs(dir);
  assert_true(fx_build_library(dir, e, 3, path));
  kt_rmtree(dir);
  free(dir);
  free(a);
  free(b);
}

/* tree/lib/libx.so.1 (a fat binary) and tree/share/data.txt. */
static char* write_tree(const char* name, uint32_t seed) {
  char* tree = kt_in_tmp(name);
  char* lib = kt_tree_path(tree, "lib/libx.so.1");
  char* data = kt_tree_path(tree, "share/data.txt");
  write_library(lib, seed);
  kt_write_file(data, "data\n", 5);
  free(lib);
  free(data);
  return tree;
}

static kpack_split_options_t options_for(const char* out,
                                         api_messages* messages) {
  kpack_split_options_t o;
  kpack_split_options_init(&o, sizeof(o));
  o.output_dir = out;
  o.prefix = "x";
  o.threads = 1;
  o.message = collect;
  o.message_user = messages;
  return o;
}

/* A whole split of `tree` into `out`; its status. */
static kpack_error_t split_tree(const char* tree, const char* out,
                                api_messages* messages) {
  kpack_split_options_t o = options_for(out, messages);
  kpack_split_t* split = NULL;
  kpack_error_t err = kpack_split_plan(&o, &tree, 1, &split);
  if (err == KPACK_SUCCESS)
    err = kpack_split_execute(split);
  kpack_split_free(split);
  return err;
}

/* ---- the plan ------------------------------------------------------------ */

/* How many names directory `dir` holds. */
static size_t entries_in(const char* dir) {
  DIR* d = opendir(dir);
  assert_non_null(d);
  size_t n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* Planning writes nothing but the archive directory it locks (which a
 * split freed unexecuted removes, saying nothing): every file with its
 * destination and kind, every code object with its archive, every archive
 * with the keys it gets, as data. */
static void test_plan_is_data_and_writes_nothing(void** state) {
  (void)state;
  api_messages messages = {0};
  char* tree = write_tree("plan-in", 1);
  char* out = kt_in_tmp("plan-out");
  kpack_split_options_t o = options_for(out, &messages);
  kpack_split_t* split = NULL;
  const char* inputs[] = {tree};
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split), KPACK_SUCCESS);
  char* locked = kt_path(out, ".kpack");
  assert_int_equal(entries_in(out), 1);
  assert_int_equal(entries_in(locked), 0);
  free(locked);

  kpack_split_counts_t n;
  assert_int_equal(kpack_split_get_counts(split, &n), KPACK_SUCCESS);
  assert_int_equal(n.code_objects, 2);
  assert_int_equal(n.archives, 2);
  bool saw_lib = false, saw_data = false;
  for (size_t i = 0; i < n.files; i++) {
    kpack_split_file_t f;
    assert_int_equal(kpack_split_get_file(split, i, &f), KPACK_SUCCESS);
    if (strcmp(f.path, "lib/libx.so.1") == 0) {
      saw_lib = true;
      assert_int_equal(f.type, KPACK_SPLIT_FILE);
      assert_int_equal(f.kind, KPACK_TRANSFORM_FAT);
      char* dst = kt_path(out, "lib/libx.so.1");
      assert_string_equal(f.destination, dst);
      free(dst);
    } else if (strcmp(f.path, "share/data.txt") == 0) {
      saw_data = true;
      assert_int_equal(f.kind, KPACK_TRANSFORM_NOT_ELF);
    }
    assert_null(f.output_tree); /* not per-arch */
  }
  assert_true(saw_lib && saw_data);
  for (size_t i = 0; i < n.code_objects; i++) {
    kpack_split_code_object_t co;
    kpack_split_archive_t a;
    assert_int_equal(kpack_split_get_code_object(split, i, &co), KPACK_SUCCESS);
    assert_string_equal(co.key, "lib/libx.so.1#0");
    assert_int_equal(kpack_split_get_archive(split, co.archive, &a),
                     KPACK_SUCCESS);
    assert_string_equal(a.arch, co.arch);
    char name[128], *path;
    snprintf(name, sizeof(name), ".kpack/x_%s.kpack", co.arch);
    assert_string_equal(a.name, name);
    path = kt_path(out, name);
    assert_string_equal(a.path, path);
    free(path);
    assert_int_equal(a.keys_added, 1);
    assert_int_equal(a.keys_removed, 0);
    assert_false(a.existed);
    assert_false(a.deleted);
  }
  kpack_split_code_object_t past;
  assert_int_equal(kpack_split_get_code_object(split, n.code_objects, &past),
                   KPACK_ERROR_INVALID_ARGUMENT);
  kpack_split_free(split);
  assert_int_equal(access(out, F_OK), -1);
  assert_int_equal(messages.count, 0);
  free(out);
  free(tree);
}

/* A target that is no target is refused by the plan, as a bad option. */
static void test_plan_refuses_a_bad_target(void** state) {
  (void)state;
  api_messages messages = {0};
  char* tree = write_tree("badarch-in", 2);
  char* out = kt_in_tmp("badarch-out");
  kpack_split_options_t o = options_for(out, &messages);
  const char* arches[] = {"gfx90a:xnak-"};
  o.arches = arches;
  o.arch_count = 1;
  kpack_split_t* split = (kpack_split_t*)&messages; /* set to NULL */
  const char* inputs[] = {tree};
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(split);
  const kpack_message_t* m = first_of(&messages, KPACK_SEVERITY_USAGE);
  assert_int_equal(m->status, KPACK_ERROR_INVALID_ARGUMENT);
  kt_assert_contains(m->text, "--arch 'gfx90a:xnak-': not a GPU target");
  messages_free(&messages);
  free(out);
  free(tree);
}

/* In place, the plan makes the archive directory it locks: a split freed
 * without being executed removes it again, and the tree is as it was,
 * its root's times included. */
static void test_in_place_plan_freed_unexecuted_leaves_the_tree(void** state) {
  (void)state;
  api_messages messages = {0};
  char* tree = write_tree("unexecuted", 4);
  char* archives = kt_path(tree, ".kpack");
  char* before = kt_tree_state(tree, true);
  kpack_split_options_t o = options_for(NULL, &messages);
  o.in_place = true;
  kpack_split_t* split = NULL;
  const char* inputs[] = {tree};
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split), KPACK_SUCCESS);
  struct stat st;
  assert_int_equal(stat(archives, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  kpack_split_free(split);
  assert_int_not_equal(access(archives, F_OK), 0);
  char* after = kt_tree_state(tree, true);
  assert_string_equal(after, before);
  free(after);
  free(before);
  free(archives);
  free(tree);
  messages_free(&messages);
}

/* ---- execution and verification ------------------------------------------ */

/* Executed, the plan gives the result it promised, and every record loads
 * for every arch the split recorded. */
static void test_execute_then_verify_every_load(void** state) {
  (void)state;
  api_messages messages = {0};
  char* tree = write_tree("run-in", 3);
  char* out = kt_in_tmp("run-out");
  kpack_split_options_t o = options_for(out, &messages);
  kpack_split_t* split = NULL;
  const char* inputs[] = {tree};
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split), KPACK_SUCCESS);
  assert_int_equal(kpack_split_execute(split), KPACK_SUCCESS);
  assert_int_equal(kpack_split_execute(split), KPACK_ERROR_INVALID_ARGUMENT);
  kpack_split_result_t r;
  assert_int_equal(kpack_split_get_result(split, &r), KPACK_SUCCESS);
  assert_int_equal(r.transformed, 1);
  assert_int_equal(r.archives, 2);
  assert_int_equal(r.code_objects, 2);
  assert_int_equal(r.copied, 1);
  assert_int_equal(r.code_bytes, 5000);
  assert_int_equal(r.threads, 1);
  assert_true(r.host_after > 0 && r.stored_bytes > 0);
  kpack_split_free(split);
  assert_int_equal(messages.count, 0);

  kpack_verify_options_t vo;
  kpack_verify_summary_t sum;
  kpack_verify_options_init(&vo, sizeof(vo));
  assert_int_equal(
      kpack_verify_binaries(&vo, (const char* const*)&out, 1, &sum),
      KPACK_SUCCESS);
  assert_int_equal(sum.binaries, 1);
  assert_int_equal(sum.records, 1);
  assert_int_equal(sum.loads, 2);
  assert_int_equal(sum.failures, 0);
  free(out);
  free(tree);
}

/* What verify reports for one binary, kept past the callback. */
typedef struct api_verified {
  size_t binaries;
  kpack_verify_kind_t kind;
  size_t failed_loads;
  kpack_verify_reason_t reason;
  char agent[64], message[1024], looked_for[512];
} api_verified;

static bool keep_binary(const kpack_verify_binary_t* b, void* user) {
  api_verified* v = user;
  v->binaries++;
  v->kind = b->kind;
  for (size_t r = 0; r < b->record_count; r++)
    for (size_t l = 0; l < b->records[r].load_count; l++) {
      const kpack_verify_load_t* load = &b->records[r].loads[l];
      if (load->status == KPACK_SUCCESS)
        continue;
      v->failed_loads++;
      v->reason = load->reason;
      snprintf(v->agent, sizeof(v->agent), "%s", load->agent);
      snprintf(v->message, sizeof(v->message), "%s", load->message);
      if (load->path_count > 0)
        snprintf(v->looked_for, sizeof(v->looked_for), "%s", load->paths[0]);
    }
  return true;
}

/* An archive moved away: one record per (binary, record, agent) problem,
 * its kind, the path looked for, and the text the tool prints. */
static void test_verify_names_the_missing_archive(void** state) {
  (void)state;
  api_messages messages = {0};
  char* tree = write_tree("missing-in", 4);
  char* out = kt_in_tmp("missing-out");
  assert_int_equal(split_tree(tree, out, &messages), KPACK_SUCCESS);
  char* archive = kt_path(out, ".kpack/x_gfx1100.kpack");
  assert_int_equal(unlink(archive), 0);

  api_verified v = {0};
  kpack_verify_options_t vo;
  kpack_verify_summary_t sum;
  kpack_verify_options_init(&vo, sizeof(vo));
  vo.binary = keep_binary;
  vo.user = &v;
  char* lib = kt_path(out, "lib/libx.so.1");
  assert_int_equal(
      kpack_verify_binaries(&vo, (const char* const*)&lib, 1, &sum),
      KPACK_SUCCESS);
  assert_int_equal(sum.failures, 1);
  assert_int_equal(v.binaries, 1);
  assert_int_equal(v.kind, KPACK_VERIFY_KPACKIFIED);
  assert_int_equal(v.failed_loads, 1);
  assert_int_equal(v.reason, KPACK_VERIFY_NO_ARCHIVE);
  assert_string_equal(v.agent, "gfx1100");
  assert_string_equal(kpack_verify_reason_name(v.reason), "no-archive");
  char* real = realpath(out, NULL);
  char* expected = NULL;
  assert_true(asprintf(&expected, "%s/.kpack/x_gfx1100.kpack", real) > 0);
  assert_string_equal(v.looked_for, expected);
  kt_assert_contains(v.message, "no archive for this arch is installed");
  kt_assert_contains(v.message, expected);

  /* The input is a fat binary: reported, not checked. */
  char* fat = kt_path(tree, "lib/libx.so.1");
  v = (api_verified){0};
  assert_int_equal(
      kpack_verify_binaries(&vo, (const char* const*)&fat, 1, &sum),
      KPACK_SUCCESS);
  assert_int_equal(v.kind, KPACK_VERIFY_FAT);
  assert_int_equal(sum.skipped, 1);
  free(fat);
  free(expected);
  free(real);
  free(lib);
  free(archive);
  free(out);
  free(tree);
}

/* ---- cancellation and failures ------------------------------------------- */

typedef struct api_canceller {
  kpack_split_phase_t phase;
  size_t calls;
} api_canceller;

static bool cancel_in_phase(kpack_split_phase_t phase, size_t done,
                            size_t total, void* user) {
  api_canceller* c = user;
  (void)done;
  (void)total;
  c->calls++;
  return phase != c->phase;
}

/* A split over an earlier output that its progress callback cancels
 * while it packs: CANCELLED, says so, and the earlier output is as it
 * was, byte for byte, mode for mode, time for time (but for directories,
 * where temporary files came and went). */
static void test_progress_that_cancels_leaves_the_output_as_it_was(
    void** state) {
  (void)state;
  api_messages messages = {0};
  char* tree = write_tree("cancel-in", 5);
  char* out = kt_in_tmp("cancel-out");
  assert_int_equal(split_tree(tree, out, &messages), KPACK_SUCCESS);
  char* before = kt_tree_state(out, false);
  /* A new build of the library, split again over the first output. */
  char* lib = kt_path(tree, "lib/libx.so.1");
  write_library(lib, 6);

  api_canceller c = {KPACK_SPLIT_PACKING, 0};
  kpack_split_options_t o = options_for(out, &messages);
  o.progress = cancel_in_phase;
  o.progress_user = &c;
  kpack_split_t* split = NULL;
  const char* inputs[] = {tree};
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split), KPACK_SUCCESS);
  assert_int_equal(kpack_split_execute(split), KPACK_ERROR_CANCELLED);
  kpack_split_free(split);
  assert_true(c.calls > 0);
  const kpack_message_t* m = first_of(&messages, KPACK_SEVERITY_ERROR);
  assert_int_equal(m->status, KPACK_ERROR_CANCELLED);
  kt_assert_contains(m->text, "interrupted");
  char* after = kt_tree_state(out, false);
  assert_string_equal(after, before);

  /* Cancelled while reading its inputs, it does not get to write. */
  messages_free(&messages);
  c = (api_canceller){KPACK_SPLIT_READING, 0};
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split),
                   KPACK_ERROR_CANCELLED);
  assert_null(split);
  free(after);
  after = kt_tree_state(out, false);
  assert_string_equal(after, before);
  messages_free(&messages);
  free(after);
  free(before);
  free(lib);
  free(out);
  free(tree);
}

/* A failure names its file and carries the system's errno: an input that
 * is not there, an output that cannot be written (a file is in the way of
 * its directory). */
static void test_failure_messages_carry_file_and_errno(void** state) {
  (void)state;
  api_messages messages = {0};
  char* tree = write_tree("fail-in", 7);
  char* missing = kt_in_tmp("fail-missing");
  char* out = kt_in_tmp("fail-out");
  kpack_split_options_t o = options_for(out, &messages);
  kpack_split_t* split = NULL;
  const char* inputs[] = {missing};
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split),
                   KPACK_ERROR_FILE_NOT_FOUND);
  const kpack_message_t* m = first_of(&messages, KPACK_SEVERITY_ERROR);
  assert_string_equal(m->file, missing);
  assert_int_equal(m->sys_errno, ENOENT);
  assert_int_equal(m->status, KPACK_ERROR_FILE_NOT_FOUND);
  messages_free(&messages);

  /* OUT/lib is a file: the transformed binary has nowhere to go. */
  char* blocker = kt_tree_path(out, "lib");
  kt_write_file(blocker, "x", 1);
  inputs[0] = tree;
  assert_int_equal(kpack_split_plan(&o, inputs, 1, &split), KPACK_SUCCESS);
  assert_int_equal(kpack_split_execute(split), KPACK_ERROR_IO_ERROR);
  kpack_split_free(split);
  m = first_of(&messages, KPACK_SEVERITY_ERROR);
  char* temp = kt_path(out, "lib/.kpack-split.libx.so.1.tmp");
  assert_string_equal(m->file, temp);
  assert_int_equal(m->sys_errno, ENOTDIR);
  assert_int_equal(m->status, KPACK_ERROR_IO_ERROR);
  char* expected = NULL;
  assert_true(asprintf(&expected, "%s: cannot create: %s", temp,
                       strerror(ENOTDIR)) > 0);
  assert_string_equal(m->text, expected);
  messages_free(&messages);
  free(expected);
  free(temp);
  free(blocker);
  free(out);
  free(missing);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_is_data_and_writes_nothing),
      cmocka_unit_test(test_plan_refuses_a_bad_target),
      cmocka_unit_test(test_in_place_plan_freed_unexecuted_leaves_the_tree),
      cmocka_unit_test(test_execute_then_verify_every_load),
      cmocka_unit_test(test_verify_names_the_missing_archive),
      cmocka_unit_test(test_progress_that_cancels_leaves_the_output_as_it_was),
      cmocka_unit_test(test_failure_messages_carry_file_and_errno),
  };
  return cmocka_run_group_tests(tests, kt_tmp_setup, kt_tmp_teardown);
}
