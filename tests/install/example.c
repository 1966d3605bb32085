/* SPDX-License-Identifier: MIT
 *
 * An installed-library client: writes an archive with the extension API,
 * then loads a kernel back through the published API. `make install-check`
 * builds it with nothing but `pkg-config --cflags --libs rocm_kpack`.
 */
#include <stdio.h>
#include <string.h>

#include <rocm_kpack/kpack.h>
#include <rocm_kpack/kpack_ext.h>

int main(int argc, char** argv) {
  const char* path = argc > 1 ? argv[1] : "example.kpack";
  static const char code[] =
      "\x7f"
      "ELF pretend code object";
  kpack_writer_options_t options = {.scheme = KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                                    .group_name = "example"};
  kpack_writer_t* writer;
  kpack_error_t err = kpack_writer_create(path, &options, &writer);
  if (err == KPACK_SUCCESS)
    err = kpack_writer_add_kernel(writer, "lib/libexample.so#0", "gfx942", code,
                                  sizeof code);
  if (err == KPACK_SUCCESS)
    err = kpack_writer_finish(writer);
  if (err != KPACK_SUCCESS) {
    fprintf(stderr, "example: writing %s: %s\n", path, kpack_error_string(err));
    return 1;
  }

  kpack_archive_t archive;
  void* data;
  size_t size;
  if ((err = kpack_open(path, &archive)) != KPACK_SUCCESS) {
    fprintf(stderr, "example: %s: %s\n", path, kpack_error_string(err));
    return 1;
  }
  err =
      kpack_get_kernel(archive, "lib/libexample.so#0", "gfx942", &data, &size);
  int ok = err == KPACK_SUCCESS && size == sizeof code &&
           memcmp(data, code, size) == 0;
  printf("%s: loaded %zu bytes for gfx942: %s\n", path, size,
         ok ? "ok" : kpack_error_string(err));
  kpack_free_kernel(data);
  kpack_close(archive);
  return ok ? 0 : 1;
}
