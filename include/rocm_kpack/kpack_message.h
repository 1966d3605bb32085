/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the messages of the library's long calls (splitting
 * a tree, checking split binaries, streaming a fat binary's code objects).
 * Such a call says what it does and why it fails through a callback of
 * the caller's, one message at a time, instead of printing: the kpack
 * tool prints each as a line, a binding can raise the last error and log
 * the rest. Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_MESSAGE_H
#define ROCM_KPACK_MESSAGE_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kpack_severity {
  /* The call fails; `status` is what it returns (the first error's). */
  KPACK_SEVERITY_ERROR = 0,
  /* An option or input cannot be used as given: the call fails with
   * INVALID_ARGUMENT. The kpack tool shows it as a bad command line. */
  KPACK_SEVERITY_USAGE = 1,
  /* Something worth a look; the call goes on. */
  KPACK_SEVERITY_WARNING = 2,
  /* Information: what a verbose call reports, what was done about what an
   * interrupted run left. */
  KPACK_SEVERITY_NOTE = 3,
} kpack_severity_t;

typedef struct kpack_message {
  kpack_severity_t severity;
  /* ERROR and USAGE: the status the failure gives; KPACK_SUCCESS for
   * warnings and notes. */
  kpack_error_t status;
  /* The file the message is about (the output being written, the input
   * being read), or NULL. */
  const char* file;
  /* The system's reason (ENOSPC, EACCES...), or 0. */
  int sys_errno;
  /* The message as one line without its newline, naming the file and the
   * reason, e.g. "out/.kpack/x_gfx90a.kpack: cannot write: No space left
   * on device": what the kpack tool prints after "kpack: " (after
   * "kpack: warning: " for a warning). */
  const char* text;
} kpack_message_t;

/* Receives each message; the message and its strings are valid during the
 * call only. Called on the thread that made the library call. */
typedef void (*kpack_message_fn)(const kpack_message_t* message, void* user);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_MESSAGE_H */
