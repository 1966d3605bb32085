/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: clang offload bundles and the HIP fat binaries that
 * hold them, read without any ROCm tool.
 */
#ifndef ROCM_KPACK_BUNDLE_H
#define ROCM_KPACK_BUNDLE_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Clang offload bundles (HIP fat binaries) ---------------------------- */

/* A HIP host binary carries its device code in the ELF section .hip_fatbin as
 * clang offload bundles: "__CLANG_OFFLOAD_BUNDLE__", a u64 entry count, then
 * per entry a u64 offset (from the bundle start), u64 size, u64 ID length and
 * the ID, e.g. "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-". A bundle may be
 * wrapped in a compressed "CCOB" envelope (header versions 1-3, zlib or
 * zstd). .hipFatBinSegment holds one 24-byte __CudaFatBinaryWrapper per
 * translation unit (u32 magic 0x48495046 "HIPF", u32 version, u64 bundle
 * address, u64 reserved); the bundle wrapper N points at is code object N,
 * the co_index the HIP runtime passes to kpack_load_code_object().
 *
 * Every offset, size and count read is bounds-checked: malformed input is
 * INVALID_FORMAT, a compressed payload that does not decompress to the size
 * its header declares is DECOMPRESSION_FAILED, and an unknown CCOB version
 * or compression method is UNSUPPORTED_VERSION. Never a crash. */

typedef struct kpack_bundle kpack_bundle_t;

typedef enum {
  KPACK_BUNDLE_UNCOMPRESSED = 0,
  KPACK_BUNDLE_ZLIB = 1, /* CCOB method 0 */
  KPACK_BUNDLE_ZSTD = 2, /* CCOB method 1 */
} kpack_bundle_compression_t;

typedef struct kpack_bundle_info {
  kpack_bundle_compression_t compression;
  unsigned ccob_version; /* CCOB header version; 0 when uncompressed */
  uint64_t extent;       /* input bytes the bundle occupies */
  uint64_t bundle_size;  /* size of the (decompressed) bundle */
  size_t entry_count;
} kpack_bundle_info_t;

typedef struct kpack_bundle_entry {
  const char* id;   /* the entry ID as stored */
  const char* arch; /* target ID of a HIP AMDGPU entry ("gfx90a:xnack-",
                       from "hipv4-" or "hip-amdgcn-amd-amdhsa--..."); NULL
                       for any other entry (host, OpenMP...) */
  const void* data; /* the code object */
  uint64_t size;
} kpack_bundle_entry_t;

/* Parses the bundle (plain or CCOB) that starts at `data`; `size` is the
 * number of readable bytes, which may run past the bundle's end. Entries of
 * an uncompressed bundle point into `data`, which must outlive the bundle;
 * a compressed bundle owns its decompressed bytes. The CCOB hash field is
 * not checked.
 *   INVALID_ARGUMENT     a pointer is NULL
 *   INVALID_FORMAT       no bundle magic, or a count, offset or size that
 *                        does not fit; a CCOB envelope around anything but
 *                        a plain bundle
 *   DECOMPRESSION_FAILED corrupt payload or wrong decompressed size
 *   UNSUPPORTED_VERSION  unknown CCOB version or compression method
 *   OUT_OF_MEMORY        allocation failed */
KPACK_API kpack_error_t kpack_bundle_parse(const void* data, size_t size,
                                           kpack_bundle_t** bundle);

/* INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_bundle_get_info(const kpack_bundle_t* bundle,
                                              kpack_bundle_info_t* info);

/* Entry `index` in stored order; strings and data live as long as the
 * bundle. data is NULL in a bundle from kpack_fatbin_list_bundle().
 * INVALID_ARGUMENT if a pointer is NULL or index >= entry_count. */
KPACK_API kpack_error_t kpack_bundle_get_entry(const kpack_bundle_t* bundle,
                                               size_t index,
                                               kpack_bundle_entry_t* entry);

/* Copies the code object of entry `index` into `buffer` (`size` bytes, at
 * least the entry's size). For a bundle listed by kpack_fatbin_list_bundle()
 * the bytes are read from the fat binary's file now: one read when the
 * bundle is plain; when it is compressed, its payload is decompressed from
 * the start to the entry's end through a small window (to read every entry
 * of a compressed bundle, kpack_fatbin_get_bundle() decompresses it once).
 * Safe to call from several threads on one bundle.
 *   INVALID_ARGUMENT      a pointer is NULL, index >= entry_count or `size`
 *                         is smaller than the entry
 *   IO_ERROR              the file cannot be read (or shrank)
 *   DECOMPRESSION_FAILED  the payload is corrupt or ends before the entry
 *   OUT_OF_MEMORY         allocation failed */
KPACK_API kpack_error_t kpack_bundle_read_entry(const kpack_bundle_t* bundle,
                                                size_t index, void* buffer,
                                                size_t size);

/* NULL is a no-op. */
KPACK_API void kpack_bundle_free(kpack_bundle_t* bundle);

/* The bundles of one ELF file (64-bit little-endian). */
typedef struct kpack_fatbin kpack_fatbin_t;

typedef struct kpack_fatbin_info {
  bool has_fatbin;      /* the ELF has a .hip_fatbin section */
  bool has_wrappers;    /* bundles were located through .hipFatBinSegment;
                           otherwise they were walked in section order */
  uint16_t machine;     /* ELF e_machine of the host binary */
  uint64_t fatbin_size; /* bytes of .hip_fatbin */
  size_t bundle_count;  /* code objects: index N is co_index N */
} kpack_fatbin_info_t;

/* Reads the ELF's section table and locates the bundles of .hip_fatbin:
 * through the wrappers in .hipFatBinSegment when present (a wrapper address
 * of 0 in the file is taken from its RELATIVE or ABS64 relocation on x86-64
 * and AArch64), else by walking the bundles that follow each other,
 * zero-padded, in .hip_fatbin (reading each bundle's header and entry
 * table; a version 1 CCOB envelope, which records no size, is decompressed
 * to find its end). An ELF without .hip_fatbin opens with no bundles.
 * Memory does not grow with the file: the handle keeps the section table's
 * findings and one offset per bundle, and keeps the file open to read
 * bundles later, in pieces, with pread.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   FILE_NOT_FOUND    no file at path
 *   IO_ERROR          the file cannot be read; errno then holds the
 *                     system's reason (EACCES, EIO...; EISDIR for any file
 *                     that is not a regular one; 0 when it came up short)
 *   INVALID_FORMAT    not a 64-bit little-endian ELF, a section outside the
 *                     file, a bad wrapper or a wrapper address outside
 *                     .hip_fatbin, garbage between walked bundles
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_fatbin_open(const char* path,
                                          kpack_fatbin_t** fatbin);

/* The same for an ELF image in memory, which must outlive the handle (the
 * entry point for fuzzing). */
KPACK_API kpack_error_t kpack_fatbin_open_memory(const void* data, size_t size,
                                                 kpack_fatbin_t** fatbin);

/* INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_fatbin_get_info(const kpack_fatbin_t* fatbin,
                                              kpack_fatbin_info_t* info);

/* Parses bundle `index` (co_index) as kpack_bundle_parse() does: the whole
 * bundle is read (and decompressed) into memory the bundle owns, or points
 * into a memory image. Bundles must be freed before the fatbin is closed.
 * Safe to call from several threads on one handle.
 *   INVALID_ARGUMENT  a pointer is NULL or index >= bundle_count
 *   IO_ERROR          the file cannot be read (or shrank)
 *   any kpack_bundle_parse() error */
KPACK_API kpack_error_t kpack_fatbin_get_bundle(const kpack_fatbin_t* fatbin,
                                                size_t index,
                                                kpack_bundle_t** bundle);

/* Lists bundle `index` without reading its code objects: info, entry IDs,
 * arches and sizes, with data NULL in every entry; the code objects are
 * read one at a time by kpack_bundle_read_entry(). A plain bundle costs
 * reads of its header and entry table; a compressed one is decompressed as
 * far as its table (version 1 to its end, to find where it stops), so a
 * corrupt payload past the table shows only when an entry is read. In info,
 * bundle_size is the declared decompressed size. Free the bundle before
 * closing the fatbin. Errors as kpack_fatbin_get_bundle(). */
KPACK_API kpack_error_t kpack_fatbin_list_bundle(const kpack_fatbin_t* fatbin,
                                                 size_t index,
                                                 kpack_bundle_t** bundle);

/* NULL is a no-op. */
KPACK_API void kpack_fatbin_close(kpack_fatbin_t* fatbin);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_BUNDLE_H */
