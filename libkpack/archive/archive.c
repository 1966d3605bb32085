/* SPDX-License-Identifier: MIT
 *
 * Opening and validating an archive, and the query functions over its TOC.
 * Opening reads the 16-byte header, the TOC and (zstd) the frame table; the
 * payload is only ever touched by kernel reads (kernel_read.c), from a
 * mapping or through pread (mapping.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/archive.h"
#include "common/byteorder.h"
#include "common/input.h"

/* Where kpack_archive_diagnose() wants the reason for a failed open:
 * `text` (NULL when no one asked, as in kpack_open()) of `size` bytes. */
typedef struct kp_why {
  char* text;
  size_t size;
} kp_why;

/* Returns `err` after writing the printf-formatted reason to `why`, if
 * anyone asked for it. */
static kpack_error_t __attribute__((format(printf, 3, 4)))
why_fail(kp_why* why, kpack_error_t err, const char* fmt, ...) {
  if (why != NULL && why->text != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->text, why->size, fmt, ap);
    va_end(ap);
  }
  return err;
}

/* The header from `whole` (the file's bytes, read at once) or read from fd
 * when NULL. */
static kpack_error_t read_header(int fd, const uint8_t* whole,
                                 uint64_t file_size, uint64_t* toc_offset,
                                 kp_why* why) {
  uint8_t header[KP_HEADER_SIZE];
  if (whole != NULL)
    memcpy(header, whole,
           file_size < KP_HEADER_SIZE ? (size_t)file_size : KP_HEADER_SIZE);
  if (file_size < KP_HEADER_SIZE &&
      ((whole == NULL &&
        kp_pread_all(fd, header, file_size, 0) != KPACK_SUCCESS) ||
       memcmp(header, KPACK_MAGIC,
              file_size < KPACK_MAGIC_SIZE ? file_size : KPACK_MAGIC_SIZE) !=
           0))
    return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                    "no kpack magic at offset 0 (not a kpack archive)");
  if (file_size < KP_HEADER_SIZE)
    return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                    "header (%d bytes) extends past end of file (%" PRIu64
                    " bytes): truncated?",
                    KP_HEADER_SIZE, file_size);
  kpack_error_t err = whole != NULL
                          ? KPACK_SUCCESS
                          : kp_pread_all(fd, header, sizeof(header), 0);
  if (err != KPACK_SUCCESS)
    return err;
  if (memcmp(header, KPACK_MAGIC, KPACK_MAGIC_SIZE) != 0)
    return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                    "no kpack magic at offset 0 (not a kpack archive)");
  if (kp_load_le(header + 4, 4) != KPACK_CURRENT_VERSION)
    return why_fail(why, KPACK_ERROR_UNSUPPORTED_VERSION,
                    "format version %" PRIu64 ", this library reads %d",
                    kp_load_le(header + 4, 4), KPACK_CURRENT_VERSION);
  *toc_offset = kp_load_le(header + 8, 8);
  if (*toc_offset < KP_HEADER_SIZE)
    return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                    "table of contents offset 0x%" PRIx64
                    " lies inside the header",
                    *toc_offset);
  if (*toc_offset >= file_size)
    return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                    "table of contents at 0x%" PRIx64
                    " starts past end of file (%" PRIu64 " bytes): truncated?",
                    *toc_offset, file_size);
  return KPACK_SUCCESS;
}

/* Ties every kernel to stored bytes inside the file. For raw blobs the TOC
 * size must match the blob; zstd sizes are checked as frames decompress. */
static kpack_error_t bind_blobs(kp_toc* toc, uint64_t file_size, kp_why* why) {
  for (size_t i = 0; i < toc->extent_count; i++) {
    const kp_extent* e = &toc->extents[i];
    if (e->offset > file_size || e->size > file_size - e->offset)
      return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                      "blob %zu at 0x%" PRIx64 " (%" PRIu64
                      " bytes) extends past end of file (%" PRIu64
                      " bytes): truncated?",
                      i, e->offset, e->size, file_size);
  }
  for (size_t i = 0; i < toc->kernel_count; i++) {
    kp_kernel* k = &toc->kernels[i];
    if (k->ordinal >= toc->extent_count)
      return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                      "kernel %zu names blob %" PRIu32 " of %zu", i, k->ordinal,
                      toc->extent_count);
    uint64_t stored = toc->extents[k->ordinal].size;
    if (k->has_size && k->size != stored)
      return why_fail(why, KPACK_ERROR_INVALID_FORMAT,
                      "kernel %zu: original_size %" PRIu64
                      " but its blob holds %" PRIu64 " bytes",
                      i, k->size, stored);
    k->size = stored;
  }
  return KPACK_SUCCESS;
}

/* Archives are prefetched this many at a time: their descriptors are
 * held from the first pass to the second. */
#define KP_PREFETCH_BATCH 64

KPACK_API void kpack_prefetch(const char* const* paths, size_t count) {
  int fds[KP_PREFETCH_BATCH];
  for (size_t at = 0; paths != NULL && at < count; at += KP_PREFETCH_BATCH) {
    size_t n = count - at < KP_PREFETCH_BATCH ? count - at : KP_PREFETCH_BATCH;
    /* Every header page first, so that the reads below wait for one
     * round trip to the disk, not one each. */
    for (size_t i = 0; i < n; i++) {
      fds[i] = paths[at + i] == NULL
                   ? -1
                   : open(paths[at + i],
                          O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
      if (fds[i] >= 0)
        (void)posix_fadvise(fds[i], 0, KP_HEADER_SIZE, POSIX_FADV_WILLNEED);
    }
    for (size_t i = 0; i < n; i++) {
      struct stat st;
      uint64_t toc_offset;
      if (fds[i] < 0)
        continue;
      if (fstat(fds[i], &st) == 0 && S_ISREG(st.st_mode) &&
          read_header(fds[i], NULL, (uint64_t)st.st_size, &toc_offset, NULL) ==
              KPACK_SUCCESS)
        (void)posix_fadvise(fds[i], (off_t)toc_offset,
                            (off_t)((uint64_t)st.st_size - toc_offset),
                            POSIX_FADV_WILLNEED);
      close(fds[i]);
    }
  }
}

static kpack_error_t open_archive(const char* path, kpack_archive_t* archive,
                                  kp_why* why) {
  kpack_error_t err;
  uint8_t *toc_bytes = NULL, *whole = NULL;
  const uint8_t* frame_sizes;
  size_t frame_sizes_len;
  uint64_t toc_offset;
  struct kpack_archive* a;

  if (archive != NULL)
    *archive = NULL;
  if (path == NULL || archive == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  a = calloc(1, sizeof(*a));
  if (a == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  a->fd = -1;
  static atomic_uint_fast64_t serials;
  a->serial = atomic_fetch_add(&serials, 1) + 1;
  kp_reader_pool_hold(); /* released by kpack_close, failure included */

  kp_input file;
  if ((err = kp_input_open(path, &file)))
    goto fail;
  a->fd = file.fd;
  a->file_size = file.size;
  /* A small archive is read whole, header, TOC and kernels in one read,
   * and its kernels are copied from there (mapping.c). */
  if (kp_map_reads_whole(a->file_size)) {
    if ((whole = malloc((size_t)a->file_size + 1)) == NULL) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto fail;
    }
    if ((err = kp_pread_all(a->fd, whole, (size_t)a->file_size, 0)))
      goto fail;
  }
  if ((err = read_header(a->fd, whole, a->file_size, &toc_offset, why)))
    goto fail;
  size_t toc_size = (size_t)(a->file_size - toc_offset);
  a->path = strdup(path);
  if (whole == NULL)
    toc_bytes = malloc(toc_size);
  if ((whole == NULL && toc_bytes == NULL) || a->path == NULL) {
    err = KPACK_ERROR_OUT_OF_MEMORY;
    goto fail;
  }
  if (whole != NULL)
    toc_bytes = whole + toc_offset;
  else if ((err = kp_pread_all(a->fd, toc_bytes, toc_size, toc_offset)))
    goto fail;
  if ((err = kp_toc_parse(toc_bytes, toc_size, &a->toc, &frame_sizes,
                          &frame_sizes_len))) {
    /* The TOC runs to the end of the file: a cut file cuts it. */
    if (err == KPACK_ERROR_INVALID_FORMAT ||
        err == KPACK_ERROR_MSGPACK_PARSE_FAILED)
      err = why_fail(why, err,
                     "table of contents at 0x%" PRIx64
                     " (%zu bytes to end of file, %" PRIu64
                     " bytes) does not parse: truncated?",
                     toc_offset, toc_size, a->file_size);
    goto fail;
  }
  if (a->toc.scheme == KPACK_COMPRESSION_NOOP) {
    err = bind_blobs(&a->toc, a->file_size, why);
  } else {
    err = kp_frame_table_load(a->fd, a->file_size, &a->toc, frame_sizes,
                              frame_sizes_len);
    if (err == KPACK_ERROR_INVALID_FORMAT)
      err = why_fail(why, err,
                     "zstd region at 0x%" PRIx64 " (%" PRIu64
                     " bytes) does not hold the frames its table of "
                     "contents lists",
                     a->toc.region_offset, a->toc.region_size);
  }
  if (err != KPACK_SUCCESS)
    goto fail;
  if (whole != NULL) {
    kp_map_keep(a, whole);
  } else {
    kp_map_open(a, toc_bytes, toc_size);
    free(toc_bytes);
  }
  *archive = a;
  return KPACK_SUCCESS;

fail:;
  /* Callers tell a transient failure (EMFILE...) from a permanent one by
   * errno, so the cleanup must not clobber it. */
  int saved_errno = errno;
  if (whole == NULL)
    free(toc_bytes);
  free(whole);
  kpack_close(a);
  errno = saved_errno;
  return err;
}

KPACK_API kpack_error_t kpack_open(const char* path, kpack_archive_t* archive) {
  return open_archive(path, archive, NULL);
}

KPACK_API kpack_error_t kpack_archive_diagnose(const char* path, char* why,
                                               size_t why_size) {
  kpack_archive_t archive;
  if (path == NULL || why == NULL || why_size == 0)
    return KPACK_ERROR_INVALID_ARGUMENT;
  why[0] = '\0';
  kp_why w = {why, why_size};
  kpack_error_t err = open_archive(path, &archive, &w);
  kpack_close(archive);
  return err;
}

KPACK_API void kpack_close(kpack_archive_t archive) {
  if (archive == NULL)
    return;
  kp_reader_pool_release();
  kp_map_close(archive);
  kp_toc_free(&archive->toc);
  free(archive->walked);
  if (archive->fd >= 0)
    close(archive->fd);
  free(archive->path);
  free(archive);
}

KPACK_API kpack_error_t kpack_get_architecture_count(kpack_archive_t archive,
                                                     size_t* count) {
  if (archive == NULL || count == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *count = archive->toc.arch_count;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_architecture(kpack_archive_t archive,
                                               size_t index,
                                               const char** arch) {
  if (archive == NULL || arch == NULL || index >= archive->toc.arch_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *arch = archive->toc.arches[index];
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_binary_count(kpack_archive_t archive,
                                               size_t* count) {
  if (archive == NULL || count == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *count = archive->toc.binary_count;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_binary(kpack_archive_t archive, size_t index,
                                         const char** binary) {
  if (archive == NULL || binary == NULL || index >= archive->toc.binary_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *binary = kp_toc_str(&archive->toc, archive->toc.binaries[index].name);
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_group_name(kpack_archive_t archive,
                                             const char** name) {
  if (archive == NULL || name == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *name = archive->toc.group_name;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_gfx_arch_family(kpack_archive_t archive,
                                                  const char** family) {
  if (archive == NULL || family == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *family = archive->toc.family;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_compression_scheme(
    kpack_archive_t archive, kpack_compression_scheme_t* scheme) {
  if (archive == NULL || scheme == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *scheme = archive->toc.scheme;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_kernel_count(kpack_archive_t archive,
                                               size_t* count) {
  if (archive == NULL || count == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *count = archive->toc.kernel_count;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_kernel_info(kpack_archive_t archive,
                                              const char* binary_name,
                                              const char* arch,
                                              kpack_kernel_info_t* info) {
  if (archive == NULL || binary_name == NULL || arch == NULL || info == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_kernel* k = kp_toc_find_kernel(&archive->toc, binary_name, arch);
  if (k == NULL)
    return KPACK_ERROR_KERNEL_NOT_FOUND;
  kpack_error_t err = kp_extents(archive);
  if (err != KPACK_SUCCESS)
    return err;
  const kp_extent* e = &archive->toc.extents[k->ordinal];
  info->size = k->size;
  info->stored_size = e->size;
  info->offset = e->offset;
  info->ordinal = k->ordinal;
  info->type = kp_toc_str(&archive->toc, k->type);
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_binary_arch_count(kpack_archive_t archive,
                                                    const char* binary_name,
                                                    size_t* count) {
  if (archive == NULL || binary_name == NULL || count == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_binary* b = kp_toc_find_binary(&archive->toc, binary_name);
  if (b == NULL)
    return KPACK_ERROR_KERNEL_NOT_FOUND;
  *count = b->count;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_binary_arch(kpack_archive_t archive,
                                              const char* binary_name,
                                              size_t index, const char** arch) {
  if (archive == NULL || binary_name == NULL || arch == NULL)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_binary* b = kp_toc_find_binary(&archive->toc, binary_name);
  if (b == NULL)
    return KPACK_ERROR_KERNEL_NOT_FOUND;
  if (index >= b->count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *arch =
      kp_toc_str(&archive->toc, archive->toc.kernels[b->first + index].arch);
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_binary_arch_count_at(kpack_archive_t archive,
                                                       size_t binary_index,
                                                       size_t* count) {
  if (archive == NULL || count == NULL ||
      binary_index >= archive->toc.binary_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  *count = archive->toc.binaries[binary_index].count;
  return KPACK_SUCCESS;
}

KPACK_API kpack_error_t kpack_get_kernel_entry(kpack_archive_t archive,
                                               size_t binary_index,
                                               size_t arch_index,
                                               kpack_kernel_entry_t* entry) {
  if (archive == NULL || entry == NULL ||
      binary_index >= archive->toc.binary_count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_toc* toc = &archive->toc;
  const kp_binary* b = &toc->binaries[binary_index];
  if (arch_index >= b->count)
    return KPACK_ERROR_INVALID_ARGUMENT;
  const kp_kernel* k = &toc->kernels[b->first + arch_index];
  kpack_error_t err = kp_extents(archive);
  if (err != KPACK_SUCCESS)
    return err;
  const kp_extent* e = &toc->extents[k->ordinal];
  const uint8_t* map;
  entry->binary = kp_toc_str(toc, b->name);
  entry->arch = kp_toc_str(toc, k->arch);
  entry->info.size = k->size;
  entry->info.stored_size = e->size;
  entry->info.offset = e->offset;
  entry->info.ordinal = k->ordinal;
  entry->info.type = kp_toc_str(toc, k->type);
  kp_toc_metadata(toc, k, &map, &entry->metadata_size);
  entry->metadata = map;
  return KPACK_SUCCESS;
}

KPACK_API const char* kpack_get_path(kpack_archive_t archive) {
  return archive != NULL ? archive->path : NULL;
}
