/* SPDX-License-Identifier: MIT
 *
 * The kpack runtime API: open archives of GPU code objects and load the code
 * object a HIP binary's HIPK metadata names. Signatures and status values
 * match ROCm's published kpack runtime; extensions live in kpack_ext.h.
 *
 * Ownership: strings returned by query functions belong to the archive and
 * live until kpack_close(). Kernel and code object buffers belong to the
 * caller and are released with kpack_free_kernel() / kpack_free_code_object().
 */
#ifndef ROCM_KPACK_H
#define ROCM_KPACK_H

#include "kpack_export.h"
#include "kpack_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Archives ---------------------------------------------------------- */

/* Opens the archive at `path`: validates the header, parses the TOC and,
 * for zstd archives, the frame table. Kernel payloads are not read.
 * On failure *archive is set to NULL.
 *   INVALID_ARGUMENT     path or archive is NULL
 *   FILE_NOT_FOUND       no file at path
 *   IO_ERROR             path is a directory or cannot be read; errno then
 *                        holds the system's reason (EISDIR for anything
 *                        but a regular file, EMFILE/ENFILE when out of
 *                        file descriptors, EACCES...), as after
 *                        FILE_NOT_FOUND (ENOENT, ENOTDIR)
 *   INVALID_FORMAT       bad magic, short file, TOC offset or a blob, region
 *                        or frame outside the file, an ordinal with no data,
 *                        a raw blob whose size differs from original_size
 *   UNSUPPORTED_VERSION  header version or format_version is not 1, or the
 *                        compression scheme is unknown
 *   MSGPACK_PARSE_FAILED TOC is not a well-formed map or a known field has
 *                        the wrong type
 *   OUT_OF_MEMORY        allocation failed */
KPACK_API kpack_error_t kpack_open(const char* path, kpack_archive_t* archive);

/* Releases the archive. NULL is a no-op. No other thread may be using it. */
KPACK_API void kpack_close(kpack_archive_t archive);

/* Number of architectures the archive declares (TOC "gfx_arches").
 *   INVALID_ARGUMENT  a pointer is NULL */
KPACK_API kpack_error_t kpack_get_architecture_count(kpack_archive_t archive,
                                                     size_t* count);

/* Architecture `index` in declaration order.
 *   INVALID_ARGUMENT  a pointer is NULL or index >= count */
KPACK_API kpack_error_t kpack_get_architecture(kpack_archive_t archive,
                                               size_t index, const char** arch);

/* Number of binaries with at least one kernel.
 *   INVALID_ARGUMENT  a pointer is NULL */
KPACK_API kpack_error_t kpack_get_binary_count(kpack_archive_t archive,
                                               size_t* count);

/* Binary `index`; binaries are sorted byte-wise by name.
 *   INVALID_ARGUMENT  a pointer is NULL or index >= count */
KPACK_API kpack_error_t kpack_get_binary(kpack_archive_t archive, size_t index,
                                         const char** binary);

/* Returns a fresh copy of the kernel for (binary_name, arch), decompressed.
 * Free it with kpack_free_kernel(). Safe to call from many threads on one
 * archive; calls run in parallel. A zero-length kernel yields a non-NULL
 * pointer and size 0.
 *   INVALID_ARGUMENT      a pointer is NULL
 *   KERNEL_NOT_FOUND      no such binary, or no kernel for that arch
 *   DECOMPRESSION_FAILED  corrupt frame, or size differs from the TOC
 *   IO_ERROR              the file could not be read (e.g. it shrank)
 *   OUT_OF_MEMORY         allocation failed */
KPACK_API kpack_error_t kpack_get_kernel(kpack_archive_t archive,
                                         const char* binary_name,
                                         const char* arch, void** kernel_data,
                                         size_t* kernel_size);

/* Frees a buffer from kpack_get_kernel(). NULL is a no-op. */
KPACK_API void kpack_free_kernel(void* kernel_data);

/* ---- Loader ------------------------------------------------------------ */

/* Called once per architecture; return false to stop. */
typedef bool (*kpack_arch_callback_t)(const char* arch, void* user_data);

/* Creates a loader cache. Reads the environment once, here:
 *   ROCM_KPACK_PATH         ':'-separated archives (or directories of
 *                           *.kpack) that replace every other search path
 *   ROCM_KPACK_PATH_PREFIX  ':'-separated, searched before embedded paths
 *   ROCM_KPACK_DISABLE      on: every load returns NOT_IMPLEMENTED
 *   ROCM_KPACK_DEBUG        on: one "kpack: " line per decision on stderr
 * A flag is on when set, non-empty and not starting with '0'.
 * Not thread-safe itself; the cache it returns is.
 *   INVALID_ARGUMENT  cache is NULL
 *   OUT_OF_MEMORY     allocation failed */
KPACK_API kpack_error_t kpack_cache_create(kpack_cache_t* cache);

/* Closes every archive the cache opened and frees it. NULL is a no-op.
 * No other thread may be using the cache. */
KPACK_API void kpack_cache_destroy(kpack_cache_t cache);

/* Finds the file mapped at `address_in_binary` (Linux: /proc/self/maps) and
 * writes its path to path_out; *offset_out (optional) receives the file
 * offset that corresponds to the address.
 *   INVALID_ARGUMENT        address or path_out is NULL, or path_out_size
 *                           cannot hold the path and its terminator
 *   PATH_DISCOVERY_FAILED   the address is not inside a file mapping
 *   NOT_IMPLEMENTED         unsupported platform */
KPACK_API kpack_error_t
kpack_discover_binary_path(const void* address_in_binary, char* path_out,
                           size_t path_out_size, size_t* offset_out);

/* Loads the code object that HIPK metadata names, for the first architecture
 * of arch_list (in priority order) that some archive provides.
 *
 * hipk_metadata is a msgpack map {kernel_name: str, kpack_search_paths:
 * [str, ...]}; search paths are relative to binary_path's directory and may
 * contain @GFXARCH@. The kernel looked up is "kernel_name#co_index". For each
 * requested arch, each compatible target (most specific first) and each
 * archive in path order that declares it, the kernel is tried; a miss falls
 * through to the next candidate. The result is freed with
 * kpack_free_code_object(). Safe from many threads on one cache.
 *   INVALID_ARGUMENT   a required pointer is NULL or arch_count is 0
 *   NOT_IMPLEMENTED    ROCM_KPACK_DISABLE was on at cache creation
 *   INVALID_METADATA   metadata is not a well-formed HIPK map
 *   ARCHIVE_NOT_FOUND  no search path led to an archive that opened
 *   ARCH_NOT_FOUND     no opened archive declares a compatible target
 *   KERNEL_NOT_FOUND   archives declared a target but none held the kernel
 *   OUT_OF_MEMORY      allocation failed
 * or the error that reading the last candidate kernel returned. */
KPACK_API kpack_error_t kpack_load_code_object(
    kpack_cache_t cache, const void* hipk_metadata, const char* binary_path,
    uint32_t co_index, const char* const* arch_list, size_t arch_count,
    void** code_object_out, size_t* code_object_size_out);

/* Frees a buffer from kpack_load_code_object(). NULL is a no-op. */
KPACK_API void kpack_free_code_object(void* code_object);

/* Opens the archive, calls `callback` for each declared architecture in
 * order until it returns false, and closes the archive.
 *   INVALID_ARGUMENT  archive_path or callback is NULL
 *   any kpack_open() error */
KPACK_API kpack_error_t kpack_enumerate_architectures(
    const char* archive_path, kpack_arch_callback_t callback, void* user_data);

#ifdef __cplusplus
}
#endif

#endif /* ROCM_KPACK_H */
