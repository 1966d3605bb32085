/* SPDX-License-Identifier: MIT
 *
 * Regression tests for robustness bugs found by fuzzing and review (see
 * tests/README.md): each archive here is built byte by byte so that it holds
 * exactly the hostile detail that once crashed, hung or over-allocated.
 */
#include <fcntl.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "support.h"

/* ---- hand-built archives
 * -----------------------------------------------------
 */

/* Header, `payload` at offset 64, then the TOC packed in `toc`. */
static char* write_raw(const char* name, const void* payload, size_t size,
                       const msgpack_sbuffer* toc) {
  uint64_t toc_offset = 64 + size;
  size_t total = (size_t)toc_offset + toc->size;
  uint8_t* file = calloc(1, total);
  assert_non_null(file);
  memcpy(file, "KPAK", 4);
  file[4] = 1;
  for (int i = 0; i < 8; i++)
    file[8 + i] = (uint8_t)(toc_offset >> (8 * i));
  memcpy(file + 64, payload, size);
  memcpy(file + toc_offset, toc->data, toc->size);
  char* path = kt_path(kt_tmp, name);
  kt_write_file(path, file, total);
  free(file);
  return path;
}

static void pack_str(msgpack_packer* pk, const char* s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

/* {type: hsaco, ordinal: N[, original_size: S]} */
static void pack_entry(msgpack_packer* pk, uint32_t ordinal, bool has_size,
                       uint64_t size) {
  msgpack_pack_map(pk, has_size ? 3 : 2);
  pack_str(pk, "type");
  pack_str(pk, "hsaco");
  pack_str(pk, "ordinal");
  msgpack_pack_uint32(pk, ordinal);
  if (has_size) {
    pack_str(pk, "original_size");
    msgpack_pack_uint64(pk, size);
  }
}

/* A zstd-per-kernel archive holding one frame for "lib/a.so#0" / gfx90a. */
static char* write_zstd_archive(const char* name, const void* frame,
                                size_t frame_size, bool has_size,
                                uint64_t size) {
  size_t region = 8 + frame_size;
  uint8_t* payload = malloc(region);
  assert_non_null(payload);
  payload[0] = 1; /* frame count, little-endian u32 */
  payload[1] = payload[2] = payload[3] = 0;
  for (int i = 0; i < 4; i++)
    payload[4 + i] = (uint8_t)(frame_size >> (8 * i));
  memcpy(payload + 8, frame, frame_size);

  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 5);
  pack_str(&pk, "format_version");
  msgpack_pack_uint8(&pk, 1);
  pack_str(&pk, "compression_scheme");
  pack_str(&pk, "zstd-per-kernel");
  pack_str(&pk, "toc");
  msgpack_pack_map(&pk, 1);
  pack_str(&pk, "lib/a.so#0");
  msgpack_pack_map(&pk, 1);
  pack_str(&pk, "gfx90a");
  pack_entry(&pk, 0, has_size, size);
  pack_str(&pk, "zstd_offset");
  msgpack_pack_uint64(&pk, 64);
  pack_str(&pk, "zstd_size");
  msgpack_pack_uint64(&pk, region);
  char* path = write_raw(name, payload, region, &buf);
  msgpack_sbuffer_destroy(&buf);
  free(payload);
  return path;
}

/* A real frame for `size` pattern bytes; content size optional. */
static void* make_frame(size_t size, bool declare_size, size_t* frame_size) {
  void* data = kt_pattern(size, 9);
  size_t cap = ZSTD_compressBound(size);
  void* frame = malloc(cap);
  assert_non_null(frame);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  assert_non_null(cctx);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, declare_size ? 1 : 0);
  /* The streaming API leaves the size undeclared unless it is pledged. */
  ZSTD_inBuffer in = {data, size, 0};
  ZSTD_outBuffer out = {frame, cap, 0};
  assert_int_equal(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end), 0);
  ZSTD_freeCCtx(cctx);
  free(data);
  *frame_size = out.pos;
  return frame;
}

/* ---- archive core (libkpack/toc.c, archive.c, kernel_read.c)
 * -----------------
 */

/* Found by fuzz_archive: a binary whose arch map is empty made toc.c do
 * arithmetic on a NULL kernel array (UBSan) and was listed although the
 * header promises only binaries with a kernel. */
static void test_binary_without_arches_is_not_listed(void** state) {
  (void)state;
  uint8_t blob[100];
  memset(blob, 0x5a, sizeof(blob));
  msgpack_sbuffer buf;
  msgpack_packer pk;
  msgpack_sbuffer_init(&buf);
  msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 3);
  pack_str(&pk, "compression_scheme");
  pack_str(&pk, "none");
  pack_str(&pk, "toc");
  msgpack_pack_map(&pk, 3);
  pack_str(&pk, "lib/a.so#0");
  msgpack_pack_map(&pk, 0);
  pack_str(&pk, "lib/b.so#0");
  msgpack_pack_map(&pk, 1);
  pack_str(&pk, "gfx90a");
  pack_entry(&pk, 0, true, sizeof(blob));
  pack_str(&pk, "lib/c.so#0");
  msgpack_pack_map(&pk, 0);
  pack_str(&pk, "blobs");
  msgpack_pack_array(&pk, 1);
  msgpack_pack_map(&pk, 2);
  pack_str(&pk, "offset");
  msgpack_pack_uint64(&pk, 64);
  pack_str(&pk, "size");
  msgpack_pack_uint64(&pk, sizeof(blob));
  char* path = write_raw("empty-binary.kpack", blob, sizeof(blob), &buf);
  msgpack_sbuffer_destroy(&buf);

  kpack_archive_t a;
  size_t count;
  const char* name;
  void* data;
  size_t size;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_binary_count(a, &count), KPACK_SUCCESS);
  assert_int_equal(count, 1);
  assert_int_equal(kpack_get_binary(a, 0, &name), KPACK_SUCCESS);
  assert_string_equal(name, "lib/b.so#0");
  assert_int_equal(kpack_get_binary_arch_count(a, "lib/a.so#0", &count),
                   KPACK_ERROR_KERNEL_NOT_FOUND);
  assert_int_equal(kpack_get_kernel(a, "lib/b.so#0", "gfx90a", &data, &size),
                   KPACK_SUCCESS);
  assert_int_equal(size, sizeof(blob));
  assert_memory_equal(data, blob, sizeof(blob));
  kpack_free_kernel(data);
  kpack_close(a);
  free(path);
}

typedef struct fifo_open {
  const char* path;
  kpack_error_t err;
  volatile int done; /* written by the opener, polled by the test */
} fifo_open;

static void* open_fifo_thread(void* p) {
  fifo_open* f = p;
  kpack_archive_t a;
  f->err = kpack_open(f->path, &a);
  kpack_close(a);
  __atomic_store_n(&f->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Found by review while fuzzing the loader: open() of a FIFO blocks until a
 * writer appears, so an archive path (or a *.kpack entry of a directory in
 * ROCM_KPACK_PATH) naming one hung kpack_open() forever. */
static void test_fifo_is_io_error_without_blocking(void** state) {
  (void)state;
  char* path = kt_path(kt_tmp, "fifo.kpack");
  assert_int_equal(mkfifo(path, 0600), 0);
  fifo_open f = {path, KPACK_SUCCESS, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, open_fifo_thread, &f), 0);
  /* Generous (valgrind is slow); a hang would be forever. */
  bool returned = false;
  for (int i = 0; i < 200 && !returned; i++) {
    returned = __atomic_load_n(&f.done, __ATOMIC_ACQUIRE) != 0;
    if (!returned) {
      struct timespec ts = {0, 50 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  if (!returned) {
    /* Release the blocked open() so that the thread can be joined. */
    int w = open(path, O_WRONLY | O_NONBLOCK);
    pthread_join(t, NULL);
    if (w >= 0)
      close(w);
  } else {
    pthread_join(t, NULL);
  }
  assert_true(returned);
  assert_int_equal(f.err, KPACK_ERROR_IO_ERROR);
  free(path);
}

/* Found by fuzz_archive: a TOC original_size far beyond what the frame can
 * hold was malloc'ed before decompression (ASan: allocation-size-too-big;
 * elsewhere OUT_OF_MEMORY). Such a size is the archive's fault: a format
 * error, found before any allocation. */
static void test_toc_size_no_frame_could_fill_is_refused(void** state) {
  (void)state;
  size_t frame_size;
  void* frame = make_frame(3000, false, &frame_size);
  char* path = write_zstd_archive("lying-toc.kpack", frame, frame_size, true,
                                  1ull << 46);
  kpack_archive_t a;
  void* data;
  size_t size;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx90a", &data, &size),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_null(data);
  kpack_close(a);
  free(path);
  free(frame);
}

/* The same through the frame header: without original_size the kernel size
 * is the content size the frame declares, here 2^46 for one RLE byte. */
static void test_frame_header_size_no_frame_could_fill_is_refused(
    void** state) {
  (void)state;
  const uint8_t frame[] = {0x28, 0xb5, 0x2f, 0xfd, /* magic */
                           0xc0, /* 8-byte content size, window descriptor */
                           0x50, /* window 1 MiB */
                           0,    0,    0,    0,
                           0,    0x40, 0,    0, /* content size 2^46 */
                           0x0b, 0x00, 0x00,    /* last block, RLE, 1 byte */
                           'x'};
  char* path =
      write_zstd_archive("lying-frame.kpack", frame, sizeof(frame), false, 0);
  kpack_archive_t a;
  kpack_kernel_info_t info;
  void* data;
  size_t size;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(a, "lib/a.so#0", "gfx90a", &info),
                   KPACK_SUCCESS);
  assert_int_equal(info.size, 1ull << 46);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx90a", &data, &size),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_null(data);
  kpack_close(a);
  free(path);
}

/* The check must not refuse a real frame at zstd's best ratio: a kernel of
 * zeros compresses to one RLE block per 128 KiB. */
static void test_highly_compressible_kernel_still_reads(void** state) {
  (void)state;
  const size_t size = 8u << 20;
  uint8_t* zeros = calloc(1, size);
  assert_non_null(zeros);
  kt_kernel k = {"lib/zero.so#0", "gfx90a", zeros, size};
  char* path = kt_path(kt_tmp, "zeros.kpack");
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, &k, 1);
  kpack_archive_t a;
  kpack_kernel_info_t info;
  void* data;
  size_t got;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(a, k.binary, k.arch, &info),
                   KPACK_SUCCESS);
  assert_true(info.stored_size < size / 1000); /* it is that compressible */
  assert_int_equal(kpack_get_kernel(a, k.binary, k.arch, &data, &got),
                   KPACK_SUCCESS);
  assert_int_equal(got, size);
  assert_memory_equal(data, zeros, size);
  kpack_free_kernel(data);
  kpack_close(a);
  free(path);
  free(zeros);
}

/* ---- kernel cache (libkpack/kernel_cache.c)
 * ----------------------------------
 */

/* Found by fuzz_archive through the cache: kc_load() malloc'ed the TOC's
 * original_size before kpack_read_kernel() checked it against the frame, so
 * a lying TOC requested 64 TiB (ASan abort; elsewhere OUT_OF_MEMORY where
 * kpack_get_kernel() says DECOMPRESSION_FAILED, i.e. ENOMEM, not EIO, in
 * kpackfs). */
static void test_kcache_lying_toc_size_fails_like_get_kernel(void** state) {
  (void)state;
  size_t frame_size;
  void* frame = make_frame(3000, true, &frame_size);
  char* path = write_zstd_archive("lying-cache.kpack", frame, frame_size, true,
                                  1ull << 46);
  kpack_archive_t a;
  kpack_kcache_t* cache;
  kpack_kcache_entry_t* entry;
  const void* data;
  size_t size;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_kcache_create(1 << 20, &cache), KPACK_SUCCESS);
  assert_int_equal(kpack_kcache_acquire(cache, a, "lib/a.so#0", "gfx90a",
                                        &entry, &data, &size),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_null(entry);
  kpack_kcache_stats_t stats;
  assert_int_equal(kpack_kcache_get_stats(cache, &stats), KPACK_SUCCESS);
  assert_int_equal(stats.bytes, 0);
  kpack_kcache_purge(cache, a);
  kpack_kcache_destroy(cache);
  kpack_close(a);
  free(path);
  free(frame);
}

/* Found by review: a TOC entry declaring 2^64-1 bytes made `kpack verify`
 * allocate that much (OUT_OF_MEMORY) and the kernel cache refuse it as out
 * of memory (ENOMEM for a mounted file). Every path now calls it a format
 * error before allocating: the whole read, the cache, a prefix read and
 * the prefix render kpackfs sizes its text files with, and verify. */
static void test_size_of_2_64_minus_1_is_invalid_format_everywhere(
    void** state) {
  (void)state;
  size_t frame_size;
  void* frame = make_frame(3000, true, &frame_size);
  char* path = write_zstd_archive("lying-max.kpack", frame, frame_size, true,
                                  UINT64_MAX);
  kpack_archive_t a;
  void* data;
  size_t size;
  uint8_t prefix[64];
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx90a", &data, &size),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_int_equal(kpack_read_kernel_prefix(a, "lib/a.so#0", "gfx90a", prefix,
                                            sizeof(prefix), &size),
                   KPACK_ERROR_INVALID_FORMAT);
  kpack_co_render_t r;
  assert_int_equal(kpack_kernel_render(a, "lib/a.so#0", "gfx90a", &r, NULL),
                   KPACK_ERROR_INVALID_FORMAT);
  kpack_kcache_t* cache;
  kpack_kcache_entry_t* entry;
  const void* cached;
  assert_int_equal(kpack_kcache_create(1 << 20, &cache), KPACK_SUCCESS);
  assert_int_equal(kpack_kcache_acquire(cache, a, "lib/a.so#0", "gfx90a",
                                        &entry, &cached, &size),
                   KPACK_ERROR_INVALID_FORMAT);
  kpack_kcache_destroy(cache);
  kpack_close(a);

  char* cmd;
  char line[1024] = "";
  assert_true(asprintf(&cmd, "'%s/kpack' verify '%s'", kt_bin_dir(), path) > 0);
  FILE* p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(line, 1, sizeof(line) - 1, p);
  line[n] = '\0';
  assert_int_equal(WEXITSTATUS(pclose(p)), 1);
  assert_non_null(
      strstr(line, "lib/a.so#0 gfx90a: KPACK_ERROR_INVALID_FORMAT"));
  assert_null(strstr(line, "OUT_OF_MEMORY"));
  free(cmd);
  free(path);
  free(frame);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binary_without_arches_is_not_listed),
      cmocka_unit_test(test_fifo_is_io_error_without_blocking),
      cmocka_unit_test(test_toc_size_no_frame_could_fill_is_refused),
      cmocka_unit_test(test_frame_header_size_no_frame_could_fill_is_refused),
      cmocka_unit_test(test_highly_compressible_kernel_still_reads),
      cmocka_unit_test(test_kcache_lying_toc_size_fails_like_get_kernel),
      cmocka_unit_test(test_size_of_2_64_minus_1_is_invalid_format_everywhere),
  };
  return cmocka_run_group_tests_name("regressions", tests, kt_tmp_setup,
                                     kt_tmp_teardown);
}
