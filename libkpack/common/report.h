/* SPDX-License-Identifier: MIT
 *
 * Where the messages of a long library call go (kpack_message.h): each is
 * formatted here and handed to the caller's callback, and the status of
 * the first error is kept, which is what the call returns. One kp_report
 * per call, owned by it; the callback is the caller's.
 */
#ifndef KPACK_REPORT_H
#define KPACK_REPORT_H

#include <stdarg.h>
#include <stdbool.h>

#include "rocm_kpack/kpack_message.h"

typedef struct kp_report {
  kpack_message_fn fn; /* NULL: messages are dropped */
  void* user;
  /* The first error's status; KPACK_SUCCESS until one. */
  kpack_error_t status;
} kp_report;

/* One message: `fmt` and what follows it make its text. An ERROR or USAGE
 * message sets r->status when it is the first. errno is kept. */
void kp_say(kp_report* r, kpack_severity_t severity, const char* file,
            kpack_error_t status, int sys_errno, const char* fmt, ...)
    __attribute__((format(printf, 6, 7)));

void kp_vsay(kp_report* r, kpack_severity_t severity, const char* file,
             kpack_error_t status, int sys_errno, const char* fmt, va_list ap);

/* An ERROR message. */
#define kp_error(r, file, status, sys_errno, ...) \
  kp_say((r), KPACK_SEVERITY_ERROR, (file), (status), (sys_errno), __VA_ARGS__)

/* "out of memory", an ERROR of status OUT_OF_MEMORY. */
void kp_out_of_memory(kp_report* r);

/* "SUBJECT: KPACK_ERROR_X (what it means)", an ERROR about the file
 * `subject`. */
void kp_status_error(kp_report* r, const char* subject, kpack_error_t err);

/* The reason to give for a failed read: the system's (strerror) when
 * `err` is IO_ERROR and `sys_errno`, taken right after the call, is set;
 * else kpack_error_text(err). */
const char* kp_read_reason(kpack_error_t err, int sys_errno);

#endif /* KPACK_REPORT_H */
