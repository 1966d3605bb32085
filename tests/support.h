/* SPDX-License-Identifier: MIT
 *
 * Helpers shared by the cmocka suites: temporary directories, deterministic
 * kernel bytes and archives written by libkpack's own writer. Every helper
 * fails the running test (cmocka assert) instead of returning an error.
 */
#ifndef KPACK_TESTS_SUPPORT_H
#define KPACK_TESTS_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "rocm_kpack/kpack_ext.h"

typedef struct kt_kernel {
  const char* binary;
  const char* arch;
  const void* data;
  size_t size;
} kt_kernel;

/* A fresh directory under $TMPDIR (or /tmp); free() the result. */
char* kt_tmpdir(void);
/* rm -rf; tolerates a missing path. */
void kt_rmtree(const char* path);
/* dir + "/" + name; free() the result. */
char* kt_path(const char* dir, const char* name);
/* `size` deterministic bytes for `seed`: compressible but not trivially. */
void* kt_pattern(size_t size, uint32_t seed);
/* Whole-file read and write; kt_read_file returns NULL if it cannot. */
void* kt_read_file(const char* path, size_t* size);
void kt_write_file(const char* path, const void* data, size_t size);
/* Writes an archive with the project's writer; arches may be NULL. */
void kt_write_archive(const char* path, kpack_compression_scheme_t scheme,
                      const char* const* arches, size_t arch_count,
                      const kt_kernel* kernels, size_t kernel_count);

#endif /* KPACK_TESTS_SUPPORT_H */
