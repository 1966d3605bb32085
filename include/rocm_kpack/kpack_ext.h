/* SPDX-License-Identifier: MIT
 *
 * libkpack extensions beyond ROCm's published API: kernel information
 * without decompression, decompression into caller memory, per-binary
 * architecture lists, TOC header getters, error names and a streaming
 * archive writer. Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_EXT_H
#define ROCM_KPACK_EXT_H

#include "kpack.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors -------------------------------------------------------------- */

/* The name of a status, e.g. "KPACK_ERROR_KERNEL_NOT_FOUND"; never NULL.
 * Unknown values yield "KPACK_ERROR_UNKNOWN". */
KPACK_API const char* kpack_error_string(kpack_error_t err);

/* The TOC spelling of a scheme: "none" or "zstd-per-kernel"; NULL if
 * unknown. */
KPACK_API const char* kpack_compression_scheme_name(
    kpack_compression_scheme_t scheme);

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

/* Describes one kernel from the TOC alone; reads nothing from the payload.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   KERNEL_NOT_FOUND  no such binary or arch */
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

/* Path the archive was opened from, owned by the archive. */
KPACK_API const char* kpack_get_path(kpack_archive_t archive);

/* ---- Writer -------------------------------------------------------------- */

/* Streams an archive to disk: kpack_writer_create(), kpack_writer_add_kernel()
 * for each kernel, then kpack_writer_finish() or kpack_writer_abort(). Data
 * goes to a temporary file beside the destination, renamed over it only by a
 * successful finish, so readers never see a partial archive. The output is a
 * function of the options and the sequence of added kernels alone:
 * identical inputs give identical bytes, whatever the thread count. */
typedef struct kpack_writer kpack_writer_t;

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
} kpack_writer_options_t;

/* Starts an archive at `path` (created or replaced at finish).
 *   INVALID_ARGUMENT  a pointer is NULL, unknown scheme or bad level
 *   IO_ERROR          the temporary file cannot be created
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_writer_create(
    const char* path, const kpack_writer_options_t* options,
    kpack_writer_t** writer);

/* Adds one kernel; the data is copied (or compressed) before this returns
 * or is queued to a compression thread, so the caller may reuse it.
 * Kernels get ordinals in the order they are added.
 *   INVALID_ARGUMENT  NULL pointer, empty name, a name with an embedded NUL
 *                     or a (binary, arch) pair already added
 *   IO_ERROR, OUT_OF_MEMORY, or an error left by an earlier failure */
KPACK_API kpack_error_t kpack_writer_add_kernel(kpack_writer_t* writer,
                                                const char* binary_name,
                                                const char* arch,
                                                const void* data, size_t size);

/* Writes the TOC and header, syncs and renames the file into place, then
 * frees the writer (also on failure, after removing the temporary file). */
KPACK_API kpack_error_t kpack_writer_finish(kpack_writer_t* writer);

/* Removes the temporary file and frees the writer. NULL is a no-op. */
KPACK_API void kpack_writer_abort(kpack_writer_t* writer);

/* ---- Loader search introspection ----------------------------------------- */

/* The loader reports each step of its search as an event, in order, to the
 * trace hook of the cache (and, with ROCM_KPACK_DEBUG, as a "kpack: " line
 * on stderr). `kpack resolve` uses this to explain a failed load. */
typedef enum kpack_trace_kind {
  KPACK_TRACE_LOAD,    /* a search starts: kernel, path = binary path */
  KPACK_TRACE_PATH,    /* a candidate path: path, source, exists,
                          is_directory (a directory's *.kpack follow) */
  KPACK_TRACE_ARCHIVE, /* an existing candidate: path (canonical), status of
                          its open (a failure is remembered, not retried);
                          arches on success; opened if this call opened it
                          rather than finding it in the cache */
  KPACK_TRACE_TARGET,  /* a compatible target is searched: arch, target */
  KPACK_TRACE_KERNEL,  /* an archive declaring `target` was tried: path,
                          arch, target, kernel; status SUCCESS (hit),
                          KERNEL_NOT_FOUND (miss) or the read error */
  KPACK_TRACE_RESULT,  /* the call returns `status`; on success also path,
                          arch, target and size of the code object */
} kpack_trace_kind_t;

/* One event. Fields a kind does not use are NULL, 0 or false. Every pointer
 * is valid only during the callback. */
typedef struct kpack_trace_event {
  kpack_trace_kind_t kind;
  kpack_error_t status;
  const char* kernel; /* "kernel_name#co_index"; NULL before it is known */
  const char* path;
  const char* source; /* PATH: "ROCM_KPACK_PATH", "ROCM_KPACK_PATH_PREFIX"
                         or "embedded" */
  const char* arch;   /* the requested arch_list entry */
  const char* target; /* the compatible target tried for it */
  const char* const* arches; /* ARCHIVE: declared gfx_arches, in order */
  size_t arch_count;
  size_t size;
  bool exists;
  bool is_directory;
  bool opened;
} kpack_trace_event_t;

typedef void (*kpack_trace_fn_t)(const kpack_trace_event_t* event,
                                 void* user_data);

/* Installs (or with NULL removes) the cache's trace hook. Call it before
 * other threads use the cache; the hook itself is then called from every
 * thread that loads through the cache, possibly at the same time.
 *   INVALID_ARGUMENT  cache is NULL */
KPACK_API kpack_error_t kpack_cache_set_trace(kpack_cache_t cache,
                                              kpack_trace_fn_t trace,
                                              void* user_data);

/* kpack_load_code_object() with the HIPK fields given directly, for tools
 * that know a kernel name and its search paths (search_paths may be empty
 * when ROCM_KPACK_PATH supplies the archives). Same search, same statuses,
 * same events; arguments are checked, then ROCM_KPACK_DISABLE.
 *   INVALID_ARGUMENT  a required pointer (kernel_name, binary_path,
 *                     arch_list and its entries, search_paths when the
 *                     count is not 0, the outputs) is NULL, or arch_count
 *                     is 0 */
KPACK_API kpack_error_t kpack_resolve_code_object(
    kpack_cache_t cache, const char* kernel_name,
    const char* const* search_paths, size_t search_path_count,
    const char* binary_path, uint32_t co_index, const char* const* arch_list,
    size_t arch_count, void** code_object_out, size_t* code_object_size_out);

/* ---- Shared decompressed-kernel cache ------------------------------------ */
/* (kernel cache section: kpack_kcache_*) */

/* A byte-budgeted cache of decompressed kernels, shared by any number of
 * threads and archives (kpackfs serves every file through one). Acquiring a
 * kernel finds it or decompresses it, and pins it until it is released:
 * pinned kernels are never evicted and their bytes never move. Released
 * kernels stay cached in LRU order and are evicted once the bytes held
 * exceed the capacity. Concurrent first acquires of one kernel decompress it
 * once; the other callers wait for that result (success or error). A kernel
 * larger than the capacity is still served, and dropped at its last release.
 * Entries are keyed by archive handle: the cache never opens or closes an
 * archive, and an archive must outlive its entries (kpack_kcache_purge()).
 * Every function is thread-safe. */
typedef struct kpack_kcache kpack_kcache_t;

/* One pinned kernel, owned by the cache; valid until released. */
typedef struct kpack_kcache_entry kpack_kcache_entry_t;

typedef struct kpack_kcache_stats {
  uint64_t capacity;           /* byte budget */
  uint64_t bytes;              /* decompressed bytes held, pinned or not */
  uint64_t entries;            /* kernels held or being decompressed */
  uint64_t pinned;             /* kernels held with at least one pin */
  uint64_t hits;               /* acquires that found the kernel cached or
                                  being decompressed by another caller */
  uint64_t misses;             /* acquires that started a decompression */
  uint64_t waits;              /* hits that waited for another caller's
                                  decompression of the same kernel */
  uint64_t evictions;          /* kernels dropped to honour the budget */
  uint64_t decompressions;     /* decompressions that succeeded */
  uint64_t bytes_decompressed; /* bytes those produced */
  uint64_t failures;           /* decompressions that failed */
} kpack_kcache_stats_t;

/* Creates a cache that keeps at most `capacity` bytes of released kernels
 * (0 keeps none). Free it with kpack_kcache_destroy().
 *   INVALID_ARGUMENT  cache is NULL
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_kcache_create(uint64_t capacity,
                                            kpack_kcache_t** cache);

/* Frees the cache and every kernel it holds. NULL is a no-op. Every entry
 * must have been released and no other thread may be using the cache. */
KPACK_API void kpack_kcache_destroy(kpack_kcache_t* cache);

/* Finds the kernel for (binary_name, arch) of `archive`, decompressing it on
 * a miss, and pins it. *data (non-NULL, even for an empty kernel) and *size
 * stay valid until kpack_kcache_release(cache, *entry); the bytes belong to
 * the cache and must not be written. The lock is not held while a kernel
 * decompresses. On failure *entry and *data are NULL and nothing is cached.
 *   INVALID_ARGUMENT      a pointer is NULL
 *   KERNEL_NOT_FOUND      no such binary or arch in the archive
 *   DECOMPRESSION_FAILED  corrupt frame or size mismatch
 *   IO_ERROR              the archive could not be read (e.g. it shrank)
 *   OUT_OF_MEMORY         allocation failed
 * Callers that waited for another caller's decompression get its status. */
KPACK_API kpack_error_t kpack_kcache_acquire(
    kpack_kcache_t* cache, kpack_archive_t archive, const char* binary_name,
    const char* arch, kpack_kcache_entry_t** entry, const void** data,
    size_t* size);

/* Drops one pin taken by kpack_kcache_acquire(). The kernel stays cached if
 * the budget allows. A NULL entry is a no-op. */
KPACK_API void kpack_kcache_release(kpack_kcache_t* cache,
                                    kpack_kcache_entry_t* entry);

/* Forgets the kernels of `archive` (every archive if NULL): released ones are
 * freed now, pinned ones at their last release, and later acquires
 * decompress afresh. Call it before closing an archive the cache has seen.
 * NULL cache is a no-op. */
KPACK_API void kpack_kcache_purge(kpack_kcache_t* cache,
                                  kpack_archive_t archive);

/* A consistent snapshot of the counters.
 *   INVALID_ARGUMENT  a pointer is NULL */
KPACK_API kpack_error_t kpack_kcache_get_stats(kpack_kcache_t* cache,
                                               kpack_kcache_stats_t* stats);

/* ---- Clang offload bundles (HIP fat binaries) ------------------------------ */

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
 * bundle. INVALID_ARGUMENT if a pointer is NULL or index >= entry_count. */
KPACK_API kpack_error_t kpack_bundle_get_entry(const kpack_bundle_t* bundle,
                                               size_t index,
                                               kpack_bundle_entry_t* entry);

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

/* Reads the ELF's section table and its .hip_fatbin section and locates the
 * bundles: through the wrappers in .hipFatBinSegment when present (a wrapper
 * address of 0 in the file is taken from its RELATIVE or ABS64 relocation on
 * x86-64 and AArch64), else by walking the bundles that follow each other,
 * zero-padded, in .hip_fatbin. An ELF without .hip_fatbin opens with no
 * bundles. Bundles are parsed by kpack_fatbin_get_bundle(), not here.
 *   INVALID_ARGUMENT  a pointer is NULL
 *   FILE_NOT_FOUND    no file at path
 *   IO_ERROR          the file cannot be read
 *   INVALID_FORMAT    not a 64-bit little-endian ELF, a section outside the
 *                     file, a bad wrapper or a wrapper address outside
 *                     .hip_fatbin, garbage between walked bundles
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_fatbin_open(const char* path,
                                          kpack_fatbin_t** fatbin);

/* The same for an ELF image in memory, which must outlive the handle (the
 * entry point for fuzzing). */
KPACK_API kpack_error_t kpack_fatbin_open_memory(const void* data,
                                                 size_t size,
                                                 kpack_fatbin_t** fatbin);

/* INVALID_ARGUMENT if a pointer is NULL. */
KPACK_API kpack_error_t kpack_fatbin_get_info(const kpack_fatbin_t* fatbin,
                                              kpack_fatbin_info_t* info);

/* Parses bundle `index` (co_index) as kpack_bundle_parse() does. The bundle
 * may point into the fatbin and must be freed before it is closed. Safe to
 * call from several threads on one handle.
 *   INVALID_ARGUMENT  a pointer is NULL or index >= bundle_count
 *   any kpack_bundle_parse() error */
KPACK_API kpack_error_t kpack_fatbin_get_bundle(const kpack_fatbin_t* fatbin,
                                                size_t index,
                                                kpack_bundle_t** bundle);

/* NULL is a no-op. */
KPACK_API void kpack_fatbin_close(kpack_fatbin_t* fatbin);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_EXT_H */
