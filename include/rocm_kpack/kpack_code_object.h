/* SPDX-License-Identifier: MIT
 *
 * libkpack extension: what an AMDGPU code object holds, read from its bytes
 * without any ROCm tool: its target (processor and xnack/sramecc settings),
 * its code object version, and every kernel its metadata note describes,
 * with the register, LDS and scratch use of each.
 */
#ifndef ROCM_KPACK_CODE_OBJECT_H
#define ROCM_KPACK_CODE_OBJECT_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An AMDGPU code object is a 64-bit little-endian ELF file with e_machine
 * 224 (EM_AMDGPU). Its target comes from e_flags: the processor from the
 * EF_AMDGPU_MACH byte, and the xnack and sramecc settings by the rules of
 * its code object version (EI_OSABI 64, ELFOSABI_AMDGPU_HSA: version =
 * EI_ABIVERSION + 2): v3 has one bit per feature (set = on, clear = off,
 * for processors that have the feature), v4 and later a two-bit field each
 * (unsupported, any, off, on); v2 only an xnack bit, and names its processor
 * in a note of its own that is not read here. The kernels come from the
 * NT_AMDGPU_METADATA note (type 32, owner "AMDGPU"): a MessagePack map whose
 * "amdhsa.kernels" is an array of maps, one per kernel, and whose
 * "amdhsa.target" names the target again ("amdgcn-amd-amdhsa--gfx90a:xnack-").
 *
 * The note is looked for in the PT_NOTE segments, then (if none holds it,
 * e.g. in a relocatable object) in the SHT_NOTE sections; the first one
 * found is used. Notes are 4-byte aligned (8 when the segment or section
 * says so); the padding after the last one may be missing. Every offset,
 * size, count and string length is checked against the bytes given, nesting
 * is bounded, and nothing is allocated for elements that cannot exist.
 * Unknown keys are ignored. A code object without the note is valid and has
 * no kernels. Statuses:
 *   INVALID_ARGUMENT      a pointer is NULL
 *   INVALID_FORMAT        not a 64-bit little-endian ELF with e_machine 224;
 *                         a program header, section header, segment,
 *                         section or note that does not fit in the bytes
 *   MSGPACK_PARSE_FAILED  the metadata note is not one well-formed
 *                         MessagePack value (truncated, a reserved byte, a
 *                         length beyond the note, nesting deeper than 64)
 *   INVALID_METADATA      the note is MessagePack of the wrong shape: not a
 *                         map; "amdhsa.kernels" not an array of maps; a
 *                         kernel without a str ".name"; a known key given
 *                         twice or with a value of the wrong type (a str
 *                         where a count belongs, a negative count...)
 *   OUT_OF_MEMORY         allocation failed */

typedef struct kpack_code_object kpack_code_object_t;

/* A target feature setting. The values are those of the v4+ e_flags
 * fields. */
typedef enum {
  KPACK_FEATURE_UNSUPPORTED = 0, /* the processor has no such feature */
  KPACK_FEATURE_ANY = 1,         /* the code runs with it on or off */
  KPACK_FEATURE_OFF = 2,
  KPACK_FEATURE_ON = 3,
} kpack_feature_t;

typedef struct kpack_code_object_info {
  unsigned version;         /* code object version (2..6); 0 when EI_OSABI
                               is not AMDGPU HSA */
  uint32_t e_flags;         /* as stored */
  uint32_t mach;            /* e_flags & 0xff (EF_AMDGPU_MACH) */
  unsigned generic_version; /* e_flags >> 24 for generic targets (v6) */
  kpack_feature_t xnack;
  kpack_feature_t sramecc;
  /* The processor, e.g. "gfx90a" or "gfx9-generic"; from EF_AMDGPU_MACH,
   * or from the metadata target when the mach value is unknown; "" when
   * neither names one. */
  const char* processor;
  /* The target ID: processor, then ":sramecc+"/"-" and ":xnack+"/"-" for
   * each feature set on or off, e.g. "gfx90a:xnack-" (the form archive
   * architectures use). With an unknown mach value, the metadata target
   * without its "amdgcn-amd-amdhsa--" prefix; "" if there is neither. */
  const char* target;
  /* "amdhsa.target" as written in the note; "" when absent. */
  const char* metadata_target;
  bool has_metadata;    /* an NT_AMDGPU_METADATA note was found */
  size_t metadata_size; /* bytes of its MessagePack description */
  size_t kernel_count;
} kpack_code_object_info_t;

/* Which optional fields a kernel's metadata holds (kpack_co_kernel_t.present).
 * A field that is absent reads as 0. */
enum {
  KPACK_CO_VGPR_COUNT = 1u << 0,
  KPACK_CO_SGPR_COUNT = 1u << 1,
  KPACK_CO_AGPR_COUNT = 1u << 2,
  KPACK_CO_GROUP_SEGMENT_FIXED_SIZE = 1u << 3,
  KPACK_CO_PRIVATE_SEGMENT_FIXED_SIZE = 1u << 4,
  KPACK_CO_KERNARG_SEGMENT_SIZE = 1u << 5,
  KPACK_CO_WAVEFRONT_SIZE = 1u << 6,
  KPACK_CO_MAX_FLAT_WORKGROUP_SIZE = 1u << 7,
  KPACK_CO_VGPR_SPILL_COUNT = 1u << 8,
  KPACK_CO_SGPR_SPILL_COUNT = 1u << 9,
  KPACK_CO_SYMBOL = 1u << 10,
};

/* One kernel of the metadata note; the strings belong to the code object. */
typedef struct kpack_co_kernel {
  const char* name;   /* ".name", e.g. a mangled C++ name */
  const char* symbol; /* ".symbol", its kernel descriptor: name + ".kd" */
  uint64_t vgpr_count;
  uint64_t sgpr_count;
  uint64_t agpr_count;                 /* accumulation VGPRs (gfx908+) */
  uint64_t group_segment_fixed_size;   /* LDS bytes */
  uint64_t private_segment_fixed_size; /* scratch bytes per work-item */
  uint64_t kernarg_segment_size;
  uint64_t wavefront_size;
  uint64_t max_flat_workgroup_size;
  uint64_t vgpr_spill_count;
  uint64_t sgpr_spill_count;
  uint32_t present; /* KPACK_CO_* bits of the fields the note holds */
} kpack_co_kernel_t;

/* True if `data` (at least its first 64 bytes) starts like an AMDGPU code
 * object: ELF magic, 64-bit, little-endian, e_machine 224. Reads nothing
 * else; a cheap test before kpack_code_object_parse(). */
KPACK_API bool kpack_is_code_object(const void* data, size_t size);

/* Reads the code object in data[0, size). The result owns copies of
 * everything it reports (the input may be freed afterwards). On failure
 * *code_object is NULL; the statuses are listed above. */
KPACK_API kpack_error_t kpack_code_object_parse(
    const void* data, size_t size, kpack_code_object_t** code_object);

/* INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_code_object_get_info(
    const kpack_code_object_t* code_object, kpack_code_object_info_t* info);

/* Kernel `index` in the note's order. INVALID_ARGUMENT if a pointer is
 * NULL or index >= kernel_count. */
KPACK_API kpack_error_t
kpack_code_object_get_kernel(const kpack_code_object_t* code_object,
                             size_t index, kpack_co_kernel_t* kernel);

/* The whole metadata note as JSON text, NUL-terminated, in a malloc'ed
 * buffer the caller releases with free(); *json_len excludes the NUL.
 * `pretty` indents two spaces per level, one member per line; otherwise the
 * text is compact. MessagePack maps, arrays, strings, integers, booleans
 * and nil map to their JSON counterparts (bin as hex strings). A code
 * object without the note gives "null". A map key that is not a str
 * becomes the JSON text of the key, quoted.
 *   INVALID_ARGUMENT      a pointer is NULL
 *   MSGPACK_PARSE_FAILED  a map or array used as a key inside another map or
 *                         array key (each level would double the text)
 *   OUT_OF_MEMORY         allocation failed */
KPACK_API kpack_error_t
kpack_code_object_metadata_json(const kpack_code_object_t* code_object,
                                bool pretty, char** json, size_t* json_len);

/* NULL is a no-op. */
KPACK_API void kpack_code_object_free(kpack_code_object_t* code_object);

/* Whether name[0, len) is an AMDGCN processor this library knows by its
 * EF_AMDGPU_MACH value ("gfx90a", "gfx1100", "gfx9-generic"...), without
 * features. False for NULL. */
KPACK_API bool kpack_processor_is_known(const char* name, size_t len);

/* "unsupported", "any", "off" or "on"; NULL for other values. */
KPACK_API const char* kpack_feature_name(kpack_feature_t feature);

/* kpack_target_serves() (kpack_target.h) for a parsed code object, with
 * the generic version its e_flags carry: a generic code object fits a
 * member of its family from the generic version that covers it, and never
 * without a version (LLVM always writes one). False if a pointer is NULL. */
KPACK_API bool kpack_code_object_serves(const kpack_code_object_info_t* info,
                                        const char* arch);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_CODE_OBJECT_H */
