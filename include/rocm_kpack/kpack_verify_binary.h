/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: checking split binaries. For every HIPK record of a
 * kpack-ified binary and every agent, the loader's own search
 * (kpack_resolve_code_object(), as kpack_load_code_object() runs it, with
 * ROCM_KPACK_PATH, ROCM_KPACK_PATH_PREFIX and ROCM_KPACK_DISABLE) must
 * return the record's code object: what `kpack verify --binary` checks,
 * and what a packager runs on a split install. Each failed load says why
 * in the words a user with a broken install needs (docs/split.md, "kpack
 * verify --binary"). Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_VERIFY_BINARY_H
#define ROCM_KPACK_VERIFY_BINARY_H

#include "kpack.h"
#include "kpack_message.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a binary is. */
typedef enum kpack_verify_kind {
  KPACK_VERIFY_KPACKIFIED = 0, /* HIPK records: checked */
  KPACK_VERIFY_FAT = 1,        /* device code inside: not split */
  KPACK_VERIFY_NONE = 2,       /* no HIP device code */
  KPACK_VERIFY_UNREADABLE = 3, /* does not open (status says why) */
} kpack_verify_kind_t;

/* Why a load failed. */
typedef enum kpack_verify_reason {
  KPACK_VERIFY_OK = 0,
  KPACK_VERIFY_NO_ARCHIVE = 1,         /* no archive at any path tried */
  KPACK_VERIFY_ARCHIVE_UNREADABLE = 2, /* an archive is there, does not open */
  KPACK_VERIFY_NOT_DECLARED = 3,       /* archives opened; none declares a
                                          target the agent accepts */
  KPACK_VERIFY_KERNEL_MISSING = 4,     /* declared, but without the kernel */
  KPACK_VERIFY_KERNEL_UNREADABLE = 5,  /* the kernel is there, does not read */
  KPACK_VERIFY_ERROR = 6,              /* anything else (out of memory...) */
} kpack_verify_reason_t;

/* "ok", "no-archive", "archive-unreadable", "not-declared",
 * "kernel-missing", "kernel-unreadable", "error"; never NULL ("error" for
 * an unknown value). */
KPACK_API const char* kpack_verify_reason_name(kpack_verify_reason_t reason);

/* Which agents a record was checked for. */
typedef enum kpack_verify_source {
  KPACK_VERIFY_AGENTS = 0,   /* those of the options */
  KPACK_VERIFY_RECORDED = 1, /* the arches the split recorded (kpack_arches) */
  KPACK_VERIFY_ARCHIVES = 2, /* those the archives found declare (a binary
                                kpack-ified without kpack_arches) */
} kpack_verify_source_t;

/* One load: a record, for one agent. */
typedef struct kpack_verify_load {
  const char* agent;
  kpack_error_t status; /* the loader's */
  kpack_verify_reason_t reason;
  /* Why, e.g. "no archive for this arch is installed (looked for
   * /x/.kpack/a_gfx90a.kpack)"; NULL on success. */
  const char* message;
  /* The archive that served the code object, or the one the failure
   * concerns; NULL when none. */
  const char* archive;
  uint64_t size; /* bytes of the code object, on success */
  /* The paths the failure involves: those looked for (NO_ARCHIVE), the
   * archives found (NOT_DECLARED), the archive (ARCHIVE_UNREADABLE,
   * KERNEL_MISSING, KERNEL_UNREADABLE). */
  const char* const* paths;
  size_t path_count;
} kpack_verify_load_t;

/* One HIPK record of a binary. */
typedef struct kpack_verify_record {
  size_t index;
  const char* kernel; /* its kernel_name; NULL when the record is unusable */
  uint64_t co_index;  /* its code object index (the reserved field) */
  kpack_verify_source_t checked;
  /* Why the record could not be checked (bad metadata, no archive found
   * through its search paths...), as a line after "BINARY: "; NULL when
   * it was. */
  const char* problem;
  const kpack_verify_load_t* loads;
  size_t load_count;
} kpack_verify_record_t;

/* One binary and what was found. */
typedef struct kpack_verify_binary {
  const char* path;
  kpack_verify_kind_t kind;
  kpack_error_t status; /* UNREADABLE: why it does not open */
  /* A binary that could not be checked (UNREADABLE), as a line after
   * "BINARY: "; NULL otherwise. */
  const char* problem;
  /* The arches the split recorded, when it did. */
  const char* const* recorded_arches;
  size_t recorded_arch_count;
  const kpack_verify_record_t* records;
  size_t record_count;
  size_t loads;    /* loads checked */
  size_t failures; /* failed loads, and records and binary not checked */
  kpack_verify_source_t checked; /* the agents of its last checked record */
} kpack_verify_binary_t;

/* Each binary checked (or skipped: FAT and NONE named as an input); all of
 * it valid during the call only. Return false to stop (CANCELLED). */
typedef bool (*kpack_verify_binary_fn)(const kpack_verify_binary_t* binary,
                                       void* user);

/* After each file looked at (a binary, or a file a directory walk passes
 * over): the binaries and loads so far. Return false to stop. */
typedef bool (*kpack_verify_progress_fn)(size_t binaries, size_t loads,
                                         const char* path, void* user);

/* A directory input walked: how many kpack-ified binaries were below it.
 * None is a failure (counted in the summary): a tree never split, or the
 * wrong directory, checks nothing. */
typedef void (*kpack_verify_directory_fn)(const char* path, size_t binaries,
                                          void* user);

typedef struct kpack_verify_options {
  /* sizeof(kpack_verify_options_t) as the caller was built, set by
   * kpack_verify_options_init(). */
  size_t size;
  /* Agents to check each record for, as the HIP runtime names a device
   * (gfx90a:sramecc+:xnack-, amdgcn-amd-amdhsa--gfx1151), each passing
   * kpack_target_check(); none: the arches the split recorded, else those
   * of the archives found. */
  const char* const* agents;
  size_t agent_count;
  kpack_verify_binary_fn binary; /* NULL: results are counted only */
  kpack_verify_progress_fn progress;
  kpack_verify_directory_fn directory;
  void* user;               /* for the three */
  kpack_message_fn message; /* failures to walk a directory; NULL: none */
  void* message_user;
  /* When not NULL, the check stops at its next record once *cancel is not
   * zero. */
  const volatile int* cancel;
} kpack_verify_options_t;

/* Sets *options to the defaults (everything 0 or NULL) and options->size to
 * `size`, sizeof(kpack_verify_options_t) as the caller sees it; at most
 * `size` bytes are written. NULL is a no-op. */
KPACK_API void kpack_verify_options_init(kpack_verify_options_t* options,
                                         size_t size);

/* Totals of a check. */
typedef struct kpack_verify_summary {
  size_t binaries; /* binaries reported (checked, skipped or unreadable) */
  size_t skipped;  /* inputs that are not kpack-ified (FAT, NONE) */
  size_t records;
  size_t loads;
  /* failed loads, records and binaries not checked, directories holding
   * no kpack-ified binary */
  size_t failures;
} kpack_verify_summary_t;

/* Checks the `count` paths of `paths`: each a binary (reported whatever it
 * is) or a directory, walked in byte order of the paths without following
 * symbolic links, whose kpack-ified binaries are checked (other files, and
 * those it cannot read, are passed over). Each binary goes to
 * options->binary as it is done; *summary (when not NULL) gets the totals,
 * also when the call fails. A check that ran returns SUCCESS whatever it
 * found: failures are in the results.
 *   INVALID_ARGUMENT  a pointer is NULL, or an agent is no target (a USAGE
 *                     message says which)
 *   IO_ERROR          a directory cannot be walked (a message names it;
 *                     the other inputs are checked, and the failure
 *                     counts in summary->failures)
 *   CANCELLED         a callback or the cancel flag said to stop
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_verify_binaries(
    const kpack_verify_options_t* options, const char* const* paths,
    size_t count, kpack_verify_summary_t* summary);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_VERIFY_BINARY_H */
