/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the streaming archive writer. Output is byte-compatible
 * with ROCm's writer and deterministic. Status values are those of
 * kpack_types.h.
 */
#ifndef ROCM_KPACK_WRITER_H
#define ROCM_KPACK_WRITER_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Writer -------------------------------------------------------------- */

/* Streams an archive to disk: kpack_writer_create(), kpack_writer_add_kernel()
 * for each kernel, then kpack_writer_finish() or kpack_writer_abort(). Data
 * goes to a temporary file beside the destination (".kpack-<pid>-<n>.tmp" in
 * its directory), renamed over it only by a successful finish, so readers
 * never see a partial archive. A destination that is a symbolic link is
 * followed: its final target is the file replaced (and created if the link
 * dangles), the link itself is kept. The output is a function of the
 * options and the sequence of added kernels alone: identical inputs give
 * identical bytes, whatever the thread count. */
typedef struct kpack_writer kpack_writer_t;

/* Compression threads that several writers share (kpack_writer_options_t
 * `pool`), so that archives written side by side, such as one per arch
 * filled from one pass over their inputs, use `threads` threads and hold
 * at most 4 * `threads` kernels in flight between them, as one writer with
 * `threads` threads does. Every writer of a pool must be called from one
 * and the same thread; the pool is destroyed after each of them has been
 * finished or aborted. Sharing changes no archive's bytes. */
typedef struct kpack_writer_pool kpack_writer_pool_t;

/* Starts `threads` compression threads.
 *   INVALID_ARGUMENT  pool is NULL or threads is 0
 *   OUT_OF_MEMORY     allocation failed or no thread could be started */
KPACK_API kpack_error_t kpack_writer_pool_create(unsigned threads,
                                                 kpack_writer_pool_t** pool);

/* Stops the threads and frees the pool. NULL is a no-op. */
KPACK_API void kpack_writer_pool_destroy(kpack_writer_pool_t* pool);

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
  /* Shared compression threads (used instead of `threads`), or NULL. */
  kpack_writer_pool_t* pool;
} kpack_writer_options_t;

/* Starts an archive at `path` (created or replaced at finish).
 *   INVALID_ARGUMENT  a pointer is NULL, unknown scheme or bad level
 *   IO_ERROR          the temporary file cannot be created, or a symbolic
 *                     link on the way cannot be read (or loops); errno
 *                     then holds the system's reason (EACCES, EROFS,
 *                     ENOSPC...)
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t
kpack_writer_create(const char* path, const kpack_writer_options_t* options,
                    kpack_writer_t** writer);

/* Adds one kernel; the data is copied (or compressed) before this returns
 * or is queued to a compression thread, so the caller may reuse it.
 * Stored bytes (a raw blob, or a zstd frame) get ordinals in the order
 * they are added; a kernel whose stored bytes equal those of a kernel
 * added before is not stored again, its TOC entry names that ordinal
 * (docs/format.md, "Shared ordinals"): an archive holds each distinct
 * stored content once.
 *   INVALID_ARGUMENT  NULL pointer, empty name, a name with an embedded NUL
 *                     or a (binary, arch) pair already added
 *   IO_ERROR, OUT_OF_MEMORY, or an error left by an earlier failure */
KPACK_API kpack_error_t kpack_writer_add_kernel(kpack_writer_t* writer,
                                                const char* binary_name,
                                                const char* arch,
                                                const void* data, size_t size);

/* As kpack_writer_add_kernel(), with the entry's "metadata" map: `metadata`
 * holds `metadata_size` bytes of exactly one MessagePack map, written into
 * the TOC entry byte for byte (readers return the same bytes; see
 * kpack_entry_metadata.h). NULL (with size 0) writes no metadata. The bytes
 * are copied before this returns.
 *   INVALID_ARGUMENT  as kpack_writer_add_kernel(), or metadata that is not
 *                     one well-formed map (trailing bytes, truncated, another
 *                     type) or that readers could not show as JSON (nesting
 *                     deeper than 64 levels, a map or array key inside
 *                     another); the writer stays usable
 *   IO_ERROR, OUT_OF_MEMORY, or an error left by an earlier failure */
KPACK_API kpack_error_t kpack_writer_add_kernel_with_metadata(
    kpack_writer_t* writer, const char* binary_name, const char* arch,
    const void* data, size_t size, const void* metadata, size_t metadata_size);

/* kpack_writer_copy_kernel() flag: compress again with the writer's level
 * rather than carrying a zstd frame over. */
#define KPACK_WRITER_RECOMPRESS 1u

/* Adds one kernel of an open archive under the same names, with its type
 * and metadata map. When both archives are zstd-per-kernel (and `flags`
 * lacks KPACK_WRITER_RECOMPRESS) the stored frame is copied byte for byte,
 * after it has been read back as the kernel (size field, content size,
 * checksum); otherwise the kernel is decompressed and stored as an added
 * one would be. Stored bytes equal to earlier ones are shared as
 * kpack_writer_add_kernel() shares them, also when they come from
 * different archives. Either way the output depends only on the input
 * archives' bytes and the order of calls. The archive must stay open until this
 * returns; it may be closed before kpack_writer_finish().
 *   INVALID_ARGUMENT      a pointer is NULL, an empty name, unknown flags, or
 *                         the (binary, arch) pair was already added
 *   KERNEL_NOT_FOUND      the archive has no such kernel
 *   DECOMPRESSION_FAILED  its stored bytes do not read back as the kernel
 *   INVALID_METADATA      its metadata map is one this writer would refuse
 *   IO_ERROR, OUT_OF_MEMORY
 * A failure to read the source (the first four, or IO_ERROR reading it)
 * leaves the writer usable; a failure to write poisons it as
 * kpack_writer_add_kernel() does. */
KPACK_API kpack_error_t kpack_writer_copy_kernel(kpack_writer_t* writer,
                                                 kpack_archive_t archive,
                                                 const char* binary_name,
                                                 const char* arch,
                                                 unsigned flags);

/* Writes the TOC and header, syncs the file, renames it into place and
 * syncs the directory (so a crash leaves the old archive or the new one,
 * for good), then frees the writer, also on failure, after removing the
 * temporary file.
 *   IO_ERROR  a write, sync or the rename failed (the destination is then
 *             left as it was, except when only the directory sync failed)
 *   or an error left by an earlier failure
 * Every failure here is the archive's: on IO_ERROR errno holds the
 * system's reason (ENOSPC...), or 0 when there is none, as a write that
 * made no progress; kpack_writer_get_failure() can no longer be asked,
 * the writer being freed. */
KPACK_API kpack_error_t kpack_writer_finish(kpack_writer_t* writer);

/* What a failed call of kpack_writer_add_kernel*() or
 * kpack_writer_copy_kernel() failed on: the archive being written, the
 * source archive being read, or no file at all, so that a caller can
 * name the right file in its message. */
typedef enum kpack_writer_side {
  KPACK_WRITER_SIDE_NONE = 0, /* a refused argument (a name already added,
                                 metadata that is not one map) or memory */
  KPACK_WRITER_SIDE_ARCHIVE,  /* the archive: the writer is poisoned, in
                                 this call or an earlier one, by a failed
                                 write of its temporary file (sys_errno
                                 says why) or by memory running out with a
                                 kernel half recorded */
  KPACK_WRITER_SIDE_SOURCE,   /* the archive kpack_writer_copy_kernel() reads:
                                 the kernel is missing, unreadable or does
                                 not read back (the writer stays usable) */
} kpack_writer_side_t;

typedef struct kpack_writer_failure {
  kpack_writer_side_t side;
  int sys_errno; /* the system's reason for an IO_ERROR (ENOSPC, EIO...),
                    0 when none: a short read, a write that made no
                    progress, or a status that is not IO_ERROR */
} kpack_writer_failure_t;

/* Fills *failure with what the last failed call on `writer` failed on
 * ({NONE, 0} when no call failed, or `writer` is NULL). A call that
 * succeeds, or is refused for a NULL pointer or unknown flags, leaves it
 * as it was. The calls that free or never return a writer
 * (kpack_writer_create(), kpack_writer_finish()) fail on the archive
 * only, and say why in errno. */
KPACK_API void kpack_writer_get_failure(const kpack_writer_t* writer,
                                        kpack_writer_failure_t* failure);

/* Removes the temporary file and frees the writer. NULL is a no-op. */
KPACK_API void kpack_writer_abort(kpack_writer_t* writer);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_WRITER_H */
