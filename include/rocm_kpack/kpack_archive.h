/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: one archive beyond ROCm's published API. Kernel
 * information without decompression, decompression into caller memory,
 * per-binary architecture lists, TOC header getters and error names.
 * Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_ARCHIVE_H
#define ROCM_KPACK_ARCHIVE_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors -------------------------------------------------------------- */

/* The name of a status, e.g. "KPACK_ERROR_KERNEL_NOT_FOUND"; never NULL.
 * Unknown values yield "KPACK_ERROR_UNKNOWN". */
KPACK_API const char* kpack_error_string(kpack_error_t err);

/* What a status means, as a short phrase for messages, e.g. "no such file"
 * for FILE_NOT_FOUND, "malformed file" for INVALID_FORMAT; never NULL.
 * Unknown values yield "unknown status". */
KPACK_API const char* kpack_error_text(kpack_error_t err);

/* The TOC spelling of a scheme: "none" or "zstd-per-kernel"; NULL if
 * unknown. */
KPACK_API const char* kpack_compression_scheme_name(
    kpack_compression_scheme_t scheme);

/* Why kpack_open() refuses the file at `path`, in words that say which
 * structure, where, and the file's size, e.g. "table of contents at
 * 0x1312d00 starts past end of file (20000000 bytes): truncated?",
 * written to why[0, why_size) (NUL-terminated; empty when the archive
 * opens, or fails for a reason errno tells, such as a missing file). Opens
 * the archive again to find out: call it after a failed kpack_open(), not
 * on a hot path. Returns what kpack_open() returns for the same file:
 *   INVALID_ARGUMENT  a pointer is NULL or why_size is 0
 *   and kpack_open()'s statuses */
KPACK_API kpack_error_t kpack_archive_diagnose(const char* path, char* why,
                                               size_t why_size);

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

/* Describes one kernel from the TOC alone; reads nothing from the payload
 * but, in a zstd archive without a usable frame-size table, the size fields
 * that locate the frames (walked once, by the first call that needs them).
 * In a zstd archive whose frame-size table passed the check at open,
 * offset and stored_size are the table's: a read that finds the frame's own
 * size field disagreeing reads the frame where walking the region puts it
 * instead, so they may then differ from what the read used.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   KERNEL_NOT_FOUND  no such binary or arch
 *   INVALID_FORMAT    the zstd region does not hold the frames the TOC
 *                     lists (IO_ERROR: it could not be read) */
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

/* ---- Opening many archives ---------------------------------------------- */

/* Asks the kernel to start reading what kpack_open() will read of each
 * archive (the header page, then the TOC), for all of them before any is
 * waited for, so that a program about to open many archives whose pages
 * are not cached has the disk fetch them in parallel rather than one read
 * at a time. Only a hint: nothing is validated or kept, and a path that
 * cannot be read is passed over (kpack_open() reports it). */
KPACK_API void kpack_prefetch(const char* const* paths, size_t count);

/* ---- Kernels by position ----------------------------------------------- */

/* Binary `binary_index`'s arch count, by position (as kpack_get_binary()
 * numbers the binaries), with no name looked up.
 *   INVALID_ARGUMENT  a pointer is NULL or binary_index >= the count */
KPACK_API kpack_error_t kpack_get_binary_arch_count_at(kpack_archive_t archive,
                                                       size_t binary_index,
                                                       size_t* count);

/* One kernel, everything the TOC says of it. */
typedef struct kpack_kernel_entry {
  const char* binary; /* as kpack_get_binary() returns it */
  const char* arch;   /* as kpack_get_binary_arch() returns it */
  kpack_kernel_info_t info;
  const void* metadata; /* its metadata map, as kpack_get_entry_metadata() */
  size_t metadata_size; /* (NULL and 0 when it has none) */
} kpack_kernel_entry_t;

/* Kernel `arch_index` of binary `binary_index` (the orders of
 * kpack_get_binary() and kpack_get_binary_arch()) in O(1): a program that
 * walks every kernel of many large archives needs no name search per
 * kernel. The strings are owned by the archive.
 *   INVALID_ARGUMENT  a pointer is NULL or an index is out of range
 *   INVALID_FORMAT    as kpack_get_kernel_info() (IO_ERROR too) */
KPACK_API kpack_error_t kpack_get_kernel_entry(kpack_archive_t archive,
                                               size_t binary_index,
                                               size_t arch_index,
                                               kpack_kernel_entry_t* entry);

/* Path the archive was opened from, owned by the archive. */
KPACK_API const char* kpack_get_path(kpack_archive_t archive);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_ARCHIVE_H */
