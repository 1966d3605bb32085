/* SPDX-License-Identifier: MIT
 *
 * One run of the producer (a split, a verify of split binaries): where its
 * messages go, whether its caller has cancelled it, and its test hooks.
 * The message helpers word a failure as every kpack command does: the
 * file first, then the system's reason or the kpack status and its
 * meaning. Each run owns its pr_run; nothing here is shared between runs.
 */
#ifndef KPACK_PRODUCER_REPORT_H
#define KPACK_PRODUCER_REPORT_H

#include <stdbool.h>

#include "common/report.h"
#include "rocm_kpack/kpack_ext.h"

typedef struct pr_run {
  kp_report report;
  const volatile int* cancel; /* the caller's flag, or NULL */
  bool cancelled;             /* seen, or asked by a callback */
  bool bad_options;           /* the caller's options are at fault */
  /* Test hooks (docs/split.md): KPACK_SPLIT_KILL_AFTER=N kills the
   * process with SIGKILL at the N-th step of a run, and
   * KPACK_SPLIT_STOP_AFTER=N stops it there (SIGSTOP) until SIGCONT;
   * KPACK_SPLIT_FAIL_AFTER=N makes its N-th write fail (pr_fault()). */
  unsigned long steps, writes;
  long kill_after, stop_after, fail_after;
} pr_run;

/* A run reporting to `fn` (NULL: nowhere), cancelled once *cancel is
 * non-zero (cancel may be NULL); reads the test hooks from the
 * environment. */
void pr_init(pr_run* r, kpack_message_fn fn, void* user,
             const volatile int* cancel);

/* Whether the run is to stop: the caller's flag is set, or it was
 * cancelled before. The first time, the run's status becomes CANCELLED. */
bool pr_cancelled(pr_run* r);
/* Cancels the run (a callback of the caller's said to stop). */
void pr_cancel(pr_run* r);
/* What the run returns: CANCELLED; INVALID_ARGUMENT when the caller's
 * options are at fault (pr_bad_options()); else the first error's status
 * (INVALID_FORMAT for an INVALID_ARGUMENT of a call the run made on an
 * input: that input cannot be split so), or `fallback` when there was
 * none (a failure not reported). */
kpack_error_t pr_status(const pr_run* r, kpack_error_t fallback);

/* A failure of the caller's options, of status INVALID_ARGUMENT: a USAGE
 * message, or (when `usage` is false, for what is said as an error) an
 * ERROR one. */
void pr_bad_options(pr_run* r, bool usage, const char* file, const char* fmt,
                    ...) __attribute__((format(printf, 4, 5)));

/* A step of a long run that can be interrupted safely: the test hook
 * KPACK_SPLIT_KILL_AFTER=N makes the N-th step (counted over the whole
 * run) kill the process with SIGKILL, to show that no kill point leaves a
 * file half written. */
void pr_step(pr_run* r);

/* A write of the output `path` about to be made: true when the test hook
 * KPACK_SPLIT_FAIL_AFTER=N makes it fail (the N-th of the run), reported
 * as a write failure with errno EIO, so that a test can fail every write
 * of a run in turn and see what each failure leaves. */
bool pr_fault(pr_run* r, const char* path);

/* A failure to open or read the input `path`: "PATH: KPACK_ERROR_X
 * (REASON)", REASON the system's (strerror(sys_errno)) or, for an archive
 * that does not parse, which structure fails where
 * (kpack_archive_diagnose()), else the status's meaning. */
void pr_input_error(pr_run* r, const char* path, kpack_error_t err,
                    int sys_errno);
/* A failure to write the output `path`: "PATH: cannot write: REASON", the
 * system's reason when there is one, else the status and its meaning. */
void pr_output_error(pr_run* r, const char* path, kpack_error_t err,
                     int sys_errno);
/* True for an errno only writing gives (a full disk or quota, a read-only
 * filesystem, a file too large): no read of an input fails so. */
bool pr_is_write_errno(int sys_errno);
/* A failed kpack_writer_add_kernel() or kpack_writer_copy_kernel() for the
 * kernel (binary, arch), blaming the file kpack_writer_get_failure() names:
 * the archive `out` being written, the archive `source` being copied from,
 * or none (a refused name). */
void pr_writer_error(pr_run* r, const kpack_writer_t* writer, kpack_error_t err,
                     const char* out, const char* source, const char* binary,
                     const char* arch);
/* A host binary that failed to open: for a malformed one, what is wrong
 * and where (kpack_host_diagnose()). */
void pr_host_error(pr_run* r, const char* path, kpack_error_t err);
/* A refusal of the transform, naming the file once. */
void pr_transform_error(pr_run* r, const char* path, kpack_error_t err,
                        const kpack_transform_message_t* msg);

#endif /* KPACK_PRODUCER_REPORT_H */
