/* SPDX-License-Identifier: MIT
 *
 * Messages of the library's long calls, formatted and handed over (see
 * report.h).
 */
#include "common/report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rocm_kpack/kpack_ext.h"

void kp_say(kp_report* r, kpack_severity_t severity, const char* file,
            kpack_error_t status, int sys_errno, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kp_vsay(r, severity, file, status, sys_errno, fmt, ap);
  va_end(ap);
}

void kp_vsay(kp_report* r, kpack_severity_t severity, const char* file,
             kpack_error_t status, int sys_errno, const char* fmt, va_list ap) {
  int saved = errno;
  char* text = NULL;
  bool failure =
      severity == KPACK_SEVERITY_ERROR || severity == KPACK_SEVERITY_USAGE;
  if (failure && r->status == KPACK_SUCCESS)
    r->status = status != KPACK_SUCCESS ? status : KPACK_ERROR_IO_ERROR;
  if (r->fn != NULL) {
    if (vasprintf(&text, fmt, ap) < 0)
      text = NULL;
    kpack_message_t m = {.severity = severity,
                         .status = status,
                         .file = file,
                         .sys_errno = sys_errno,
                         .text = text != NULL ? text : "out of memory"};
    r->fn(&m, r->user);
    free(text);
  }
  errno = saved;
}

void kp_out_of_memory(kp_report* r) {
  kp_error(r, NULL, KPACK_ERROR_OUT_OF_MEMORY, ENOMEM, "out of memory");
}

void kp_status_error(kp_report* r, const char* subject, kpack_error_t err) {
  kp_error(r, subject, err, 0, "%s: %s (%s)", subject, kpack_error_string(err),
           kpack_error_text(err));
}

const char* kp_read_reason(kpack_error_t err, int sys_errno) {
  if (err == KPACK_ERROR_IO_ERROR && sys_errno != 0)
    return strerror(sys_errno);
  return kpack_error_text(err);
}
