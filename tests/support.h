/* SPDX-License-Identifier: MIT
 *
 * Helpers shared by the cmocka suites: temporary directories, deterministic
 * kernel bytes and archives written by libkpack's own writer. Every helper
 * fails the running test (cmocka assert) instead of returning an error.
 */
#ifndef KPACK_TESTS_SUPPORT_H
#define KPACK_TESTS_SUPPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <sys/types.h>
#include <cmocka.h>

#include "rocm_kpack/kpack_ext.h"

typedef struct kt_kernel {
  const char* binary;
  const char* arch;
  const void* data;
  size_t size;
} kt_kernel;

/* A fresh directory under $TMPDIR (or /tmp); free() the result. */
char* kt_tmpdir(void);
/* Group setup/teardown for suites that need one scratch directory: kt_tmp
 * is created before the first test and removed after the last. */
extern char* kt_tmp;
int kt_tmp_setup(void** state);
int kt_tmp_teardown(void** state);
/* rm -rf; tolerates a missing path. */
void kt_rmtree(const char* path);
/* dir + "/" + name; free() the result. */
char* kt_path(const char* dir, const char* name);
/* kt_path(kt_tmp, name). */
char* kt_in_tmp(const char* name);
/* mkdir -p. */
void kt_mkdirs(const char* path);
/* tree + "/" + rel, with the directories it names made; free() the
 * result. */
char* kt_tree_path(const char* tree, const char* rel);
/* cp -p of one file's bytes and permission bits. */
void kt_copy_file(const char* from, const char* to);
/* `size` deterministic bytes for `seed`: compressible but not trivially
 * (fx_fill_pattern of fixture_fatbin.h). */
void* kt_pattern(size_t size, uint32_t seed);
/* Whole-file read and write; kt_read_file returns NULL if it cannot, and
 * ends the bytes with a NUL it does not count, so text reads as a string. */
void* kt_read_file(const char* path, size_t* size);
void kt_write_file(const char* path, const void* data, size_t size);
/* Both files can be read and hold the same bytes. */
bool kt_same_file(const char* a, const char* b);
/* Writes an archive with the project's writer; arches may be NULL. */
void kt_write_archive(const char* path, kpack_compression_scheme_t scheme,
                      const char* const* arches, size_t arch_count,
                      const kt_kernel* kernels, size_t kernel_count);

/* The path of Debian's librocrand.so.1.1, fetched and unpacked under .cache/
 * by `contrib/demo.sh fetch` (KPACK_SOURCE_DIR, set by the Makefile, names
 * the tree). Fails the test when it cannot be had: suites over real code
 * objects must not pass without them. free() the result. */
char* kt_librocrand(void);

/* ---- processes and mounts (the real-mount suites) ---- */

/* fork + exec with stdout/stderr appended to `log` (or /dev/null). The child
 * gets SIGTERM if the forking thread dies, even by a sanitizer abort that
 * skips every cleanup: a daemon then unmounts itself. */
pid_t kt_spawn(char* const argv[], const char* log);
/* The wait status of pid, or -1 if it still runs after `seconds`. */
int kt_wait(pid_t pid, double seconds);
void kt_sleep_ms(long ms);
/* dir is on another device than its parent. */
bool kt_is_mountpoint(const char* dir);
/* fusermount3 -u [-z] dir; its exit code, or -1. */
int kt_fusermount(const char* dir, bool lazy, double seconds);

/* Runs argv[0] (searched in PATH) with stdin from /dev/null and returns
 * its exit status; a crash or a hang of more than `seconds` fails the test.
 * Its stdout and stderr, NUL-terminated, go to *out and *err when those
 * are not NULL (free() them). */
int kt_run(char* const argv[], double seconds, char** out, char** err);

/* kt_run() as a user whom file modes bind: as root, without the
 * capabilities that let root read or search any file. -1 when they cannot
 * be given up (the caller says what it could not check). */
int kt_run_as_user(char* const argv[], double seconds, char** out, char** err);

/* Where the programs under test are: $KPACK_TEST_BIN (the Makefile exports
 * it), build/bin when it is unset or empty. kt_program() is NAME there,
 * malloc'ed. */
const char* kt_bin_dir(void);
char* kt_program(const char* name);

/* kt_run() of `program` with the NULL-terminated arguments after it (at
 * most 62). */
int kt_run_args(const char* program, const char* const* args, double seconds,
                char** out, char** err);

/* Group setup/teardown for suites that run the kpack tool: kt_kpack is its
 * path, kt_tmp a scratch directory (kt_tmp_setup()). */
extern char* kt_kpack;
int kt_kpack_setup(void** state);
int kt_kpack_teardown(void** state);
/* Runs kt_kpack with the arguments, for 300 s at most: its exit status,
 * and its stdout and stderr when out / err are not NULL. */
#define KT_KPACK(out, err, ...) \
  kt_run_args(kt_kpack, (const char* const[]){__VA_ARGS__, NULL}, 300, out, err)

/* Runs kt_kpack with `args` (NULL-terminated) with the test hook `hook`
 * (KPACK_SPLIT_FAIL_AFTER, KPACK_EXTRACT_FAIL_AFTER) failing its first
 * write, then its second, and so on until a run succeeds. Each failed run
 * must exit 1 with the system's reason for EIO and leave `watched` as it
 * was (kt_tree_state(), directory times included). Returns how many runs
 * failed. */
unsigned kt_fail_each_write(const char* hook, const char* watched,
                            const char* const* args);

/* Starts kt_kpack with `args` (NULL-terminated) and, when `step` is not 0,
 * the test hook `hook` (KPACK_SPLIT_KILL_AFTER, KPACK_EXTRACT_KILL_AFTER,
 * or a STOP_AFTER hook) set to it, stdout and stderr to /dev/null: its
 * pid. kt_run_killed() waits for it to end: its wait status. */
pid_t kt_start_hooked(const char* hook, unsigned step, const char* const* args);
int kt_run_killed(const char* hook, unsigned step, const char* const* args);
/* kt_start_hooked() with a hook that stops the run (KPACK_SPLIT_STOP_AFTER,
 * KPACK_EXTRACT_STOP_AFTER): returns once it has stopped. Then
 * kt_resume_stopped() lets it go on and returns its exit status once it
 * has ended. */
pid_t kt_start_stopped(const char* hook, unsigned step,
                       const char* const* args);
int kt_resume_stopped(pid_t pid);
/* Starts kt_kpack with `args` (NULL-terminated), stdout to /dev/null and
 * stderr to a pipe, whose read end goes to *err (close it): its pid.
 * kt_read_until() reads such a pipe until `needle` has come (true) or the
 * program closed it (false), what it read in *text (free it);
 * kt_wait_exit() waits for a program to end: its exit status. */
pid_t kt_start_piped(const char* const* args, int* err);
bool kt_read_until(int fd, const char* needle, char** text);
int kt_wait_exit(pid_t pid);

/* dlopen()s `path` in a child process, as a program linking it would, and
 * looks up `symbol` there: true when both work. What the object's
 * constructors do (e.g. the HIP runtime registering librocrand's records)
 * stays in the child, leaks included. */
bool kt_loads_in_child(const char* path, const char* symbol);

/* ELF files under the binary utilities: kt_check_readelf() fails the test
 * when `readelf -a -W` prints a warning or anything on stderr;
 * kt_elflint() is `eu-elflint --gnu-ld` output with the file name taken
 * out of each line, to compare two files' findings (free() it). */
void kt_check_readelf(const char* path);
char* kt_elflint(const char* path);

/* Fails the test unless `needle` occurs in `text`, showing the text. */
void kt_assert_contains(const char* text, const char* needle);
/* Fails unless `diff -r` finds the trees identical (symbolic links
 * compared as links). */
void kt_assert_same_tree(const char* a, const char* b);
/* Everything about the tree below `dir` that a run must not change, as
 * text to compare: one line per path (names sorted), with its mode, its
 * mtime to the nanosecond (directories' too with `dir_times`), and a
 * regular file's size and FNV-1a of its bytes, a symbolic link's target,
 * or for another name of a hard-linked file the first one's path. The
 * root's own entry is not in it. free() the result. */
char* kt_tree_state(const char* dir, bool dir_times);

/* FNV-1a, for checksumming kernels read through a mount. */
#define KT_FNV_START 1469598103934665603ull
uint64_t kt_fnv1a(const void* data, size_t size, uint64_t hash);

#endif /* KPACK_TESTS_SUPPORT_H */
