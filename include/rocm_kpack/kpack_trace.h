/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the loader's search, step by step. kpack resolve and
 * ROCM_KPACK_DEBUG are built on these events.
 */
#ifndef ROCM_KPACK_TRACE_H
#define ROCM_KPACK_TRACE_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Loader search introspection ----------------------------------------- */

/* The loader reports each step of its search as an event, in order, to the
 * trace hook of the cache (and, with ROCM_KPACK_DEBUG, as a "kpack: " line
 * on stderr). `kpack resolve` uses this to explain a failed load. */
typedef enum kpack_trace_kind {
  KPACK_TRACE_LOAD,    /* a search starts: kernel, path = binary path */
  KPACK_TRACE_PATH,    /* a candidate path: path, source, exists,
                          is_directory (a directory's *.kpack follow) */
  KPACK_TRACE_ARCHIVE, /* an existing candidate: path (canonical), status of
                          its open and error_number; arches on success;
                          opened if this call opened it rather than finding
                          it in the cache. A failure is remembered and not
                          tried again, unless transient (see below) */
  KPACK_TRACE_TARGET,  /* a compatible target is searched: arch, target */
  KPACK_TRACE_KERNEL,  /* an archive declaring `target` was tried: path,
                          arch, target, kernel; status SUCCESS (hit),
                          KERNEL_NOT_FOUND (miss) or the read error */
  KPACK_TRACE_RESULT,  /* the call returns `status`; on success also path,
                          arch, target and size of the code object */
} kpack_trace_kind_t;

/* One event. Fields a kind does not use are NULL, 0 or false. Every pointer
 * is valid only during the callback. */
typedef struct kpack_trace_event {
  kpack_trace_kind_t kind;
  kpack_error_t status;
  const char* kernel; /* "kernel_name#co_index"; NULL before it is known */
  const char* path;
  const char* source; /* PATH: "ROCM_KPACK_PATH", "ROCM_KPACK_PATH_PREFIX"
                         or "embedded" */
  const char* arch;   /* the requested arch_list entry */
  const char* target; /* the compatible target tried for it */
  const char* const* arches; /* ARCHIVE: declared gfx_arches, in order */
  size_t arch_count;
  size_t size;
  bool exists;
  bool is_directory;
  bool opened;
  /* ARCHIVE: the errno of a failed open (0 if none), and whether the
   * failure may pass (EMFILE, ENFILE, ENOMEM, ENOBUFS, EINTR, EAGAIN, or
   * OUT_OF_MEMORY): such a failure is not remembered, and the next search
   * opens the archive again. */
  int error_number;
  bool transient;
} kpack_trace_event_t;

typedef void (*kpack_trace_fn_t)(const kpack_trace_event_t* event,
                                 void* user_data);

/* Installs (or with NULL removes) the cache's trace hook. Call it before
 * other threads use the cache; the hook itself is then called from every
 * thread that loads through the cache, possibly at the same time.
 *   INVALID_ARGUMENT  cache is NULL */
KPACK_API kpack_error_t kpack_cache_set_trace(kpack_cache_t cache,
                                              kpack_trace_fn_t trace,
                                              void* user_data);

/* kpack_load_code_object() with the HIPK fields given directly, for tools
 * that know a kernel name and its search paths (search_paths may be empty
 * when ROCM_KPACK_PATH supplies the archives). Same search, same statuses,
 * same events; arguments are checked, then ROCM_KPACK_DISABLE.
 *   INVALID_ARGUMENT  a required pointer (kernel_name, binary_path,
 *                     arch_list and its entries, search_paths when the
 *                     count is not 0, the outputs) is NULL, or arch_count
 *                     is 0 */
KPACK_API kpack_error_t kpack_resolve_code_object(
    kpack_cache_t cache, const char* kernel_name,
    const char* const* search_paths, size_t search_path_count,
    const char* binary_path, uint32_t co_index, const char* const* arch_list,
    size_t arch_count, void** code_object_out, size_t* code_object_size_out);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_TRACE_H */
