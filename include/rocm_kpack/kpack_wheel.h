/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: split a Python wheel whose HIP binaries carry device
 * code for many GPUs into a host wheel and one device wheel per GPU
 * processor (or group of processors). The wheel is unpacked, its tree
 * (without its .dist-info and .data directories) is split per arch by the
 * caller's tree split, and the results are packed again: the host wheel
 * keeps the name, version, build tag and tags of the input and names each
 * device wheel in an extra; each device wheel, "<dist>-device-<tree>", holds
 * that tree's archives at the paths the host binaries search. docs/split.md
 * ("Wheels") describes the names and the layout. Status values are those of
 * kpack_types.h.
 */
#ifndef ROCM_KPACK_WHEEL_H
#define ROCM_KPACK_WHEEL_H

#include <stddef.h>

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A per-arch tree split (what `kpack split --per-arch` does): splits
 * `input_dir` into `output_dir`/generic and `output_dir`/TREE for each
 * processor or group, with archives named PREFIX_ARCH.kpack in directory
 * `archive_dir` (relative, below each output tree's root), the binaries'
 * search paths leading there. Returns KPACK_SUCCESS or the reason it
 * failed (having said why to the user, or in the caller's own way). */
typedef kpack_error_t (*kpack_wheel_tree_split_fn)(void* user,
                                                   const char* input_dir,
                                                   const char* output_dir,
                                                   const char* prefix,
                                                   const char* archive_dir);

typedef struct kpack_wheel_split_options {
  kpack_wheel_tree_split_fn split_tree; /* required */
  void* user;                           /* passed to split_tree */
  int level; /* deflate level of the wheels written, 1-9; 0 stores */
} kpack_wheel_split_options_t;

/* What a split wrote. Paths are below the output directory. */
typedef struct kpack_wheel_split_result {
  char* host;     /* the host wheel */
  char** devices; /* the device wheels, in byte-wise order of their trees */
  char** trees;   /* the tree (processor or group) of each device wheel */
  char** extras;  /* the host wheel's extra that installs it */
  size_t device_count;
} kpack_wheel_split_result_t;

/* Splits the wheel at `wheel` into wheels written to `output_dir` (made
 * when missing; its parent must exist). Wheels are packed in a temporary
 * directory inside `output_dir` and moved into it only when every one is
 * complete, by renames within its file system: a failure before them
 * leaves `output_dir` as it was (a directory the call made is removed).
 * `why` (may be NULL) receives, on failure, what went wrong and in which
 * file, in words.
 *   INVALID_ARGUMENT  a pointer is NULL, no split_tree, a bad level, or
 *                     output_dir not a directory
 *   FILE_NOT_FOUND    no wheel at `wheel`
 *   INVALID_FORMAT, INVALID_METADATA, UNSUPPORTED_VERSION,
 *   DECOMPRESSION_FAILED  the wheel is not a valid wheel (unpacking checks
 *                     every file against its RECORD)
 *   IO_ERROR          a file could not be read or written (errno says why)
 *   OUT_OF_MEMORY     allocation failed
 * or split_tree's status. */
KPACK_API kpack_error_t kpack_wheel_split(
    const char* wheel, const char* output_dir,
    const kpack_wheel_split_options_t* options,
    kpack_wheel_split_result_t** result, char* why, size_t why_size);

/* NULL is a no-op. */
KPACK_API void kpack_wheel_split_result_free(
    kpack_wheel_split_result_t* result);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_WHEEL_H */
