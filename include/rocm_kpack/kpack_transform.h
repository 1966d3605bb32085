/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: kpack-ify a HIP host binary. The device code of a HIP
 * ELF (.hip_fatbin, found through the HIPF records of .hipFatBinSegment)
 * leaves the file for kpack archives; each record becomes a HIPK record
 * whose pointer leads to msgpack metadata {kernel_name, kpack_search_paths}
 * (and optionally kpack_arches) in a new read-only section .rocm_kpack_ref, and
 * whose reserved field holds the record's index (the co_index the HIP runtime
 * passes to kpack_load_code_object()). docs/split.md describes the result
 * exactly. Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_TRANSFORM_H
#define ROCM_KPACK_TRANSFORM_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a file is to the transform. Only KPACK_TRANSFORM_FAT is rewritten;
 * the others are left as they are (copied by `kpack split`). */
typedef enum kpack_transform_kind {
  KPACK_TRANSFORM_NOT_ELF = 0,        /* not an ELF file */
  KPACK_TRANSFORM_NO_DEVICE_CODE = 1, /* an ELF without .hip_fatbin, or one
                                         that is not 64-bit little-endian */
  KPACK_TRANSFORM_DEBUG_ONLY = 2,     /* .hip_fatbin is SHT_NOBITS: a separate
                                        debug file, or already transformed
                                        without records */
  KPACK_TRANSFORM_KPACKIFIED = 3,     /* HIPK records: already transformed */
  KPACK_TRANSFORM_FAT = 4,            /* HIPF records over a PROGBITS
                                        .hip_fatbin: to transform */
} kpack_transform_kind_t;

/* A short English name for a kind, e.g. "already kpack-ified"; never NULL. */
KPACK_API const char* kpack_transform_kind_string(kpack_transform_kind_t kind);

/* What went wrong, in words: filled by the calls below on failure, e.g.
 * "relocation 12 in .rela.dyn (R_X86_64_RELATIVE at 0x4010) points into
 * .hip_fatbin". Empty on success. */
typedef struct kpack_transform_message {
  char text[256];
} kpack_transform_message_t;

/* How the message of an IO_ERROR starts when the write to the output
 * failed (rather than a read of the input): "write failed: REASON". */
#define KPACK_TRANSFORM_WRITE_FAILED "write failed"

/* Classifies the file at `path` from its ELF header, section table and
 * .hipFatBinSegment records (no device code is read).
 *   INVALID_ARGUMENT  a pointer is NULL
 *   FILE_NOT_FOUND    no file at path
 *   IO_ERROR          the file cannot be read
 *   INVALID_FORMAT    an ELF that is malformed or truncated, records that
 *                     mix HIPF and HIPK, .hipFatBinSegment not whole 24-byte
 *                     records (message says what and where)
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t
kpack_transform_classify(const char* path, kpack_transform_kind_t* kind,
                         kpack_transform_message_t* message);

/* The metadata every record of one binary points at. */
typedef struct kpack_transform_options {
  const char* kernel_name;         /* e.g. "lib/librocrand.so.1.1" */
  const char* const* search_paths; /* e.g. "../.kpack/rand_@GFXARCH@.kpack"
                                      at least one */
  size_t search_path_count;
  /* The arches the binary's code objects were written for, as the
   * archives file them (e.g. "gfx90a:xnack-"), recorded as a third key,
   * kpack_arches, after the two the loader reads: tools such as `kpack
   * verify --binary` then know which archives must exist. Written sorted,
   * duplicates dropped; at most 256, each 1 to 255 bytes. With
   * arch_count 0 (a zero-initialized struct) the key is left out and the
   * metadata is the two-key map, byte for byte. */
  const char* const* arches;
  size_t arch_count;
} kpack_transform_options_t;

typedef struct kpack_transform_result {
  size_t wrapper_count; /* records rewritten */
  uint64_t input_size;  /* bytes of the input file */
  uint64_t output_size; /* bytes written */
  uint64_t fatbin_size; /* sh_size of .hip_fatbin, now memory-only */
} kpack_transform_result_t;

/* Writes the kpack-ified form of the FAT ELF at `input_path` to `output_fd`
 * (an empty regular file open for writing; not closed, not synced). The
 * input is read, never written. Memory stays small whatever the size of the
 * input: the file is streamed through a fixed buffer.
 *   INVALID_ARGUMENT  a pointer is NULL, no search path, an empty or
 *                     overlong arch, more than 256 arches, metadata over
 *                     64 KiB, or the input is not KPACK_TRANSFORM_FAT
 *   FILE_NOT_FOUND    no file at input_path
 *   IO_ERROR          a read or write failed; errno then holds the
 *                     system's reason (ENOSPC, EROFS... for a write to
 *                     output_fd; 0 when the input came up short). A
 *                     failed write to output_fd is the one whose message
 *                     starts with KPACK_TRANSFORM_WRITE_FAILED.
 *   INVALID_FORMAT    the ELF cannot be transformed: truncated or malformed,
 *                     an unsupported class, byte order or e_machine, a
 *                     record pointer outside .hip_fatbin, a pointer with no
 *                     relocation in an ET_DYN, a relocation that still
 *                     points into .hip_fatbin (message says which)
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_transform_write(
    const char* input_path, int output_fd,
    const kpack_transform_options_t* options, kpack_transform_result_t* result,
    kpack_transform_message_t* message);

/* The arches one record's code object was written for, when they differ
 * between the records of one binary (objects built with different
 * --offload-arch sets, linked into one library). `co_index` is the
 * record's code object index, the N of the TOC key NAME#N, which the
 * transform gives records in segment order: 0, 1, 2... Every arch is one
 * of options->arches. */
typedef struct kpack_transform_record {
  uint64_t co_index;
  const char* const* arches;
  size_t arch_count;
} kpack_transform_record_t;

/* kpack_transform_write(), recording also which arches each record's code
 * object was written for: when some record has fewer than
 * options->arches, a fourth key, kpack_record_arches, lists for every
 * record (by co_index) the positions of its arches in the sorted
 * kpack_arches (docs/split.md, "The metadata"), so that `kpack verify
 * --binary` checks each record for its own arches. With records given, a
 * record of the binary they leave out has no arch (none of its code
 * objects was written). With every record having every arch, the metadata
 * is that of kpack_transform_write(), byte for byte.
 *   INVALID_ARGUMENT  also: `records` NULL with a count, an arch that
 *                     options->arches does not hold, a co_index given
 *                     twice or not a record of the binary */
KPACK_API kpack_error_t kpack_transform_write_records(
    const char* input_path, int output_fd,
    const kpack_transform_options_t* options,
    const kpack_transform_record_t* records, size_t record_count,
    kpack_transform_result_t* result, kpack_transform_message_t* message);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_TRANSFORM_H */
