/* SPDX-License-Identifier: MIT
 *
 * Archive reading (docs/format.md, kpack.h): round trips through the writer in
 * both schemes, and every malformed-input case with its exact status. Malformed
 * archives are the writer's output with the TOC re-packed or bytes patched.
 */
#include <errno.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "archive/archive.h"
#include "fixture_toc.h"
#include "support.h"

static const kpack_compression_scheme_t schemes[] = {
    KPACK_COMPRESSION_NOOP, KPACK_COMPRESSION_ZSTD_PER_KERNEL};

/* ---- fixtures ------------------------------------------------------------ */

/* A whole archive in memory, to be patched and saved. */
typedef struct image {
  uint8_t* data;
  size_t size;
  uint64_t toc_offset;
} image;

/* Two binaries, two arches; kernel sizes 1000 and 3000. */
static image make_image(kpack_compression_scheme_t scheme) {
  static const char* arches[] = {"gfx90a", "gfx942"};
  void* a = kt_pattern(1000, 1);
  void* b = kt_pattern(3000, 2);
  void* c = kt_pattern(1000, 3);
  kt_kernel k[] = {
      {"lib/a.so#0", "gfx90a", a, 1000},
      {"lib/a.so#0", "gfx942", b, 3000},
      {"lib/b.so#0", "gfx942", c, 1000},
  };
  char* path = kt_path(kt_tmp, "fixture.kpack");
  kt_write_archive(path, scheme, arches, 2, k, 3);
  image img;
  img.data = kt_read_file(path, &img.size);
  assert_non_null(img.data);
  img.toc_offset = fx_toc_offset(img.data, img.size);
  free(path);
  free(a);
  free(b);
  free(c);
  return img;
}

static char* save(const image* img) {
  char* path = kt_path(kt_tmp, "patched.kpack");
  kt_write_file(path, img->data, img->size);
  return path;
}

static kpack_error_t open_image(const image* img) {
  char* path = save(img);
  kpack_archive_t a = (kpack_archive_t)(uintptr_t)1;
  kpack_error_t err = kpack_open(path, &a);
  if (err != KPACK_SUCCESS)
    assert_null(a); /* never a half-open handle */
  kpack_close(a);
  free(path);
  return err;
}

static void replace_toc(image* img, const void* toc, size_t size) {
  img->data = realloc(img->data, img->toc_offset + size);
  assert_non_null(img->data);
  memcpy(img->data + img->toc_offset, toc, size);
  img->size = img->toc_offset + size;
}

/* TOC editing through msgpack-c (fixture_toc.h): decode, change objects,
 * re-encode. */
static void edit_begin(fx_toc* e, const image* img) {
  fx_toc_decode(e, img->data, img->size, img->toc_offset);
}

/* The value at a path of map keys (array elements by decimal index). */
static msgpack_object* edit_at(fx_toc* e, const char* const* keys, size_t n,
                               msgpack_object** key_out) {
  msgpack_object* o = fx_toc_at(e, keys, n, key_out);
  assert_non_null(o);
  return o;
}

static void edit_end(fx_toc* e, image* img) {
  fx_toc_encode(e, &img->data, &img->size, img->toc_offset);
}

#define PATH(...)                     \
  (const char* const[]){__VA_ARGS__}, \
      sizeof((const char* const[]){__VA_ARGS__}) / sizeof(const char*)

static void set_uint(image* img, const char* const* keys, size_t n,
                     uint64_t v) {
  fx_toc e;
  edit_begin(&e, img);
  msgpack_object* o = edit_at(&e, keys, n, NULL);
  o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
  o->via.u64 = v;
  edit_end(&e, img);
}

static void set_str(image* img, const char* const* keys, size_t n,
                    const char* s) {
  fx_toc e;
  edit_begin(&e, img);
  msgpack_object* o = edit_at(&e, keys, n, NULL);
  o->type = MSGPACK_OBJECT_STR;
  o->via.str.ptr = s;
  o->via.str.size = (uint32_t)strlen(s);
  edit_end(&e, img);
}

/* Renames a key to one no reader knows, which removes the field. */
static void hide_key(image* img, const char* const* keys, size_t n) {
  fx_toc e;
  msgpack_object* key = NULL;
  edit_begin(&e, img);
  edit_at(&e, keys, n, &key);
  assert_non_null(key);
  key->via.str.ptr = "x-unknown";
  key->via.str.size = 9;
  edit_end(&e, img);
}

/* Offset of ordinal i's frame (zstd images): after the u32 size field. */
static size_t frame_offset(const image* img, unsigned ordinal) {
  size_t pos = 64 + 4;
  for (unsigned i = 0; i < ordinal; i++) {
    uint32_t n;
    memcpy(&n, img->data + pos, 4);
    pos += 4 + n;
  }
  return pos + 4;
}

/* ---- round trips --------------------------------------------------------- */

static void roundtrip(kpack_compression_scheme_t scheme, const size_t* sizes,
                      size_t count) {
  kt_kernel* k = calloc(count, sizeof(*k));
  char(*names)[32] = calloc(count, 32);
  for (size_t i = 0; i < count; i++) {
    snprintf(names[i], 32, "lib/lib%zu.so#%zu", i % 97, i / 97);
    k[i].binary = names[i];
    k[i].arch = i % 2 ? "gfx942:sramecc+:xnack-" : "gfx90a:xnack-";
    k[i].data = kt_pattern(sizes[i], (uint32_t)i);
    k[i].size = sizes[i];
  }
  char* path = kt_path(kt_tmp, "rt.kpack");
  kt_write_archive(path, scheme, NULL, 0, k, count);
  kpack_archive_t a;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  size_t n;
  assert_int_equal(kpack_get_kernel_count(a, &n), KPACK_SUCCESS);
  assert_int_equal(n, count);
  for (size_t i = 0; i < count; i++) {
    void* data;
    size_t size;
    assert_int_equal(kpack_get_kernel(a, k[i].binary, k[i].arch, &data, &size),
                     KPACK_SUCCESS);
    assert_non_null(data);
    assert_int_equal(size, sizes[i]);
    assert_memory_equal(data, k[i].data, size);
    kpack_free_kernel(data);
    free((void*)k[i].data);
  }
  kpack_close(a);
  free(path);
  free(names);
  free(k);
}

static void test_roundtrip_sizes_from_empty_to_megabytes(void** state) {
  (void)state;
  const size_t sizes[] = {0,    1,    63,     64,      65,
                          4095, 4096, 131072, 1 << 20, 3 << 20};
  for (int s = 0; s < 2; s++)
    roundtrip(schemes[s], sizes, sizeof(sizes) / sizeof(sizes[0]));
}

static void test_roundtrip_thousands_of_kernels(void** state) {
  (void)state;
  enum { N = 3000 };
  size_t* sizes = malloc(N * sizeof(*sizes));
  for (size_t i = 0; i < N; i++)
    sizes[i] = (i * 37) % 700;
  for (int s = 0; s < 2; s++)
    roundtrip(schemes[s], sizes, N);
  free(sizes);
}

static void test_empty_kernel_is_non_null_pointer_of_size_zero(void** state) {
  (void)state;
  for (int s = 0; s < 2; s++) {
    kt_kernel k = {"bin#0", "gfx90a", NULL, 0};
    char* path = kt_path(kt_tmp, "empty.kpack");
    kt_write_archive(path, schemes[s], NULL, 0, &k, 1);
    kpack_archive_t a;
    void* data;
    size_t size = 99;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    assert_int_equal(kpack_get_kernel(a, "bin#0", "gfx90a", &data, &size),
                     KPACK_SUCCESS);
    assert_non_null(data);
    assert_int_equal(size, 0);
    kpack_free_kernel(data);
    kpack_close(a);
    free(path);
  }
}

static void test_binaries_sorted_bytewise_arches_in_declared_order(
    void** state) {
  (void)state;
  static const char* arches[] = {"gfx942", "gfx1100", "gfx90a"};
  uint8_t byte = 7;
  kt_kernel k[] = {
      {"lib/z.so#0", "gfx90a", &byte, 1},  {"lib/B.so#0", "gfx90a", &byte, 1},
      {"lib/a.so#1", "gfx90a", &byte, 1},  {"lib/a.so#0", "gfx942", &byte, 1},
      {"lib/a.so#0", "gfx1100", &byte, 1},
  };
  const char* want[] = {"lib/B.so#0", "lib/a.so#0", "lib/a.so#1", "lib/z.so#0"};
  char* path = kt_path(kt_tmp, "order.kpack");
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, 3, k, 5);
  kpack_archive_t a;
  size_t n;
  const char* s;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_binary_count(a, &n), KPACK_SUCCESS);
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(kpack_get_binary(a, i, &s), KPACK_SUCCESS);
    assert_string_equal(s, want[i]);
  }
  assert_int_equal(kpack_get_architecture_count(a, &n), KPACK_SUCCESS);
  assert_int_equal(n, 3);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(kpack_get_architecture(a, i, &s), KPACK_SUCCESS);
    assert_string_equal(s, arches[i]);
  }
  assert_int_equal(kpack_get_binary_arch_count(a, "lib/a.so#0", &n),
                   KPACK_SUCCESS);
  assert_int_equal(n, 2);
  assert_int_equal(kpack_get_binary_arch(a, "lib/a.so#0", 0, &s),
                   KPACK_SUCCESS);
  assert_string_equal(s, "gfx1100");
  assert_int_equal(kpack_get_group_name(a, &s), KPACK_SUCCESS);
  assert_string_equal(s, "test");
  assert_int_equal(kpack_get_gfx_arch_family(a, &s), KPACK_SUCCESS);
  assert_string_equal(s, "gfxtest");
  kpack_close(a);
  free(path);
}

/* Every (binary, arch) answers the same whether asked with the archive's
 * own strings (what a program listing it passes back, found by address)
 * or with copies of them (found by their bytes), in a TOC the writer laid
 * out sorted and in one whose binaries come in reverse; a string of the
 * archive that names no binary finds nothing. */
static void test_lookups_by_own_strings_and_by_copies_agree(void** state) {
  (void)state;
  for (int reversed = 0; reversed < 2; reversed++) {
    image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
    if (reversed) {
      fx_toc e;
      edit_begin(&e, &img);
      msgpack_object_map* toc = &edit_at(&e, PATH("toc"), NULL)->via.map;
      for (uint32_t i = 0; i < toc->size / 2; i++) {
        msgpack_object_kv kv = toc->ptr[i];
        toc->ptr[i] = toc->ptr[toc->size - 1 - i];
        toc->ptr[toc->size - 1 - i] = kv;
      }
      edit_end(&e, &img);
    }
    char* path = save(&img);
    kpack_archive_t a;
    size_t binaries, arches, seen = 0;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    assert_int_equal(kpack_get_binary_count(a, &binaries), KPACK_SUCCESS);
    assert_int_equal(binaries, 2);
    for (size_t i = 0; i < binaries; i++) {
      const char* binary;
      assert_int_equal(kpack_get_binary(a, i, &binary), KPACK_SUCCESS);
      char* binary_copy = strdup(binary);
      assert_int_equal(kpack_get_binary_arch_count(a, binary, &arches),
                       KPACK_SUCCESS);
      size_t copy_arches = 0;
      assert_int_equal(
          kpack_get_binary_arch_count(a, binary_copy, &copy_arches),
          KPACK_SUCCESS);
      assert_int_equal(arches, copy_arches);
      for (size_t j = 0; j < arches; j++, seen++) {
        const char* arch;
        assert_int_equal(kpack_get_binary_arch(a, binary, j, &arch),
                         KPACK_SUCCESS);
        char* arch_copy = strdup(arch);
        kpack_kernel_info_t own, copy;
        assert_int_equal(kpack_get_kernel_info(a, binary, arch, &own),
                         KPACK_SUCCESS);
        assert_int_equal(
            kpack_get_kernel_info(a, binary_copy, arch_copy, &copy),
            KPACK_SUCCESS);
        assert_int_equal(own.ordinal, copy.ordinal);
        assert_int_equal(own.size, copy.size);
        /* An arch string passed as a binary name names no binary. */
        assert_int_equal(kpack_get_kernel_info(a, arch, arch, &own),
                         KPACK_ERROR_KERNEL_NOT_FOUND);
        free(arch_copy);
      }
      free(binary_copy);
    }
    assert_int_equal(seen, 3);
    kpack_close(a);
    free(path);
    free(img.data);
  }
}

/* Every kernel by position answers what the lookups by name answer, with
 * the archive's own strings, in both schemes; indices out of range are
 * refused. */
static void test_kernels_by_position_agree_with_lookups(void** state) {
  (void)state;
  for (int s = 0; s < 2; s++) {
    image img = make_image(schemes[s]);
    char* path = save(&img);
    kpack_archive_t a;
    size_t binaries, arches, seen = 0;
    kpack_kernel_entry_t e;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    assert_int_equal(kpack_get_binary_count(a, &binaries), KPACK_SUCCESS);
    for (size_t i = 0; i < binaries; i++) {
      const char* binary;
      size_t count;
      assert_int_equal(kpack_get_binary(a, i, &binary), KPACK_SUCCESS);
      assert_int_equal(kpack_get_binary_arch_count(a, binary, &arches),
                       KPACK_SUCCESS);
      assert_int_equal(kpack_get_binary_arch_count_at(a, i, &count),
                       KPACK_SUCCESS);
      assert_int_equal(count, arches);
      for (size_t j = 0; j < arches; j++, seen++) {
        const char* arch;
        const void* map;
        size_t map_size;
        kpack_kernel_info_t info;
        assert_int_equal(kpack_get_binary_arch(a, binary, j, &arch),
                         KPACK_SUCCESS);
        assert_int_equal(kpack_get_kernel_info(a, binary, arch, &info),
                         KPACK_SUCCESS);
        assert_int_equal(
            kpack_get_entry_metadata(a, binary, arch, &map, &map_size),
            KPACK_SUCCESS);
        assert_int_equal(kpack_get_kernel_entry(a, i, j, &e), KPACK_SUCCESS);
        assert_ptr_equal(e.binary, binary);
        assert_ptr_equal(e.arch, arch);
        assert_int_equal(e.info.size, info.size);
        assert_int_equal(e.info.stored_size, info.stored_size);
        assert_int_equal(e.info.offset, info.offset);
        assert_int_equal(e.info.ordinal, info.ordinal);
        assert_ptr_equal(e.info.type, info.type);
        assert_ptr_equal(e.metadata, map);
        assert_int_equal(e.metadata_size, map_size);
      }
      assert_int_equal(kpack_get_kernel_entry(a, i, arches, &e),
                       KPACK_ERROR_INVALID_ARGUMENT);
    }
    assert_int_equal(seen, 3);
    size_t count;
    assert_int_equal(kpack_get_binary_arch_count_at(a, binaries, &count),
                     KPACK_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kpack_get_kernel_entry(a, binaries, 0, &e),
                     KPACK_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kpack_get_kernel_entry(a, 0, 0, NULL),
                     KPACK_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kpack_get_kernel_entry(NULL, 0, 0, &e),
                     KPACK_ERROR_INVALID_ARGUMENT);
    assert_int_equal(kpack_get_binary_arch_count_at(a, 0, NULL),
                     KPACK_ERROR_INVALID_ARGUMENT);
    kpack_close(a);
    free(path);
    free(img.data);
  }
}

/* Prefetching is a hint: missing files, files that are not archives and
 * NULL entries are passed over, and the archives open as before. */
static void test_prefetch_passes_over_what_it_cannot_read(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  char* path = save(&img);
  char* missing = kt_path(kt_tmp, "no-such.kpack");
  const char* paths[] = {path, missing, NULL, kt_tmp, path};
  kpack_prefetch(paths, 5);
  kpack_prefetch(NULL, 3);
  kpack_prefetch(paths, 0);
  kpack_archive_t a;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  kpack_close(a);
  free(missing);
  free(path);
  free(img.data);
}

static void test_kernel_info_reads_toc_only(void** state) {
  (void)state;
  for (int s = 0; s < 2; s++) {
    image img = make_image(schemes[s]);
    char* path = save(&img);
    kpack_archive_t a;
    kpack_kernel_info_t info;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    assert_int_equal(kpack_get_kernel_info(a, "lib/a.so#0", "gfx942", &info),
                     KPACK_SUCCESS);
    assert_int_equal(info.size, 3000);
    assert_int_equal(info.ordinal, 1);
    assert_string_equal(info.type, "hsaco");
    if (schemes[s] == KPACK_COMPRESSION_NOOP) {
      assert_int_equal(info.stored_size, 3000);
      assert_int_equal(info.offset % 64, 0);
    } else {
      assert_true(info.stored_size < 3000);
      assert_int_equal(info.offset, frame_offset(&img, 1));
    }
    assert_int_equal(kpack_get_kernel_info(a, "lib/a.so#0", "gfx1", &info),
                     KPACK_ERROR_KERNEL_NOT_FOUND);
    kpack_close(a);
    free(path);
    free(img.data);
  }
}

static void test_read_kernel_into_caller_buffer(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  char* path = save(&img);
  kpack_archive_t a;
  size_t size;
  uint8_t* buf = malloc(3000);
  void* want = kt_pattern(3000, 2);
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(
      kpack_read_kernel(a, "lib/a.so#0", "gfx942", buf, 2999, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_read_kernel(a, "lib/a.so#0", "gfx942", buf, 3000, &size),
      KPACK_SUCCESS);
  assert_int_equal(size, 3000);
  assert_memory_equal(buf, want, 3000);
  kpack_close(a);
  free(buf);
  free(want);
  free(path);
  free(img.data);
}

static void test_open_reads_header_toc_and_frame_table_only(void** state) {
  (void)state;
  /* 400 kernels of 64 KiB: if open touched the payload, rchar would grow by
   * megabytes. Each kernel differs, so that the writer keeps them all. */
  enum { N = 400, SIZE = 65536 };
  kt_kernel* k = calloc(N, sizeof(*k));
  char(*names)[16] = calloc(N, 16);
  for (int i = 0; i < N; i++) {
    snprintf(names[i], 16, "b%d#0", i);
    k[i] = (kt_kernel){names[i], "gfx90a", kt_pattern(SIZE, 3 + i), SIZE};
  }
  for (int s = 0; s < 2; s++) {
    char* path = kt_path(kt_tmp, "big.kpack");
    kt_write_archive(path, schemes[s], NULL, 0, k, N);
    size_t file_size;
    uint8_t* bytes = kt_read_file(path, &file_size);
    uint64_t toc_size = file_size - fx_toc_offset(bytes, file_size);
    free(bytes);
    FILE* io = fopen("/proc/self/io", "r");
    assert_non_null(io);
    unsigned long long before = 0, after = 0;
    char line[128];
    kpack_archive_t a;
    setvbuf(io, NULL, _IONBF, 0);
    while (fgets(line, sizeof line, io))
      sscanf(line, "rchar: %llu", &before);
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    rewind(io);
    while (fgets(line, sizeof line, io))
      sscanf(line, "rchar: %llu", &after);
    fclose(io);
    /* header + TOC + 4 bytes per frame, plus the reads of /proc itself */
    assert_true(after - before <= 16 + toc_size + 4 * (N + 1) + 4096);
    kpack_close(a);
    free(path);
  }
  for (int i = 0; i < N; i++)
    free((void*)k[i].data);
  free(names);
  free(k);
}

/* ---- arguments
 * ------------------------------------------------------------------ */

static void test_null_arguments_and_out_of_range_indices(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  char* path = save(&img);
  kpack_archive_t a;
  size_t n;
  const char* s;
  void* d;
  assert_int_equal(kpack_open(NULL, &a), KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_open(path, NULL), KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_architecture_count(NULL, &n),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_architecture_count(a, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_architecture(a, 2, &s),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_architecture(a, 0, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_binary_count(a, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_binary(a, 2, &s), KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_binary(NULL, 0, &s), KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_kernel(a, NULL, "gfx90a", &d, &n),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", NULL, &d, &n),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx90a", NULL, &n),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx90a", &d, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_get_kernel(NULL, "lib/a.so#0", "gfx90a", &d, &n),
                   KPACK_ERROR_INVALID_ARGUMENT);
  kpack_close(a);
  kpack_close(NULL);
  kpack_free_kernel(NULL);
  free(path);
  free(img.data);
}

static void test_unknown_binary_or_arch_is_kernel_not_found(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  char* path = save(&img);
  kpack_archive_t a;
  void* d;
  size_t n;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel(a, "lib/c.so#0", "gfx90a", &d, &n),
                   KPACK_ERROR_KERNEL_NOT_FOUND);
  assert_null(d);
  assert_int_equal(kpack_get_kernel(a, "lib/b.so#0", "gfx90a", &d, &n),
                   KPACK_ERROR_KERNEL_NOT_FOUND);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so", "gfx90a", &d, &n),
                   KPACK_ERROR_KERNEL_NOT_FOUND);
  kpack_close(a);
  free(path);
  free(img.data);
}

/* ---- the file and its header
 * ------------------------------------------------------ */

static void test_missing_file_is_file_not_found(void** state) {
  (void)state;
  kpack_archive_t a;
  char* path = kt_path(kt_tmp, "absent.kpack");
  assert_int_equal(kpack_open(path, &a), KPACK_ERROR_FILE_NOT_FOUND);
  assert_null(a);
  free(path);
}

static void test_directory_is_io_error(void** state) {
  (void)state;
  kpack_archive_t a;
  assert_int_equal(kpack_open(kt_tmp, &a), KPACK_ERROR_IO_ERROR);
  assert_null(a);
  assert_int_equal(errno, EISDIR);
}

/* Callers (the loader, kpackfs) tell "out of descriptors" from a bad file
 * by errno, which the failure path must leave as the system set it. */
static void test_open_failures_leave_errno_set(void** state) {
  (void)state;
  kpack_archive_t a;
  char* missing = kt_path(kt_tmp, "missing.kpack");
  assert_int_equal(kpack_open(missing, &a), KPACK_ERROR_FILE_NOT_FOUND);
  assert_int_equal(errno, ENOENT);
  free(missing);

  char* path = kt_path(kt_tmp, "errno.kpack");
  kt_write_archive(path, KPACK_COMPRESSION_NOOP, NULL, 0, NULL, 0);
  struct rlimit saved, low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
  int probe = dup(0);
  assert_true(probe >= 0);
  close(probe);
  low = saved;
  low.rlim_cur = (rlim_t)probe; /* the next descriptor is just over it */
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  kpack_error_t err = kpack_open(path, &a);
  int saved_errno = errno;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
  assert_int_equal(err, KPACK_ERROR_IO_ERROR);
  assert_int_equal(saved_errno, EMFILE);
  assert_null(a);
  free(path);
}

static void test_short_file_and_bad_magic_are_invalid_format(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  size_t full = img.size;
  img.size = 15;
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  img.size = 0;
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  img.size = full;
  img.data[0] = 'k';
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

static void test_version_2_is_unsupported(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  img.data[4] = 2;
  assert_int_equal(open_image(&img), KPACK_ERROR_UNSUPPORTED_VERSION);
  free(img.data);
  img = make_image(KPACK_COMPRESSION_NOOP);
  set_uint(&img, PATH("format_version"), 2);
  assert_int_equal(open_image(&img), KPACK_ERROR_UNSUPPORTED_VERSION);
  free(img.data);
}

static void test_toc_offset_out_of_range_is_invalid_format(void** state) {
  (void)state;
  const uint64_t bad[] = {0, 15, 0 /* = file size */, UINT64_MAX};
  for (int i = 0; i < 4; i++) {
    image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
    uint64_t v = i == 2 ? img.size : bad[i];
    for (int b = 0; b < 8; b++)
      img.data[8 + b] = (uint8_t)(v >> (8 * b));
    assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
    free(img.data);
  }
}

/* ---- the TOC
 * ------------------------------------------------------------------------ */

static void test_toc_that_is_not_a_map_fails_to_parse(void** state) {
  (void)state;
  static const uint8_t array[] = {0x93, 1, 2, 3};
  static const uint8_t string[] = {0xa3, 't', 'o', 'c'};
  static const uint8_t reserved[] = {0xc1};
  image img = make_image(KPACK_COMPRESSION_NOOP);
  replace_toc(&img, array, sizeof array);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  replace_toc(&img, string, sizeof string);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  replace_toc(&img, reserved, sizeof reserved);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);
}

static void test_truncated_toc_fails_to_parse(void** state) {
  (void)state;
  for (int s = 0; s < 2; s++) {
    image img = make_image(schemes[s]);
    size_t full = img.size;
    /* Every cut inside the TOC must fail cleanly, never succeed. */
    for (size_t cut = 1; cut < full - img.toc_offset; cut += 7) {
      img.size = full - cut;
      kpack_error_t err = open_image(&img);
      assert_true(err == KPACK_ERROR_MSGPACK_PARSE_FAILED ||
                  err == KPACK_ERROR_INVALID_FORMAT);
    }
    img.size = full - 1;
    assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
    free(img.data);
  }
}

static void test_oversized_declarations_fail_to_parse(void** state) {
  (void)state;
  /* A map32 claiming 4 billion pairs; an array32 claiming as many arches;
   * a str32 longer than the file. */
  static const uint8_t map[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 'x'};
  static const uint8_t arches[] = {0x81, 0xaa, 'g',  'f',  'x', '_',  'a',
                                   'r',  'c',  'h',  'e',  's', 0xdd, 0xff,
                                   0xff, 0xff, 0xff, 0xa1, 'x'};
  static const uint8_t str[] = {0x81, 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'};
  image img = make_image(KPACK_COMPRESSION_NOOP);
  replace_toc(&img, map, sizeof map);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  replace_toc(&img, arches, sizeof arches);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  replace_toc(&img, str, sizeof str);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);
}

static void test_wrong_typed_known_fields_fail_to_parse(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  set_str(&img, PATH("toc", "lib/a.so#0", "gfx90a", "ordinal"), "zero");
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);

  img = make_image(KPACK_COMPRESSION_NOOP);
  set_str(&img, PATH("blobs", "1", "offset"), "64");
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);

  img = make_image(KPACK_COMPRESSION_NOOP);
  set_uint(&img, PATH("gfx_arches"), 3);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);

  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_str(&img, PATH("zstd_size"), "big");
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);

  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_uint(&img, PATH("toc", "lib/b.so#0"), 1);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);

  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_uint(&img, PATH("compression_scheme"), 1);
  assert_int_equal(open_image(&img), KPACK_ERROR_MSGPACK_PARSE_FAILED);
  free(img.data);
}

static void test_unknown_compression_scheme_is_unsupported(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_str(&img, PATH("compression_scheme"), "lz4-per-kernel");
  assert_int_equal(open_image(&img), KPACK_ERROR_UNSUPPORTED_VERSION);
  free(img.data);
}

static void test_absent_scheme_means_none(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  hide_key(&img, PATH("compression_scheme"));
  assert_int_equal(open_image(&img), KPACK_SUCCESS);
  free(img.data);
}

static void test_unknown_keys_skipped_and_entry_metadata_kept(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  hide_key(&img, PATH("group_name"));
  fx_toc e;
  edit_begin(&e, &img);
  /* "type" becomes "metadata" holding nested maps, and b's entry gets a
   * "metadata" that is not a map: read as none, as ROCm ignores it */
  msgpack_object* entry =
      edit_at(&e, PATH("toc", "lib/a.so#0", "gfx90a"), NULL);
  msgpack_object_kv* kv = &entry->via.map.ptr[0];
  kv->key.via.str.ptr = "metadata";
  kv->key.via.str.size = 8;
  kv->val = *edit_at(&e, PATH("toc", "lib/b.so#0"), NULL); /* nested maps */
  msgpack_object* other =
      edit_at(&e, PATH("toc", "lib/b.so#0", "gfx942"), NULL);
  other->via.map.ptr[0].key.via.str.ptr = "metadata";
  other->via.map.ptr[0].key.via.str.size = 8;
  msgpack_sbuffer want;
  msgpack_packer pk;
  msgpack_sbuffer_init(&want);
  msgpack_packer_init(&pk, &want, msgpack_sbuffer_write);
  assert_int_equal(msgpack_pack_object(&pk, kv->val), 0);
  edit_end(&e, &img);
  char* path = save(&img);
  kpack_archive_t a;
  void* d;
  size_t n;
  const void* m;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx90a", &d, &n),
                   KPACK_SUCCESS);
  assert_int_equal(n, 1000);
  kpack_free_kernel(d);
  assert_int_equal(kpack_get_entry_metadata(a, "lib/a.so#0", "gfx90a", &m, &n),
                   KPACK_SUCCESS);
  assert_int_equal(n, want.size);
  assert_memory_equal(m, want.data, n);
  assert_int_equal(kpack_get_entry_metadata(a, "lib/b.so#0", "gfx942", &m, &n),
                   KPACK_SUCCESS);
  assert_null(m);
  assert_int_equal(n, 0);
  kpack_close(a);
  msgpack_sbuffer_destroy(&want);
  free(path);
  free(img.data);
}

static void test_wide_string_and_int_encodings_are_accepted(void** state) {
  (void)state;
  /* {"toc": {}, "group_name": str16 "g", "format_version": int64 1} */
  static const uint8_t toc[] = {
      0x83, 0xa3, 't',  'o', 'c', 0x80, 0xd9, 0x0a, 'g', 'r',  'o',  'u',  'p',
      '_',  'n',  'a',  'm', 'e', 0xda, 0x00, 0x01, 'g', 0xdb, 0x00, 0x00, 0x00,
      0x0e, 'f',  'o',  'r', 'm', 'a',  't',  '_',  'v', 'e',  'r',  's',  'i',
      'o',  'n',  0xd3, 0,   0,   0,    0,    0,    0,   0,    1};
  image img = make_image(KPACK_COMPRESSION_NOOP);
  replace_toc(&img, toc, sizeof toc);
  char* path = save(&img);
  kpack_archive_t a;
  const char* g;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_group_name(a, &g), KPACK_SUCCESS);
  assert_string_equal(g, "g");
  kpack_close(a);
  free(path);
  free(img.data);
}

/* ---- payload index
 * ---------------------------------------------------------------- */

static void test_blob_outside_file_is_invalid_format(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  set_uint(&img, PATH("blobs", "2", "offset"), img.size);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
  img = make_image(KPACK_COMPRESSION_NOOP);
  set_uint(&img, PATH("blobs", "0", "offset"), UINT64_MAX - 10);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

static void test_blob_size_differing_from_original_size_is_invalid(
    void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  set_uint(&img, PATH("blobs", "1", "size"), 2999);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

static void test_ordinal_without_blob_or_frame_is_invalid_format(void** state) {
  (void)state;
  const uint64_t bad[] = {3, 1000, (uint64_t)UINT32_MAX + 1};
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < 3; i++) {
      image img = make_image(schemes[s]);
      set_uint(&img, PATH("toc", "lib/b.so#0", "gfx942", "ordinal"), bad[i]);
      assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
      free(img.data);
    }
  image img = make_image(KPACK_COMPRESSION_NOOP);
  hide_key(&img, PATH("blobs"));
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

static void test_zstd_region_outside_file_is_invalid_format(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_uint(&img, PATH("zstd_size"), img.size);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_uint(&img, PATH("zstd_offset"), UINT64_MAX);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  hide_key(&img, PATH("zstd_offset"));
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

/* An archive whose zstd region is walked (no usable frame-size table)
 * opens without reading it; its first read, or kpack_get_kernel_info,
 * walks it: the status of both, which agree. */
static kpack_error_t walk_image(const image* img) {
  char* path = save(img);
  kpack_archive_t a;
  kpack_kernel_info_t info;
  void* d = NULL;
  size_t n;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  kpack_error_t err = kpack_get_kernel_info(a, "lib/a.so#0", "gfx942", &info);
  assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx942", &d, &n), err);
  kpack_free_kernel(d);
  kpack_close(a);
  free(path);
  return err;
}

static void test_frame_table_overrunning_region_is_invalid_format(
    void** state) {
  (void)state;
  /* frame count larger than the region can hold */
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  img.data[64] = 0xff;
  img.data[65] = 0xff;
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
  /* the last frame's size runs past the region's end (found by the walk,
   * at the first read: with a frame-size table, nothing reads the size
   * fields first) */
  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  hide_key(&img, PATH("zstd_frame_sizes"));
  size_t last = frame_offset(&img, 2) - 4;
  img.data[last + 2] = 0x7f;
  assert_int_equal(walk_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
  /* region shorter than its frames (the table no longer fits: walked) */
  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_uint(&img, PATH("zstd_size"), 20);
  assert_int_equal(walk_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
  /* the same, a kernel without original_size: open walks to learn it */
  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  set_uint(&img, PATH("zstd_size"), 20);
  hide_key(&img, PATH("toc", "lib/a.so#0", "gfx942", "original_size"));
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

static void test_missing_original_size_comes_from_blob_or_frame(void** state) {
  (void)state;
  for (int s = 0; s < 2; s++) {
    image img = make_image(schemes[s]);
    hide_key(&img, PATH("toc", "lib/a.so#0", "gfx942", "original_size"));
    char* path = save(&img);
    kpack_archive_t a;
    kpack_kernel_info_t info;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    assert_int_equal(kpack_get_kernel_info(a, "lib/a.so#0", "gfx942", &info),
                     KPACK_SUCCESS);
    assert_int_equal(info.size, 3000);
    kpack_close(a);
    free(path);
    free(img.data);
  }
}

static void test_frame_declaring_no_size_without_original_size_is_invalid(
    void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  hide_key(&img, PATH("toc", "lib/a.so#0", "gfx90a", "original_size"));
  /* Replace frame 0 with a frame that has no content size field. */
  size_t off = frame_offset(&img, 0);
  uint32_t old_size;
  memcpy(&old_size, img.data + off - 4, 4);
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  uint8_t frame[64];
  ZSTD_inBuffer in = {"", 0, 0};
  ZSTD_outBuffer out = {frame, sizeof frame, 0};
  assert_int_equal(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end), 0);
  ZSTD_freeCCtx(cctx);
  assert_true(out.pos <= old_size);
  memcpy(img.data + off, frame, out.pos);
  uint32_t new_size = (uint32_t)out.pos;
  /* keep the chain intact: pad the rest of the old frame into a skippable
   * frame is overkill; shrinking is enough since the table re-reads sizes */
  memmove(img.data + off + new_size, img.data + off + old_size,
          img.size - off - old_size);
  memcpy(img.data + off - 4, &new_size, 4);
  img.size -= old_size - new_size;
  img.toc_offset -= old_size - new_size;
  for (int b = 0; b < 8; b++)
    img.data[8 + b] = (uint8_t)(img.toc_offset >> (8 * b));
  set_uint(&img, PATH("zstd_size"),
           img.toc_offset - 64 /* region runs up to the TOC */);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

static void test_duplicate_binaries_are_invalid_format(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  fx_toc e;
  msgpack_object* key = NULL;
  edit_begin(&e, &img);
  edit_at(&e, PATH("toc", "lib/b.so#0"), &key);
  key->via.str.ptr = "lib/a.so#0";
  edit_end(&e, &img);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

static void test_name_with_embedded_nul_is_invalid_format(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  fx_toc e;
  msgpack_object* key = NULL;
  edit_begin(&e, &img);
  edit_at(&e, PATH("toc", "lib/b.so#0"), &key);
  key->via.str.ptr = "lib/a\0so#0";
  edit_end(&e, &img);
  assert_int_equal(open_image(&img), KPACK_ERROR_INVALID_FORMAT);
  free(img.data);
}

/* ---- reading kernels
 * -------------------------------------------------------------- */

static kpack_error_t get_from(const image* img, const char* binary,
                              const char* arch) {
  char* path = save(img);
  kpack_archive_t a;
  void* d = (void*)1;
  size_t n;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  kpack_error_t err = kpack_get_kernel(a, binary, arch, &d, &n);
  if (err != KPACK_SUCCESS)
    assert_null(d);
  kpack_free_kernel(d);
  kpack_close(a);
  free(path);
  return err;
}

static void test_corrupt_frame_fails_decompression(void** state) {
  (void)state;
  /* magic, then a byte deep in the compressed data (caught by checksum) */
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  size_t off = frame_offset(&img, 1);
  img.data[off] ^= 0xff;
  assert_int_equal(get_from(&img, "lib/a.so#0", "gfx942"),
                   KPACK_ERROR_DECOMPRESSION_FAILED);
  assert_int_equal(get_from(&img, "lib/a.so#0", "gfx90a"), KPACK_SUCCESS);
  img.data[off] ^= 0xff;
  uint32_t frame_size;
  memcpy(&frame_size, img.data + off - 4, 4);
  for (uint32_t i = 8; i < frame_size; i += 11) {
    img.data[off + i] ^= 0x5a;
    assert_int_equal(get_from(&img, "lib/a.so#0", "gfx942"),
                     KPACK_ERROR_DECOMPRESSION_FAILED);
    img.data[off + i] ^= 0x5a;
  }
  free(img.data);
}

static void test_size_mismatch_fails_decompression(void** state) {
  (void)state;
  /* A size no frame of that length could fill is a format error. */
  const uint64_t bad[] = {2999, 3001, 1ull << 40};
  for (int i = 0; i < 3; i++) {
    image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
    set_uint(&img, PATH("toc", "lib/a.so#0", "gfx942", "original_size"),
             bad[i]);
    assert_int_equal(
        get_from(&img, "lib/a.so#0", "gfx942"),
        i < 2 ? KPACK_ERROR_DECOMPRESSION_FAILED : KPACK_ERROR_INVALID_FORMAT);
    free(img.data);
  }
}

/* Through pread and through a mapping (a small archive's reads otherwise
 * come from the copy open made of it: test_mapping.c). */
static void test_file_truncated_after_open_is_io_error(void** state) {
  (void)state;
  for (int s = 0; s < 4; s++) {
    image img = make_image(schemes[s % 2]);
    char* path = save(&img);
    kpack_archive_t a;
    void* d;
    size_t n;
    const char* before = getenv("ROCM_KPACK_MMAP");
    char* saved = before != NULL ? strdup(before) : NULL;
    setenv("ROCM_KPACK_MMAP", s < 2 ? "0" : "1", 1);
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    if (saved != NULL)
      setenv("ROCM_KPACK_MMAP", saved, 1);
    else
      unsetenv("ROCM_KPACK_MMAP");
    free(saved);
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(kpack_get_kernel(a, "lib/a.so#0", "gfx942", &d, &n),
                     KPACK_ERROR_IO_ERROR);
    assert_null(d);
    kpack_close(a);
    free(path);
    free(img.data);
  }
}

typedef struct reader_args {
  kpack_archive_t archive;
  const kt_kernel* kernels;
  size_t count;
  unsigned seed;
  int failures;
} reader_args;

static void* reader_thread(void* p) {
  reader_args* r = p;
  for (int i = 0; i < 400; i++) {
    r->seed = r->seed * 1103515245u + 12345u;
    const kt_kernel* k = &r->kernels[(r->seed >> 8) % r->count];
    void* d;
    size_t n;
    if (kpack_get_kernel(r->archive, k->binary, k->arch, &d, &n) !=
            KPACK_SUCCESS ||
        n != k->size || memcmp(d, k->data, n) != 0)
      r->failures++;
    kpack_free_kernel(d);
  }
  return NULL;
}

static void test_eight_threads_read_one_handle_concurrently(void** state) {
  (void)state;
  enum { N = 64, THREADS = 8 };
  kt_kernel k[N];
  char names[N][16];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], 16, "b%d#0", i);
    size_t size = 1000 + (size_t)i * 997;
    k[i] = (kt_kernel){names[i], i % 2 ? "gfx90a" : "gfx942",
                       kt_pattern(size, (uint32_t)i), size};
  }
  for (int s = 0; s < 2; s++) {
    char* path = kt_path(kt_tmp, "mt.kpack");
    kt_write_archive(path, schemes[s], NULL, 0, k, N);
    kpack_archive_t a;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    pthread_t t[THREADS];
    reader_args args[THREADS];
    for (int i = 0; i < THREADS; i++) {
      args[i] = (reader_args){a, k, N, (unsigned)i + 1, 0};
      assert_int_equal(pthread_create(&t[i], NULL, reader_thread, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++) {
      pthread_join(t[i], NULL);
      assert_int_equal(args[i].failures, 0);
    }
    kpack_close(a);
    free(path);
  }
  for (int i = 0; i < N; i++)
    free((void*)k[i].data);
}

/* Idle decompression contexts are the process's, not each archive's: a
 * mount of hundreds of archives read one after another keeps one, and
 * closing the last archive frees it. */
static void test_idle_readers_are_shared_by_every_archive(void** state) {
  (void)state;
  enum { HANDLES = 40 };
  const size_t size = 3000;
  kt_kernel k = {"b#0", "gfx942", kt_pattern(size, 7), size};
  char* path = kt_path(kt_tmp, "shared.kpack");
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, &k, 1);
  kpack_archive_t a[HANDLES];
  for (int i = 0; i < HANDLES; i++) {
    assert_int_equal(kpack_open(path, &a[i]), KPACK_SUCCESS);
    void* d = NULL;
    size_t n = 0;
    assert_int_equal(kpack_get_kernel(a[i], "b#0", "gfx942", &d, &n),
                     KPACK_SUCCESS);
    assert_memory_equal(d, k.data, size);
    kpack_free_kernel(d);
    uint8_t prefix[100];
    size_t got = 0;
    assert_int_equal(kpack_read_kernel_prefix(a[i], "b#0", "gfx942", prefix,
                                              sizeof(prefix), &got),
                     KPACK_SUCCESS);
    assert_memory_equal(prefix, k.data, sizeof(prefix));
  }
  assert_int_equal(kp_reader_pool_idle(), 1);
  for (int i = 0; i < HANDLES; i++)
    kpack_close(a[i]);
  assert_int_equal(kp_reader_pool_idle(), 0);
  free(path);
  free((void*)k.data);
}

/* ---- frame-size table (docs/format.md) ----------------------------------- */

/* Replaces zstd_frame_sizes with `len` bytes of `type` (BIN or STR). */
static void set_frame_sizes(image* img, const uint8_t* bytes, size_t len,
                            msgpack_object_type type) {
  fx_toc e;
  edit_begin(&e, img);
  msgpack_object* o = edit_at(&e, PATH("zstd_frame_sizes"), NULL);
  o->type = type;
  o->via.bin.ptr = (const char*)bytes;
  o->via.bin.size = (uint32_t)len;
  edit_end(&e, img);
}

/* The table the writer put in the image (3 frames). */
static void frame_sizes_of(const image* img, uint32_t sizes[3]) {
  for (unsigned i = 0; i < 3; i++)
    memcpy(&sizes[i], img->data + frame_offset(img, i) - 4, 4);
}

/* Every kernel of the make_image fixture reads back exactly, through both
 * read paths, and kernel info agrees with the region. */
static void assert_fixture_kernels(const image* img) {
  static const struct {
    const char* binary;
    const char* arch;
    size_t size;
    uint32_t seed;
    unsigned ordinal;
  } want[] = {{"lib/a.so#0", "gfx90a", 1000, 1, 0},
              {"lib/a.so#0", "gfx942", 3000, 2, 1},
              {"lib/b.so#0", "gfx942", 1000, 3, 2}};
  char* path = save(img);
  kpack_archive_t a;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < 3; i++) {
      void* expect = kt_pattern(want[i].size, want[i].seed);
      void* d = NULL;
      size_t n;
      if (pass == 0) {
        assert_int_equal(
            kpack_get_kernel(a, want[i].binary, want[i].arch, &d, &n),
            KPACK_SUCCESS);
      } else {
        d = malloc(want[i].size);
        assert_int_equal(kpack_read_kernel(a, want[i].binary, want[i].arch, d,
                                           want[i].size, &n),
                         KPACK_SUCCESS);
      }
      assert_int_equal(n, want[i].size);
      assert_memory_equal(d, expect, n);
      free(d);
      free(expect);
    }
  }
  /* Offsets and stored sizes are the region's, or the table's where a read
   * can tell the table is wrong: the frame's own size field disagrees. */
  for (size_t i = 0; i < 3; i++) {
    kpack_kernel_info_t info;
    uint32_t stored, field;
    assert_int_equal(
        kpack_get_kernel_info(a, want[i].binary, want[i].arch, &info),
        KPACK_SUCCESS);
    size_t off = frame_offset(img, want[i].ordinal);
    memcpy(&stored, img->data + off - 4, 4);
    memcpy(&field, img->data + info.offset - 4, 4);
    if (field == info.stored_size) {
      assert_int_equal(info.offset, off);
      assert_int_equal(info.stored_size, stored);
    }
  }
  kpack_close(a);
  free(path);
}

static void test_writer_emits_frame_sizes_matching_the_region(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  fx_toc e;
  edit_begin(&e, &img);
  msgpack_object* o = edit_at(&e, PATH("zstd_frame_sizes"), NULL);
  assert_int_equal(o->type, MSGPACK_OBJECT_BIN);
  assert_int_equal(o->via.bin.size, 12);
  uint32_t sizes[3];
  frame_sizes_of(&img, sizes);
  assert_memory_equal(o->via.bin.ptr, sizes, 12);
  fx_toc_free(&e);
  free(img.data);
  /* none archives have blobs, no table */
  img = make_image(KPACK_COMPRESSION_NOOP);
  edit_begin(&e, &img);
  for (uint32_t i = 0; i < e.root.via.map.size; i++) {
    const msgpack_object* k = &e.root.via.map.ptr[i].key;
    assert_false(k->via.str.size == 16 &&
                 memcmp(k->via.str.ptr, "zstd_frame_sizes", 16) == 0);
  }
  fx_toc_free(&e);
  free(img.data);
}

static void test_kernels_identical_with_or_without_frame_sizes(void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  assert_fixture_kernels(&img);
  hide_key(&img, PATH("zstd_frame_sizes")); /* as ROCm's writer leaves it */
  assert_fixture_kernels(&img);
  free(img.data);
}

static void test_malformed_frame_sizes_are_ignored(void** state) {
  (void)state;
  uint32_t sizes[4], changed[4];
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  frame_sizes_of(&img, sizes);
  free(img.data);
  struct {
    const char* what;
    size_t len;
    msgpack_object_type type;
  } cases[] = {
      {"one size short", 8, MSGPACK_OBJECT_BIN},
      {"one size too many", 16, MSGPACK_OBJECT_BIN},
      {"not a multiple of 4", 11, MSGPACK_OBJECT_BIN},
      {"empty", 0, MSGPACK_OBJECT_BIN},
      {"wrong total", 12, MSGPACK_OBJECT_BIN},
      {"a str, not a bin", 12, MSGPACK_OBJECT_STR},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    print_message("%s\n", cases[c].what);
    memcpy(changed, sizes, sizeof(sizes));
    changed[3] = 77;
    if (strcmp(cases[c].what, "wrong total") == 0)
      changed[1] += 1;
    img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
    set_frame_sizes(&img, (const uint8_t*)changed, cases[c].len, cases[c].type);
    assert_fixture_kernels(&img);
    free(img.data);
  }
  /* an array of ints holding the right sizes is not the table either */
  img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  fx_toc e;
  edit_begin(&e, &img);
  msgpack_object items[3];
  for (int i = 0; i < 3; i++)
    items[i] = (msgpack_object){.type = MSGPACK_OBJECT_POSITIVE_INTEGER,
                                .via.u64 = sizes[i]};
  msgpack_object* o = edit_at(&e, PATH("zstd_frame_sizes"), NULL);
  o->type = MSGPACK_OBJECT_ARRAY;
  o->via.array.ptr = items;
  o->via.array.size = 3;
  edit_end(&e, &img);
  assert_fixture_kernels(&img);
  free(img.data);
}

/* Tables that pass the open-time check (right length and total) but are
 * wrong: each read compares the frame's own size field and walks the
 * region on a mismatch, so every kernel is still right. */
static void test_stale_frame_sizes_fall_back_to_the_region(void** state) {
  (void)state;
  uint32_t sizes[3], stale[3];
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  frame_sizes_of(&img, sizes);
  free(img.data);
  for (int variant = 0; variant < 3; variant++) {
    if (variant == 0) { /* one size +1, another -1 */
      stale[0] = sizes[0] + 1, stale[1] = sizes[1] - 1, stale[2] = sizes[2];
    } else if (variant == 1) { /* rotated */
      stale[0] = sizes[1], stale[1] = sizes[2], stale[2] = sizes[0];
    } else { /* only the last two swapped */
      stale[0] = sizes[0] - 1, stale[1] = sizes[2] + 1, stale[2] = sizes[1];
    }
    for (int hide_sizes = 0; hide_sizes < 2; hide_sizes++) {
      img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
      set_frame_sizes(&img, (const uint8_t*)stale, 12, MSGPACK_OBJECT_BIN);
      /* without original_size, open itself reads frame headers and must
       * notice the table is wrong there */
      if (hide_sizes)
        hide_key(&img, PATH("toc", "lib/a.so#0", "gfx942", "original_size"));
      assert_fixture_kernels(&img);
      free(img.data);
    }
  }
}

/* With a right table, a corrupt size field in the region is found when that
 * frame is read: that kernel fails, the others are served. */
static void test_corrupt_size_field_under_a_table_fails_that_kernel(
    void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_ZSTD_PER_KERNEL);
  size_t field = frame_offset(&img, 1) - 4;
  img.data[field + 2] ^= 0x40;
  assert_int_equal(get_from(&img, "lib/a.so#0", "gfx942"),
                   KPACK_ERROR_DECOMPRESSION_FAILED);
  assert_int_equal(get_from(&img, "lib/a.so#0", "gfx90a"), KPACK_SUCCESS);
  free(img.data);
}

static unsigned long long rchar_now(void) {
  FILE* io = fopen("/proc/self/io", "r");
  unsigned long long v = 0;
  char line[128];
  assert_non_null(io);
  while (fgets(line, sizeof line, io))
    sscanf(line, "rchar: %llu", &v);
  fclose(io);
  return v;
}

/* 2,000 small frames: walking them reads the region (tens of KiB); with the
 * table, open reads the header, the TOC and the frame count only. */
static void test_open_with_frame_sizes_reads_no_size_field(void** state) {
  (void)state;
  enum { N = 2000 };
  kt_kernel* k = calloc(N, sizeof(*k));
  char(*names)[16] = calloc(N, 16);
  void* data = kt_pattern(2048, 5);
  for (int i = 0; i < N; i++) {
    snprintf(names[i], 16, "b%04d#0", i);
    k[i] = (kt_kernel){names[i], "gfx90a", data, 2048};
  }
  char* path = kt_path(kt_tmp, "small-frames.kpack");
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, N);
  size_t file_size;
  uint8_t* bytes = kt_read_file(path, &file_size);
  uint64_t toc_size = file_size - fx_toc_offset(bytes, file_size);
  free(bytes);
  kpack_archive_t a;
  unsigned long long before = rchar_now();
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  unsigned long long used = rchar_now() - before;
  /* the second /proc read counts itself: allow one page */
  assert_true(used <= 16 + toc_size + 4 + 4096);
  kpack_close(a);
  free(path);
  free(data);
  free(names);
  free(k);
}

/* A table that fits the region while the region's own size fields walk
 * elsewhere (found by fuzz_archive): whether a kernel is served from the
 * table or from the walk depends on that kernel's frame alone, so every
 * order of reads gives every kernel the same status. */
static void test_reads_do_not_depend_on_what_was_read_before(void** state) {
  (void)state;
  char* path = kt_path(getenv("KPACK_SOURCE_DIR"),
                       "tests/fuzz/regressions/archive/"
                       "table-and-walk-disagree-order.kpack");
  static const char* const names[][2] = {
      {"lib/librocblas.so.4#0", "gfx90a:xnack-"},
      {"lib/librocblas.so.4#0", "gfx942:sramecc+:xnack-"},
      {"lib/librocblas.so.5#1", "gfx90a:xnack-"}};
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                   {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  kpack_error_t first[3];
  for (int o = 0; o < 6; o++) {
    kpack_archive_t a;
    assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
    for (int round = 0; round < 2; round++) {
      for (int j = 0; j < 3; j++) {
        int i = orders[o][j];
        void* d;
        size_t n;
        kpack_error_t err =
            kpack_get_kernel(a, names[i][0], names[i][1], &d, &n);
        if (err == KPACK_SUCCESS)
          kpack_free_kernel(d);
        if (o == 0 && round == 0)
          first[i] = err;
        else
          assert_int_equal(err, first[i]);
      }
    }
    kpack_close(a);
  }
  /* The fuzzer's find: one kernel decodes from the table's frame. */
  assert_int_equal(first[0], KPACK_SUCCESS);
  free(path);
}

static void test_threads_racing_past_a_stale_table_agree(void** state) {
  (void)state;
  enum { N = 64, THREADS = 8 };
  kt_kernel k[N];
  char names[N][16];
  for (int i = 0; i < N; i++) {
    snprintf(names[i], 16, "b%d#0", i);
    size_t size = 1000 + (size_t)i * 997;
    k[i] = (kt_kernel){names[i], "gfx942", kt_pattern(size, (uint32_t)i), size};
  }
  char* path = kt_path(kt_tmp, "stale-mt.kpack");
  kt_write_archive(path, KPACK_COMPRESSION_ZSTD_PER_KERNEL, NULL, 0, k, N);
  image img;
  img.data = kt_read_file(path, &img.size);
  img.toc_offset = fx_toc_offset(img.data, img.size);
  fx_toc e;
  edit_begin(&e, &img);
  msgpack_object* o = edit_at(&e, PATH("zstd_frame_sizes"), NULL);
  uint8_t rotated[4 * N];
  memcpy(rotated, o->via.bin.ptr + 4, 4 * (N - 1));
  memcpy(rotated + 4 * (N - 1), o->via.bin.ptr, 4);
  o->via.bin.ptr = (const char*)rotated;
  edit_end(&e, &img);
  kt_write_file(path, img.data, img.size);
  kpack_archive_t a;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  pthread_t t[THREADS];
  reader_args args[THREADS];
  for (int i = 0; i < THREADS; i++) {
    args[i] = (reader_args){a, k, N, (unsigned)i + 1, 0};
    assert_int_equal(pthread_create(&t[i], NULL, reader_thread, &args[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(args[i].failures, 0);
  }
  kpack_close(a);
  free(path);
  free(img.data);
  for (int i = 0; i < N; i++)
    free((void*)k[i].data);
}

static void test_diagnose_names_the_cut_structure_and_the_file_size(
    void** state) {
  (void)state;
  image img = make_image(KPACK_COMPRESSION_NOOP);
  char* path = kt_path(kt_tmp, "cut.kpack");
  char why[256], expected[256];
  kt_write_file(path, img.data, img.size);
  assert_int_equal(kpack_archive_diagnose(path, why, sizeof(why)),
                   KPACK_SUCCESS);
  assert_string_equal(why, "");
  kt_write_file(path, img.data, 1500);
  assert_int_equal(kpack_archive_diagnose(path, why, sizeof(why)),
                   KPACK_ERROR_INVALID_FORMAT);
  snprintf(expected, sizeof(expected),
           "table of contents at 0x%llx starts past end of file (1500 "
           "bytes): truncated?",
           (unsigned long long)img.toc_offset);
  assert_string_equal(why, expected);
  kt_write_file(path, img.data, 12);
  assert_int_equal(kpack_archive_diagnose(path, why, sizeof(why)),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_string_equal(
      why, "header (16 bytes) extends past end of file (12 bytes): truncated?");
  assert_int_equal(kpack_archive_diagnose(path, why, 0),
                   KPACK_ERROR_INVALID_ARGUMENT);
  free(path);
  free(img.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_sizes_from_empty_to_megabytes),
      cmocka_unit_test(test_diagnose_names_the_cut_structure_and_the_file_size),
      cmocka_unit_test(test_roundtrip_thousands_of_kernels),
      cmocka_unit_test(test_idle_readers_are_shared_by_every_archive),
      cmocka_unit_test(test_empty_kernel_is_non_null_pointer_of_size_zero),
      cmocka_unit_test(test_binaries_sorted_bytewise_arches_in_declared_order),
      cmocka_unit_test(test_kernel_info_reads_toc_only),
      cmocka_unit_test(test_kernels_by_position_agree_with_lookups),
      cmocka_unit_test(test_prefetch_passes_over_what_it_cannot_read),
      cmocka_unit_test(test_read_kernel_into_caller_buffer),
      cmocka_unit_test(test_open_reads_header_toc_and_frame_table_only),
      cmocka_unit_test(test_null_arguments_and_out_of_range_indices),
      cmocka_unit_test(test_unknown_binary_or_arch_is_kernel_not_found),
      cmocka_unit_test(test_missing_file_is_file_not_found),
      cmocka_unit_test(test_directory_is_io_error),
      cmocka_unit_test(test_open_failures_leave_errno_set),
      cmocka_unit_test(test_short_file_and_bad_magic_are_invalid_format),
      cmocka_unit_test(test_version_2_is_unsupported),
      cmocka_unit_test(test_toc_offset_out_of_range_is_invalid_format),
      cmocka_unit_test(test_toc_that_is_not_a_map_fails_to_parse),
      cmocka_unit_test(test_truncated_toc_fails_to_parse),
      cmocka_unit_test(test_oversized_declarations_fail_to_parse),
      cmocka_unit_test(test_wrong_typed_known_fields_fail_to_parse),
      cmocka_unit_test(test_unknown_compression_scheme_is_unsupported),
      cmocka_unit_test(test_absent_scheme_means_none),
      cmocka_unit_test(test_unknown_keys_skipped_and_entry_metadata_kept),
      cmocka_unit_test(test_wide_string_and_int_encodings_are_accepted),
      cmocka_unit_test(test_blob_outside_file_is_invalid_format),
      cmocka_unit_test(test_blob_size_differing_from_original_size_is_invalid),
      cmocka_unit_test(test_ordinal_without_blob_or_frame_is_invalid_format),
      cmocka_unit_test(test_zstd_region_outside_file_is_invalid_format),
      cmocka_unit_test(test_frame_table_overrunning_region_is_invalid_format),
      cmocka_unit_test(test_missing_original_size_comes_from_blob_or_frame),
      cmocka_unit_test(
          test_frame_declaring_no_size_without_original_size_is_invalid),
      cmocka_unit_test(test_duplicate_binaries_are_invalid_format),
      cmocka_unit_test(test_lookups_by_own_strings_and_by_copies_agree),
      cmocka_unit_test(test_name_with_embedded_nul_is_invalid_format),
      cmocka_unit_test(test_corrupt_frame_fails_decompression),
      cmocka_unit_test(test_size_mismatch_fails_decompression),
      cmocka_unit_test(test_file_truncated_after_open_is_io_error),
      cmocka_unit_test(test_eight_threads_read_one_handle_concurrently),
      cmocka_unit_test(test_writer_emits_frame_sizes_matching_the_region),
      cmocka_unit_test(test_kernels_identical_with_or_without_frame_sizes),
      cmocka_unit_test(test_malformed_frame_sizes_are_ignored),
      cmocka_unit_test(test_stale_frame_sizes_fall_back_to_the_region),
      cmocka_unit_test(test_corrupt_size_field_under_a_table_fails_that_kernel),
      cmocka_unit_test(test_open_with_frame_sizes_reads_no_size_field),
      cmocka_unit_test(test_reads_do_not_depend_on_what_was_read_before),
      cmocka_unit_test(test_threads_racing_past_a_stale_table_agree),
  };
  return cmocka_run_group_tests_name("archive", tests, kt_tmp_setup,
                                     kt_tmp_teardown);
}
