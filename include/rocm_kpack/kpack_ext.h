/* SPDX-License-Identifier: MIT
 *
 * libkpack extensions beyond ROCm's published API: kernel information
 * without decompression, decompression into caller memory, per-binary
 * architecture lists, TOC header getters, error names and a streaming
 * archive writer. Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_EXT_H
#define ROCM_KPACK_EXT_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors -------------------------------------------------------------- */

/* The name of a status, e.g. "KPACK_ERROR_KERNEL_NOT_FOUND"; never NULL.
 * Unknown values yield "KPACK_ERROR_UNKNOWN". */
KPACK_API const char* kpack_error_string(kpack_error_t err);

/* The TOC spelling of a scheme: "none" or "zstd-per-kernel"; NULL if
 * unknown. */
KPACK_API const char* kpack_compression_scheme_name(
    kpack_compression_scheme_t scheme);

/* ---- Archive header ------------------------------------------------------ */

/* TOC "group_name" and "gfx_arch_family" ("" when absent), owned by the
 * archive. INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_get_group_name(kpack_archive_t archive,
                                             const char** name);
KPACK_API kpack_error_t kpack_get_gfx_arch_family(kpack_archive_t archive,
                                                  const char** family);

/* The archive's storage scheme. INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_get_compression_scheme(
    kpack_archive_t archive, kpack_compression_scheme_t* scheme);

/* Number of kernels (binary, arch pairs) in the archive. */
KPACK_API kpack_error_t kpack_get_kernel_count(kpack_archive_t archive,
                                               size_t* count);

/* ---- Kernels without decompression -------------------------------------- */

typedef struct kpack_kernel_info {
  uint64_t size;        /* decompressed size in bytes */
  uint64_t stored_size; /* bytes it occupies in the file (frame or blob) */
  uint64_t offset;      /* absolute file offset of the stored bytes */
  uint32_t ordinal;     /* index into the blob array or frame table */
  const char* type;     /* entry "type", e.g. "hsaco"; owned by the archive */
} kpack_kernel_info_t;

/* Describes one kernel from the TOC alone; reads nothing from the payload.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   KERNEL_NOT_FOUND  no such binary or arch */
KPACK_API kpack_error_t kpack_get_kernel_info(kpack_archive_t archive,
                                              const char* binary_name,
                                              const char* arch,
                                              kpack_kernel_info_t* info);

/* Decompresses a kernel into caller memory of `capacity` bytes, which must
 * hold at least info.size; *size receives the kernel size. Thread-safe like
 * kpack_get_kernel().
 *   INVALID_ARGUMENT  a pointer is NULL (buffer may be NULL only when the
 *                     kernel is empty) or capacity is too small
 *   KERNEL_NOT_FOUND, DECOMPRESSION_FAILED, IO_ERROR as kpack_get_kernel() */
KPACK_API kpack_error_t kpack_read_kernel(kpack_archive_t archive,
                                          const char* binary_name,
                                          const char* arch, void* buffer,
                                          size_t capacity, size_t* size);

/* Architectures that hold a kernel for one binary, sorted byte-wise.
 *   INVALID_ARGUMENT  a pointer is NULL or index >= count
 *   KERNEL_NOT_FOUND  no such binary */
KPACK_API kpack_error_t kpack_get_binary_arch_count(kpack_archive_t archive,
                                                    const char* binary_name,
                                                    size_t* count);
KPACK_API kpack_error_t kpack_get_binary_arch(kpack_archive_t archive,
                                              const char* binary_name,
                                              size_t index, const char** arch);

/* Path the archive was opened from, owned by the archive. */
KPACK_API const char* kpack_get_path(kpack_archive_t archive);

/* ---- Writer -------------------------------------------------------------- */

/* Streams an archive to disk: kpack_writer_create(), kpack_writer_add_kernel()
 * for each kernel, then kpack_writer_finish() or kpack_writer_abort(). Data
 * goes to a temporary file beside the destination, renamed over it only by a
 * successful finish, so readers never see a partial archive. The output is a
 * function of the options and the sequence of added kernels alone:
 * identical inputs give identical bytes, whatever the thread count. */
typedef struct kpack_writer kpack_writer_t;

typedef struct kpack_writer_options {
  kpack_compression_scheme_t scheme; /* NOOP or ZSTD_PER_KERNEL */
  int zstd_level;                    /* 0 selects the default level (3) */
  unsigned threads;                  /* compression threads; 0 or 1: inline */
  const char* group_name;            /* NULL: "" */
  const char* gfx_arch_family;       /* NULL: "" */
  /* Declared architectures, in order. Arches of added kernels that are not
   * listed are appended in order of first use. */
  const char* const* gfx_arches;
  size_t gfx_arch_count;
} kpack_writer_options_t;

/* Starts an archive at `path` (created or replaced at finish).
 *   INVALID_ARGUMENT  a pointer is NULL, unknown scheme or bad level
 *   IO_ERROR          the temporary file cannot be created
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_writer_create(
    const char* path, const kpack_writer_options_t* options,
    kpack_writer_t** writer);

/* Adds one kernel; the data is copied (or compressed) before this returns
 * or is queued to a compression thread, so the caller may reuse it.
 * Kernels get ordinals in the order they are added.
 *   INVALID_ARGUMENT  NULL pointer, empty name, a name with an embedded NUL
 *                     or a (binary, arch) pair already added
 *   IO_ERROR, OUT_OF_MEMORY, or an error left by an earlier failure */
KPACK_API kpack_error_t kpack_writer_add_kernel(kpack_writer_t* writer,
                                                const char* binary_name,
                                                const char* arch,
                                                const void* data, size_t size);

/* Writes the TOC and header, syncs and renames the file into place, then
 * frees the writer (also on failure, after removing the temporary file). */
KPACK_API kpack_error_t kpack_writer_finish(kpack_writer_t* writer);

/* Removes the temporary file and frees the writer. NULL is a no-op. */
KPACK_API void kpack_writer_abort(kpack_writer_t* writer);

/* ---- Shared decompressed-kernel cache ------------------------------------ */
/* (kernel cache section: kpack_kcache_*) */

/* ---- Clang offload bundles (HIP fat binaries) ------------------------------ */
/* (offload bundle section: kpack_bundle_* / kpack_fatbin_*) */

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_EXT_H */
