/* SPDX-License-Identifier: MIT
 *
 * Shared test helpers (see support.h): temporary trees, deterministic kernel
 * bytes, and archives produced by the project's own writer.
 */
#include "support.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char* kt_tmpdir(void) {
  const char* base = getenv("TMPDIR");
  char* path;
  assert_true(asprintf(&path, "%s/kpack-test.XXXXXX",
                       base && *base ? base : "/tmp") > 0);
  assert_non_null(mkdtemp(path));
  return path;
}

static int remove_entry(const char* path, const struct stat* st, int flag,
                        struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void kt_rmtree(const char* path) {
  if (path != NULL)
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char* kt_path(const char* dir, const char* name) {
  char* path;
  assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
  return path;
}

void* kt_pattern(size_t size, uint32_t seed) {
  uint8_t* p = malloc(size ? size : 1);
  uint32_t x = seed * 2654435761u + 1;
  assert_non_null(p);
  /* Runs of a few repeated symbols from a small alphabet: zstd finds
   * structure, but no two seeds give the same bytes. */
  for (size_t i = 0; i < size;) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    size_t run = 1 + (x & 7);
    uint8_t value = (uint8_t)((x >> 8) % 23 + seed);
    for (size_t j = 0; j < run && i < size; j++)
      p[i++] = value;
  }
  return p;
}

void* kt_read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* data = malloc(n > 0 ? (size_t)n : 1);
  assert_non_null(data);
  size_t got = fread(data, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) {
    free(data);
    return NULL;
  }
  *size = (size_t)n;
  return data;
}

void kt_write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

void kt_write_archive(const char* path, kpack_compression_scheme_t scheme,
                      const char* const* arches, size_t arch_count,
                      const kt_kernel* kernels, size_t kernel_count) {
  kpack_writer_options_t opts = {
      .scheme = scheme,
      .group_name = "test",
      .gfx_arch_family = "gfxtest",
      .gfx_arches = arches,
      .gfx_arch_count = arch_count,
  };
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &opts, &w), KPACK_SUCCESS);
  for (size_t i = 0; i < kernel_count; i++)
    assert_int_equal(
        kpack_writer_add_kernel(w, kernels[i].binary, kernels[i].arch,
                                kernels[i].data, kernels[i].size),
        KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
}
