/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the code objects of a HIP fat binary as archive
 * entries, streamed: listing reads the bundles' entry tables only, reading
 * holds one code object (or one decompressed CCOB bundle) at a time.
 * `kpack create --fatbin` and the split (kpack_split.h) both pack fat
 * binaries through these. Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_FATBIN_STREAM_H
#define ROCM_KPACK_FATBIN_STREAM_H

#include "kpack.h"
#include "kpack_bundle.h"
#include "kpack_message.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One AMDGPU entry of a fat binary: kernel `name#bundle` for `arch`. The
 * strings are valid during the kpack_fatbin_code_object_fn call only. */
typedef struct kpack_fatbin_code_object {
  const char* binary; /* "NAME#N": N is the co_index */
  const char* arch;
  size_t bundle;   /* co_index */
  size_t entry;    /* index in the bundle */
  uint64_t size;   /* bytes of the code object */
  bool compressed; /* the bundle is a CCOB envelope */
} kpack_fatbin_code_object_t;

/* Return false to stop the listing (having said why, if it matters). */
typedef bool (*kpack_fatbin_code_object_fn)(
    const kpack_fatbin_code_object_t* code_object, void* user);

/* Calls `fn` for every AMDGPU entry of every bundle of `fatbin`, opened
 * from `path`, bundles in co_index order, entries in stored order; host
 * entries are skipped. `name` is the binary's name in the archive (TOC
 * keys NAME#N). When `message` is not NULL it gets one NOTE per bundle
 * ("PATH: code object N: E entries, D for AMD GPUs, compression C") and
 * the ERROR of a failure, naming `path` and the code object.
 *   INVALID_ARGUMENT  a pointer other than message is NULL
 *   INVALID_FORMAT    an arch that cannot be a directory name (a TOC arch
 *                     must be one), or kpack_fatbin_list_bundle()'s
 *   CANCELLED         fn returned false
 *   and the statuses of kpack_fatbin_list_bundle() */
KPACK_API kpack_error_t kpack_fatbin_list_code_objects(
    const kpack_fatbin_t* fatbin, const char* path, const char* name,
    kpack_fatbin_code_object_fn fn, void* user, kpack_message_fn message,
    void* message_user);

/* Reads entries one at a time. A compressed bundle is decompressed once and
 * kept until kpack_fatbin_reader_release(); a plain bundle's entry table
 * is kept likewise and each code object is read into one reused buffer.
 * Owned by one thread at a time. */
typedef struct kpack_fatbin_reader kpack_fatbin_reader_t;

/* INVALID_ARGUMENT if reader is NULL; OUT_OF_MEMORY. */
KPACK_API kpack_error_t
kpack_fatbin_reader_create(kpack_fatbin_reader_t** reader);

/* The bytes of entry (`bundle`, `entry`) of `fatbin` (opened from `path`)
 * into *data / *size, valid until the next call on this reader. An empty
 * entry is a valid empty kernel (*size 0, *data not NULL). When `message`
 * is not NULL a failure is also reported to it, naming `path` and the
 * code object.
 *   INVALID_ARGUMENT  a pointer other than message is NULL, or no such
 *                     entry
 *   IO_ERROR          the file cannot be read (errno says why)
 *   OUT_OF_MEMORY     the code object does not fit in memory
 *   and the statuses of kpack_fatbin_get_bundle() */
KPACK_API kpack_error_t kpack_fatbin_reader_read(
    kpack_fatbin_reader_t* reader, const kpack_fatbin_t* fatbin,
    const char* path, size_t bundle, size_t entry, bool compressed,
    const void** data, size_t* size, kpack_message_fn message,
    void* message_user);

/* Frees the bundles kept (call when moving to another binary: entries of
 * one binary come together). The reader stays usable. NULL is a no-op. */
KPACK_API void kpack_fatbin_reader_release(kpack_fatbin_reader_t* reader);

/* Frees everything. NULL is a no-op. */
KPACK_API void kpack_fatbin_reader_destroy(kpack_fatbin_reader_t* reader);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_FATBIN_STREAM_H */
