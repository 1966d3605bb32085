/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: the tree an archive shows as files, the one layout
 * kpackfs mounts, `kpack extract` writes and `kpack create` reads back:
 *
 *   <binary>/<arch>/kernel.<type>          the kernel's bytes
 *   <binary>/<arch>/kernels                its GPU kernels, one per line
 *   <binary>/<arch>/metadata.json          its metadata note as JSON
 *   <binary>/<arch>/toc-metadata.msgpack   its TOC entry's metadata map
 *   .kpackfs/                              the mount's own files
 *
 * Which TOC names may become paths is decided here, once, so that a mount
 * and an extracted tree cannot disagree (docs/mount.md describes the
 * tree). The functions read no archive and allocate nothing.
 */
#ifndef ROCM_KPACK_LAYOUT_H
#define ROCM_KPACK_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A kernel's file is this prefix and its TOC type: kernel.hsaco. */
#define KPACK_LAYOUT_KERNEL_PREFIX "kernel."
/* Beside a code object: one line per GPU kernel, and the metadata note
 * (kpack_code_object_render() makes both). */
#define KPACK_LAYOUT_KERNELS_FILE "kernels"
#define KPACK_LAYOUT_METADATA_FILE "metadata.json"
/* Beside a kernel whose TOC entry has a metadata map: the map's exact
 * MessagePack bytes (kpack_entry_metadata.h). */
#define KPACK_LAYOUT_TOC_METADATA_FILE "toc-metadata.msgpack"
/* The directory at the top of a mount that holds its own files (stats,
 * archives); no binary path may start with it. */
#define KPACK_LAYOUT_RESERVED_DIR ".kpackfs"
/* The longest path component, in bytes (NAME_MAX of Linux filesystems;
 * the kernel refuses to look up a longer name). */
#define KPACK_LAYOUT_NAME_MAX 255

/* Why a TOC binary name cannot be a directory path of the tree, or NULL
 * when it can: "empty binary name", "absolute binary path", "empty path
 * component" (also a trailing '/'), "'.' or '..' path component",
 * "reserved name .kpackfs" (the first component), "path component longer
 * than 255 bytes". NULL `binary` is "empty binary name". */
KPACK_API const char* kpack_layout_binary_problem(const char* binary);

/* Why an arch cannot be the directory of a binary's kernel, or NULL when
 * it can: "arch is not a file name" (empty, '.', '..', holding '/', or
 * longer than 255 bytes). */
KPACK_API const char* kpack_layout_arch_problem(const char* arch);

/* Why a TOC entry (binary, arch, type) has no place in the tree, or NULL
 * when it has one: the binary's problem, else the arch's, else "type is not
 * a file name" (the rules of an arch), "file name 'kernel.<type>' longer than
 * 255 bytes". */
KPACK_API const char* kpack_layout_entry_problem(const char* binary,
                                                 const char* arch,
                                                 const char* type);

/* The file name of a kernel of `type` ("kernel." + type) into
 * buf[0, size), NUL-terminated.
 *   INVALID_ARGUMENT  a pointer is NULL, the type is not a file name, or
 *                     the name does not fit in `size` bytes */
KPACK_API kpack_error_t kpack_layout_kernel_file(const char* type, char* buf,
                                                 size_t size);

/* The type of a kernel file name ("hsaco" for "kernel.hsaco", pointing
 * into `file_name`), or NULL when the name is not "kernel." and a type. */
KPACK_API const char* kpack_layout_kernel_type(const char* file_name);

/* The files of a kernel's directory <binary>/<arch>/. */
typedef enum kpack_layout_file {
  KPACK_LAYOUT_FILE_KERNEL,       /* kernel.<type>, always */
  KPACK_LAYOUT_FILE_KERNELS,      /* kernels, for type "hsaco" */
  KPACK_LAYOUT_FILE_METADATA,     /* metadata.json, for type "hsaco" */
  KPACK_LAYOUT_FILE_TOC_METADATA, /* toc-metadata.msgpack, with a map */
  KPACK_LAYOUT_FILE_COUNT
} kpack_layout_file_t;

/* Which file of the directory of a kernel of `type`, whose TOC entry has a
 * metadata map when `has_map`, is called name[0, name_len): a
 * kpack_layout_file_t, or -1 when none is (or a pointer is NULL). */
KPACK_API int kpack_layout_file_named(const char* type, bool has_map,
                                      const char* name, size_t name_len);

/* Only a hostile TOC does it, but a binary's path may run through a file
 * of another kernel (a binary "x#0/gfx90a/kernels/y#0" beside x#0's gfx90a
 * code object), or a binary's arch directory may take the name of one (the
 * binary "x#0/gfx90a" with the arch "kernels"): the file and the directory
 * cannot both be in the tree. With sources numbered in the order given
 * (kpackfs's SOURCE arguments, `kpack extract`'s ARCHIVE operands), the
 * file stays, and the kernels that need the directory are left out, unless
 * the first source needing the directory comes before the file's kernel's
 * source: then the directory stays, and the file is left out (for
 * kernel.<type>, its whole kernel). Within one source the file stays. True
 * when the file stays. */
KPACK_API bool kpack_layout_file_stays(size_t file_source,
                                       size_t directory_source);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_LAYOUT_H */
