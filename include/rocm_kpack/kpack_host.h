/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: HIP host binaries as the HIP runtime sees them. Every
 * translation unit of a HIP binary registers one 24-byte record of the ELF
 * section .hipFatBinSegment: u32 magic, u32 version, u64 pointer, u64
 * reserved. A binary that still carries its device code has "HIPF" records
 * pointing at clang offload bundles in .hip_fatbin (kpack_bundle.h reads
 * them). A kpack-ified binary has "HIPK" records instead: the pointer leads
 * to msgpack metadata {kernel_name, kpack_search_paths} in .rocm_kpack_ref
 * (`kpack split` adds kpack_arches, kpack_host_get_arches()) and `reserved`
 * holds the code object index the runtime passes to
 * kpack_load_code_object(). In shared objects and PIE the pointer field is 0
 * in the file and set by an R_*_RELATIVE relocation (or R_*_64 against a
 * symbol); this reader applies them, for x86-64 and AArch64. Status values
 * are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_HOST_H
#define ROCM_KPACK_HOST_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record magics: "HIPF", device code inside; "HIPK", in archives. */
#define KPACK_HOST_HIPF_MAGIC 0x48495046u
#define KPACK_HOST_HIPK_MAGIC 0x4B504948u

typedef struct kpack_host kpack_host_t;

typedef enum kpack_host_kind {
  KPACK_HOST_NONE = 0, /* no .hipFatBinSegment and no .hip_fatbin: no HIP
                          device code at all */
  KPACK_HOST_FAT = 1,  /* HIPF records or a .hip_fatbin: device code inside */
  KPACK_HOST_KPACKIFIED = 2, /* HIPK records: device code in kpack archives */
} kpack_host_kind_t;

typedef struct kpack_host_info {
  kpack_host_kind_t kind;
  uint16_t elf_type;    /* ET_REL 1, ET_EXEC 2, ET_DYN 3 */
  uint16_t machine;     /* e_machine: 62 x86-64, 183 AArch64 */
  size_t wrapper_count; /* records in .hipFatBinSegment */
  bool has_fatbin;      /* a .hip_fatbin section is present */
  bool has_kpack_ref;   /* a .rocm_kpack_ref section is present */
} kpack_host_info_t;

/* Why one record cannot be used. Each maps to one status (in brackets). */
typedef enum kpack_host_problem {
  KPACK_HOST_OK = 0,
  KPACK_HOST_BAD_MAGIC,         /* neither HIPF nor HIPK [INVALID_FORMAT] */
  KPACK_HOST_NULL_POINTER,      /* HIPK pointer 0 in the file and no
                                   relocation sets it [INVALID_FORMAT] */
  KPACK_HOST_UNDEFINED_SYMBOL,  /* HIPK pointer relocated against an
                                   undefined symbol [INVALID_FORMAT] */
  KPACK_HOST_OUTSIDE_SECTIONS,  /* HIPK pointer in no section of the file
                                   [INVALID_FORMAT] */
  KPACK_HOST_OUTSIDE_KPACK_REF, /* HIPK pointer into a section other than
                                   .rocm_kpack_ref [INVALID_FORMAT] */
  KPACK_HOST_BAD_METADATA,      /* not a HIPK map within .rocm_kpack_ref:
                                   truncated, malformed, a key missing or of
                                   the wrong type, a malformed kpack_arches
                                   [INVALID_METADATA] */
} kpack_host_problem_t;

/* One .hipFatBinSegment record. Strings and arrays belong to the handle. */
typedef struct kpack_host_wrapper {
  uint32_t magic;    /* as stored */
  uint32_t version;  /* as stored */
  uint64_t pointer;  /* the pointer field once relocated: an address, or in
                        a relocatable object an offset in its section */
  uint64_t reserved; /* HIPK: the code object index (co_index) */
  kpack_host_problem_t problem;
  kpack_error_t status; /* SUCCESS, or the status of `problem` */
  /* HIPK records whose metadata parsed; NULL / 0 otherwise. */
  uint64_t metadata_offset; /* where the map starts in .rocm_kpack_ref */
  const char* kernel_name;
  const char* const* search_paths; /* as written, in order */
  size_t search_path_count;
} kpack_host_wrapper_t;

/* Reads a host binary's records and the metadata of its HIPK records; the
 * file is closed again before this returns. Device code is not read (see
 * kpack_fatbin_open()). A record that cannot be used does not fail the
 * open: kpack_host_get_wrapper() reports it.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   FILE_NOT_FOUND    no file at path
 *   IO_ERROR          the file cannot be read, or is not a regular file
 *   INVALID_FORMAT    not a 64-bit little-endian ELF; the section table,
 *                     .hipFatBinSegment, .rocm_kpack_ref (when a HIPK record
 *                     exists) or a relocation section outside the file;
 *                     .hipFatBinSegment not whole 24-byte records; a
 *                     relocation naming a symbol its table does not have
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_host_open(const char* path, kpack_host_t** host);

/* The same for an ELF image in memory (the entry point for fuzzing); the
 * image may be freed once this returns. */
KPACK_API kpack_error_t kpack_host_open_memory(const void* data, size_t size,
                                               kpack_host_t** host);

/* INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_host_get_info(const kpack_host_t* host,
                                            kpack_host_info_t* info);

/* Record `index`, in segment order, into *wrapper. Returns the record's own
 * status (wrapper->status: SUCCESS, INVALID_FORMAT or INVALID_METADATA,
 * with wrapper->problem saying why), having filled *wrapper either way.
 *   INVALID_ARGUMENT  a pointer is NULL or index >= wrapper_count */
KPACK_API kpack_error_t kpack_host_get_wrapper(const kpack_host_t* host,
                                               size_t index,
                                               kpack_host_wrapper_t* wrapper);

/* The arches `kpack split` wrote record `index`'s code objects for: the
 * kpack_arches list of its metadata, or, when the metadata lists arches
 * per record (kpack_record_arches: records built for different arches),
 * this record's own; target IDs as the archives file them (e.g.
 * "gfx90a:xnack-"), sorted, at most 256. *arches is NULL and *count 0
 * when the metadata has no such list (a binary kpack-ified by another
 * tool), none for this record, or the record is unusable. The strings belong to
 * the handle. (A function of its own, not a kpack_host_wrapper_t member, so
 * that a caller built against an older header keeps its struct size.)
 *   INVALID_ARGUMENT  a pointer is NULL or index >= wrapper_count */
KPACK_API kpack_error_t kpack_host_get_arches(const kpack_host_t* host,
                                              size_t index,
                                              const char* const** arches,
                                              size_t* count);

/* The whole kpack_arches list of record `index`'s metadata: every arch
 * the split wrote any of the binary's code objects for, whatever this
 * record's own (kpack_host_get_arches()). NULL and 0 as there.
 *   INVALID_ARGUMENT  a pointer is NULL or index >= wrapper_count */
KPACK_API kpack_error_t kpack_host_get_binary_arches(const kpack_host_t* host,
                                                     size_t index,
                                                     const char* const** arches,
                                                     size_t* count);

/* A short English description of a problem, e.g. "the metadata pointer is
 * 0 and no relocation sets it"; never NULL. */
KPACK_API const char* kpack_host_problem_string(kpack_host_problem_t problem);

/* NULL is a no-op. */
KPACK_API void kpack_host_close(kpack_host_t* host);

/* True when `data` (size bytes, at least the first 20 of a file) starts
 * like a host binary: a 64-bit little-endian ELF whose e_machine is not
 * AMDGPU (kpack_is_code_object() tells code objects). Reads nothing else. */
KPACK_API bool kpack_is_host_binary(const void* data, size_t size);

/* Why kpack_host_open() or kpack_fatbin_open() find the file at `path`
 * malformed, in words that say what and where, e.g. "section header table
 * at 0x3f40 (29 entries of 64 bytes) extends past end of file (16384
 * bytes): truncated?", written to why[0, why_size) (NUL-terminated;
 * empty when the ELF structure, section names and .hipFatBinSegment
 * records read correctly). Returns the status those opens return for the
 * same cause:
 *   INVALID_ARGUMENT  a pointer is NULL or why_size is 0
 *   FILE_NOT_FOUND, IO_ERROR, INVALID_FORMAT, OUT_OF_MEMORY */
KPACK_API kpack_error_t kpack_host_diagnose(const char* path, char* why,
                                            size_t why_size);

/* The path the loader tries for `search_path`, an entry of a binary's
 * kpack_search_paths, when the binary was opened as `binary_path`: an
 * absolute path as it is; a relative one against the binary's directory as
 * ROCm's loader resolves it (symlinks followed where the path exists,
 * lexical normalisation for the rest). @GFXARCH@ stays in place: the loader
 * expands it per target. *resolved is malloc'ed; free() it.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_resolve_search_path(const char* binary_path,
                                                  const char* search_path,
                                                  char** resolved);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_HOST_H */
