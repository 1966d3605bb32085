/* SPDX-License-Identifier: MIT
 *
 * A producer run's messages, cancellation and test hooks (see report.h).
 */
#include "producer/report.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void pr_init(pr_run* r, kpack_message_fn fn, void* user,
             const volatile int* cancel) {
  const char* kill_after = getenv("KPACK_SPLIT_KILL_AFTER");
  const char* stop_after = getenv("KPACK_SPLIT_STOP_AFTER");
  const char* fail_after = getenv("KPACK_SPLIT_FAIL_AFTER");
  *r = (pr_run){.report = {fn, user, KPACK_SUCCESS}, .cancel = cancel};
  if (kill_after != NULL && *kill_after != '\0')
    r->kill_after = strtol(kill_after, NULL, 10);
  if (stop_after != NULL && *stop_after != '\0')
    r->stop_after = strtol(stop_after, NULL, 10);
  if (fail_after != NULL && *fail_after != '\0')
    r->fail_after = strtol(fail_after, NULL, 10);
}

bool pr_cancelled(pr_run* r) {
  if (!r->cancelled && r->cancel != NULL && *r->cancel != 0)
    r->cancelled = true;
  return r->cancelled;
}

void pr_cancel(pr_run* r) {
  r->cancelled = true;
}

kpack_error_t pr_status(const pr_run* r, kpack_error_t fallback) {
  if (r->cancelled)
    return KPACK_ERROR_CANCELLED;
  if (r->bad_options)
    return KPACK_ERROR_INVALID_ARGUMENT;
  if (r->report.status == KPACK_ERROR_INVALID_ARGUMENT)
    return KPACK_ERROR_INVALID_FORMAT;
  return r->report.status != KPACK_SUCCESS ? r->report.status : fallback;
}

void pr_bad_options(pr_run* r, bool usage, const char* file, const char* fmt,
                    ...) {
  va_list ap;
  va_start(ap, fmt);
  r->bad_options = true;
  kp_vsay(&r->report, usage ? KPACK_SEVERITY_USAGE : KPACK_SEVERITY_ERROR, file,
          KPACK_ERROR_INVALID_ARGUMENT, 0, fmt, ap);
  va_end(ap);
}

void pr_step(pr_run* r) {
  ++r->steps;
  if (r->kill_after > 0 && r->steps == (unsigned long)r->kill_after)
    raise(SIGKILL);
  if (r->stop_after > 0 && r->steps == (unsigned long)r->stop_after)
    raise(SIGSTOP);
}

bool pr_fault(pr_run* r, const char* path) {
  if (r->fail_after <= 0 || ++r->writes != (unsigned long)r->fail_after)
    return false;
  pr_output_error(r, path, KPACK_ERROR_IO_ERROR, EIO);
  errno = EIO;
  return true;
}

void pr_input_error(pr_run* r, const char* path, kpack_error_t err,
                    int sys_errno) {
  struct stat st;
  char why[512] = "";
  const char* reason = kpack_error_text(err);
  /* Which structure, where, the file's size: as the host reader says. */
  if ((err == KPACK_ERROR_INVALID_FORMAT ||
       err == KPACK_ERROR_MSGPACK_PARSE_FAILED ||
       err == KPACK_ERROR_UNSUPPORTED_VERSION) &&
      kpack_archive_diagnose(path, why, sizeof(why)) == err && why[0] != '\0')
    reason = why;
  else if (err == KPACK_ERROR_IO_ERROR && sys_errno != 0)
    /* The library gives EISDIR for any file that is not a regular one. */
    reason = sys_errno == EISDIR && stat(path, &st) == 0 &&
                     !S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)
                 ? "not a regular file"
                 : strerror(sys_errno);
  kp_error(&r->report, path, err, sys_errno, "%s: %s (%s)", path,
           kpack_error_string(err), reason);
}

void pr_output_error(pr_run* r, const char* path, kpack_error_t err,
                     int sys_errno) {
  if (sys_errno != 0)
    kp_error(&r->report, path, err, sys_errno, "%s: cannot write: %s", path,
             strerror(sys_errno));
  else
    kp_error(&r->report, path, err, 0, "%s: cannot write: %s (%s)", path,
             kpack_error_string(err), kpack_error_text(err));
}

bool pr_is_write_errno(int sys_errno) {
  return sys_errno == ENOSPC || sys_errno == EDQUOT || sys_errno == EROFS ||
         sys_errno == EFBIG;
}

void pr_writer_error(pr_run* r, const kpack_writer_t* writer, kpack_error_t err,
                     const char* out, const char* source, const char* binary,
                     const char* arch) {
  kpack_writer_failure_t why;
  kpack_writer_get_failure(writer, &why);
  if (why.side == KPACK_WRITER_SIDE_ARCHIVE)
    pr_output_error(r, out, err, why.sys_errno);
  else if (why.side == KPACK_WRITER_SIDE_SOURCE && source != NULL)
    kp_error(
        &r->report, source, err, why.sys_errno, "%s: %s for %s: %s (%s)",
        source, binary, arch, kpack_error_string(err),
        why.sys_errno != 0 ? strerror(why.sys_errno) : kpack_error_text(err));
  else
    kp_error(&r->report, NULL, err, 0, "%s for %s: %s (%s)", binary, arch,
             kpack_error_string(err), kpack_error_text(err));
}

void pr_host_error(pr_run* r, const char* path, kpack_error_t err) {
  char why[256];
  if (err == KPACK_ERROR_INVALID_FORMAT &&
      kpack_host_diagnose(path, why, sizeof(why)) == err && why[0] != '\0')
    kp_error(&r->report, path, err, 0, "%s: %s (%s)", path,
             kpack_error_string(err), why);
  else
    kp_status_error(&r->report, path, err);
}

void pr_transform_error(pr_run* r, const char* path, kpack_error_t err,
                        const kpack_transform_message_t* msg) {
  size_t n = strlen(path);
  if (msg->text[0] == '\0')
    kp_status_error(&r->report, path, err);
  else if (strncmp(msg->text, path, n) == 0 && msg->text[n] == ':')
    kp_error(&r->report, path, err, 0, "%s (%s)", msg->text,
             kpack_error_string(err));
  else
    kp_error(&r->report, path, err, 0, "%s: %s (%s)", path, msg->text,
             kpack_error_string(err));
}
