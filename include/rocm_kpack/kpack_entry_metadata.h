/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the per-kernel "metadata" map of a TOC entry. ROCm's
 * writer may attach one to any kernel (`toc[binary][arch]["metadata"]`);
 * this project's writer takes one per kernel too
 * (kpack_writer_add_kernel_with_metadata()). Readers keep the map's
 * MessagePack bytes exactly as stored, so a map survives archive -> extract
 * -> create -> archive byte for byte. An entry whose "metadata" value is
 * not a map is read as having none (ROCm's reader ignores the field).
 * Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_ENTRY_METADATA_H
#define ROCM_KPACK_ENTRY_METADATA_H

#include "kpack.h"
#include "kpack_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The file beside <binary>/<arch>/kernel.<type> that holds the entry's map,
 * its exact MessagePack bytes, in a tree in the kpackfs layout: a kpackfs
 * mount shows it, `kpack extract` writes it and `kpack create` reads it
 * back. Absent for an entry without a map. The name is the layout's
 * (kpack_layout.h), kept here under its earlier spelling. */
#define KPACK_ENTRY_METADATA_FILE KPACK_LAYOUT_TOC_METADATA_FILE

/* The entry's metadata map as the MessagePack bytes stored in the TOC (one
 * map, exactly as written). *data points into the archive and stays valid
 * until kpack_close(). An entry without metadata succeeds with *data NULL
 * and *size 0. Reads nothing from the file.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   KERNEL_NOT_FOUND  no such binary or arch */
KPACK_API kpack_error_t kpack_get_entry_metadata(kpack_archive_t archive,
                                                 const char* binary_name,
                                                 const char* arch,
                                                 const void** data,
                                                 size_t* size);

/* The same map as compact JSON text (UTF-8, NUL-terminated), in a buffer
 * the caller releases with free(). Strings are JSON strings, bin values
 * lowercase hex strings, ext values {"ext": type, "data": "<hex>"}, and
 * non-string keys their JSON text. An entry without metadata succeeds with
 * *json NULL.
 *   INVALID_ARGUMENT      a pointer is NULL
 *   KERNEL_NOT_FOUND      no such binary or arch
 *   MSGPACK_PARSE_FAILED  the map nests deeper than 64 levels, or has a
 *                         map or array key inside another such key (a
 *                         writer here refuses both)
 *   OUT_OF_MEMORY         allocation failed
 * On failure *json is NULL. */
KPACK_API kpack_error_t kpack_get_entry_metadata_json(kpack_archive_t archive,
                                                      const char* binary_name,
                                                      const char* arch,
                                                      char** json);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_ENTRY_METADATA_H */
