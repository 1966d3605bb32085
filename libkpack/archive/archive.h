/* SPDX-License-Identifier: MIT
 *
 * Internal layout of an open archive, shared by the modules that build it
 * (toc.c parses, frame_table.c indexes zstd frames, archive.c validates and
 * owns the handle) and those that read it (kernel_read.c, the loader, the
 * kernel cache). Everything here is immutable once kpack_open() returns,
 * except the decompression context pool, whose slots are atomic.
 */
#ifndef KPACK_ARCHIVE_H
#define KPACK_ARCHIVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rocm_kpack/kpack_ext.h"

/* The fixed header: magic, version, TOC offset, padded to 64 bytes. */
#define KP_HEADER_SIZE 16u
#define KP_PAYLOAD_START 64u

/* The TOC as an open archive keeps it (docs/mount.md, "What an open
 * archive keeps"): fixed-size entries in flat arrays and every name once in one
 * string table, so that a handle costs about 52 bytes per kernel plus its
 * binary names. Names are offsets into kp_toc.strings; arch and type names
 * are stored once per archive however many kernels share them, so two
 * equal arch or type names have the same offset. The msgpack bytes are not
 * kept; an entry's metadata map is (its bytes are returned by pointer). */

/* One (binary, arch) entry of the TOC: 24 bytes. */
typedef struct kp_kernel {
  uint64_t size;          /* decompressed, from the TOC or derived at open */
  uint32_t arch;          /* name offset in strings */
  uint32_t type;          /* name offset in strings */
  uint32_t ordinal;       /* index of its blob or frame */
  uint32_t has_size : 1;  /* original_size was present in the TOC */
  uint32_t metadata : 31; /* 1 + index in kp_toc.metadata; 0 if none */
} kp_kernel;

/* A binary owns kernels[first .. first + count), sorted by arch. */
typedef struct kp_binary {
  uint32_t name; /* offset in strings */
  uint32_t first;
  uint32_t count;
} kp_binary;

/* An entry's "metadata" map: its msgpack bytes in kp_toc.metadata_bytes. */
typedef struct kp_metadata {
  size_t offset;
  size_t size;
} kp_metadata;

/* Where ordinal i's stored bytes are: a raw blob or one zstd frame. */
typedef struct kp_extent {
  uint64_t offset;
  uint64_t size;
} kp_extent;

/* Kernels and names are counted in 32 bits, metadata indices in 31: a TOC
 * beyond these is refused with OUT_OF_MEMORY (it would need tens of GB). */
#define KP_TOC_MAX_KERNELS 0x7fffffffu
#define KP_TOC_MAX_STRINGS 0xffffffffu

/* The parsed TOC. */
typedef struct kp_toc {
  char* strings; /* NUL-terminated names, referred to by offset */
  size_t strings_size;
  const char* group_name; /* into strings, or a static "" */
  const char* family;
  const char** arches; /* gfx_arches in declaration order, into strings */
  size_t arch_count;
  kpack_compression_scheme_t scheme;
  kp_binary* binaries; /* sorted byte-wise by name */
  size_t binary_count;
  kp_kernel* kernels;
  size_t kernel_count;
  kp_metadata* metadata; /* entries that carry a map, few in practice */
  size_t metadata_count;
  uint8_t* metadata_bytes;
  kp_extent* extents; /* "blobs" for none; filled by frame_table.c for zstd */
  size_t extent_count;
  /* zstd: extents come from the TOC's frame-size table, unverified against
   * the region until each frame is read (kernel_read.c). */
  bool extents_from_table;
  /* zstd without a usable frame-size table: the region's size fields are
   * walked by the first call that needs an extent (kp_extents), not at
   * open; until then extents is NULL. */
  bool extents_deferred;
  bool has_region; /* zstd_offset and zstd_size were present */
  /* The string table holds the binary names in their sorted order, as
   * writers lay them out: kp_toc_find_binary() can find its own strings by
   * address. */
  bool names_by_address;
  uint64_t region_offset;
  uint64_t region_size;
} kp_toc;

/* The name at `offset` of the string table. */
static inline const char* kp_toc_str(const kp_toc* toc, uint32_t offset) {
  return toc->strings + offset;
}

/* Kernel k's metadata map (NULL, 0 when it has none). */
static inline void kp_toc_metadata(const kp_toc* toc, const kp_kernel* k,
                                   const uint8_t** data, size_t* size) {
  if (k->metadata == 0) {
    *data = NULL;
    *size = 0;
  } else {
    const kp_metadata* m = &toc->metadata[k->metadata - 1];
    *data = toc->metadata_bytes + m->offset;
    *size = m->size;
  }
}

/* A decompression context and a scratch buffer for compressed bytes; the
 * pool (kernel_read.c) hands each thread its own for the duration of one
 * read. The pool is the process's, not an archive's: idle readers number
 * at most KP_READER_SLOTS however many archives are open, so a mount of
 * 420 archives holds a few contexts rather than one per archive read. */
#define KP_READER_SLOTS 32
typedef struct kp_reader {
  void* dctx; /* ZSTD_DCtx* */
  void* scratch;
  size_t scratch_cap;
  /* Small frames read in file order (kernel_read.c): the archive they
   * were read from (its serial), where the last one ended, whether it
   * followed the one before (in the window or just past it), and a window
   * of the file read ahead, [window_at, window_at + window_len). */
  uint64_t serial;
  uint64_t next;
  bool in_order;
  uint8_t* window;
  uint64_t window_at;
  size_t window_len;
} kp_reader;

/* Which reads an archive serves from a mapping (mapping.c). */
typedef enum {
  KP_MAP_NEVER, /* ROCM_KPACK_MMAP=0: every read is a pread */
  KP_MAP_SMALL, /* the default: kernels stored in KP_MAP_READ_MAX or less;
                 * an archive of KP_WHOLE_MAX or less is read whole at open
                 * and every kernel copied from there */
  KP_MAP_ALL,   /* ROCM_KPACK_MMAP=1: every read */
} kp_map_mode;

struct kpack_archive {
  int fd;
  uint64_t serial; /* unique to this open in the process, never 0 */
  uint64_t file_size;
  char* path;
  kp_toc toc;
  /* The frame table walked from the region, published (atomically, once)
   * by the first read that found a frame's size field disagreeing with the
   * TOC's frame-size table. It serves only frames whose table extent
   * disagrees, so a kernel reads the same whichever kernels were read
   * before it. Freed by kpack_close. */
  kp_extent* walked;
  /* The whole file mapped read-only and shared, or NULL (mapping.c); only
   * ever read inside kp_map_guarded(). `sentinel` is the offset of the
   * file's last nonzero byte at open and `sentinel_value` that byte. */
  const uint8_t* map;
  size_t map_size;
  bool map_is_copy; /* map is the file read whole at open (malloc'd) */
  size_t sentinel;
  uint8_t sentinel_value;
  kp_map_mode map_mode;
};

/* toc.c: parses TOC bytes. Leaves extents empty for zstd archives, and
 * points *frame_sizes at the bytes of a zstd_frame_sizes bin inside `data`
 * (NULL, 0 if there is none) for kp_frame_table_load. On failure the toc is
 * freed and zeroed. */
kpack_error_t kp_toc_parse(const uint8_t* data, size_t size, kp_toc* toc,
                           const uint8_t** frame_sizes,
                           size_t* frame_sizes_len);
void kp_toc_free(kp_toc* toc);
/* Binary by name (binary search); NULL if absent. */
const kp_binary* kp_toc_find_binary(const kp_toc* toc, const char* name);
/* Kernel by binary and arch; NULL if absent. */
const kp_kernel* kp_toc_find_kernel(const kp_toc* toc, const char* binary,
                                    const char* arch);

/* frame_table.c: fills toc->extents for the zstd region, and for kernels
 * without original_size, the content size their frame declares. The TOC's
 * frame-size table (`sizes`, `sizes_len` bytes, may be NULL) is used when
 * its length and total match the region (docs/format.md); otherwise the
 * region's size fields are walked. */
kpack_error_t kp_frame_table_load(int fd, uint64_t file_size, kp_toc* toc,
                                  const uint8_t* sizes, size_t sizes_len);
/* Walks the region's size fields into a new array of toc->extent_count
 * extents (the caller frees it). INVALID_FORMAT if the region does not hold
 * that many frames; IO_ERROR if it cannot be read. */
kpack_error_t kp_frame_table_walk(int fd, const kp_toc* toc, kp_extent** out);
/* Called by a read that found a frame's size field disagreeing with the
 * frame-size table: walks the region and publishes the result as
 * archive->walked (once, whichever thread gets there first). SUCCESS if a
 * walked table is in place (or the extents were walked at open);
 * INVALID_FORMAT, IO_ERROR or OUT_OF_MEMORY if the walk failed. */
kpack_error_t kp_frame_table_repair(kpack_archive_t archive);
/* Makes sure archive->toc.extents is in place, walking the region if open
 * deferred it (once, whichever thread gets there first): what every entry
 * point that reads an extent calls first. INVALID_FORMAT, IO_ERROR or
 * OUT_OF_MEMORY if the walk failed (the next call walks again). */
kpack_error_t kp_extents(kpack_archive_t archive);

/* kernel_read.c: decompresses (or copies) one kernel into *dst, which holds
 * kernel->size bytes. If *dst is NULL a buffer is malloc'ed, only once the
 * stored bytes have been checked, so a lying TOC cannot force a huge
 * allocation; on failure such a buffer is freed and *dst is NULL again. */
kpack_error_t kp_read_kernel(kpack_archive_t archive, const kp_kernel* kernel,
                             void** dst);
/* Every open archive holds the reader pool; the last release frees the
 * idle readers, so a process that closes its archives holds none. */
void kp_reader_pool_hold(void);
void kp_reader_pool_release(void);
/* Idle readers in the pool now (for tests). */
size_t kp_reader_pool_idle(void);
/* INVALID_FORMAT when kernel k's size is more than its stored frame could
 * hold (zstd's largest expansion of that many bytes), judged before anything
 * is allocated for it; SUCCESS otherwise (always for `none`, whose blobs
 * open matched to their sizes). May read the frame's size field: IO_ERROR,
 * DECOMPRESSION_FAILED when it disagrees with the region. */
kpack_error_t kp_check_kernel_size(kpack_archive_t archive,
                                   const kp_kernel* kernel);
/* The stored zstd frame of kernel k, copied into *frame (grown with realloc
 * to *cap bytes as needed; *size receives its length) after the same
 * checks as a read, decompression included, so that only a frame that
 * reads back as the kernel is passed on. INVALID_ARGUMENT for a `none`
 * archive; otherwise the statuses of kp_read_kernel. */
kpack_error_t kp_copy_frame(kpack_archive_t archive, const kp_kernel* kernel,
                            void** frame, size_t* cap, size_t* size);

/* mapping.c: maps the archive when ROCM_KPACK_MMAP and the process's
 * budget allow it (a->fd and a->file_size set; `toc` holds the file's
 * last toc_size bytes). A failure to map leaves a->map NULL: reads then
 * use pread. */
void kp_map_open(kpack_archive_t a, const uint8_t* toc, size_t toc_size);
/* Whether open reads an archive of this size whole (ROCM_KPACK_MMAP unset
 * and at most KP_WHOLE_MAX bytes); kp_map_keep() then makes those bytes
 * (malloc'd) the archive's copy, which every read copies from and
 * kpack_close frees. */
bool kp_map_reads_whole(uint64_t file_size);
void kp_map_keep(kpack_archive_t a, uint8_t* whole);
void kp_map_close(kpack_archive_t a);
/* Whether this thread may read the archive's mapping (or copy): it has
 * one, and the thread does not block SIGBUS (a blocked SIGBUS raised by a
 * fault ends the process whatever the handler), checked at the thread's
 * first read. */
bool kp_map_usable(kpack_archive_t a);
/* Whether a read of `stored` bytes of the archive comes from its mapping. */
bool kp_map_serves(kpack_archive_t a, uint64_t stored);
/* Runs fn(a, context), which may read a->map, under the SIGBUS guard: a
 * fault in the mapping, or a sentinel that no longer reads as it did at
 * open, makes it IO_ERROR (errno 0). fn must not be left by a jump with
 * anything of its own to release: allocations it makes are published to
 * `context` before it reads the mapping again. Without a mapping, fn runs
 * unguarded. */
typedef kpack_error_t kp_map_fn(kpack_archive_t a, void* context);
kpack_error_t kp_map_guarded(kpack_archive_t a, kp_map_fn* fn, void* context);

/* entry_metadata.c: SUCCESS if data[0, size) is exactly one well-formed
 * MessagePack map that renders as JSON (nesting within KP_JSON_MAX_DEPTH);
 * INVALID_ARGUMENT otherwise, OUT_OF_MEMORY if checking it could not
 * allocate. */
kpack_error_t kp_metadata_check(const void* data, size_t size);

#endif /* KPACK_ARCHIVE_H */
