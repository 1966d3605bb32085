/* SPDX-License-Identifier: MIT
 *
 * Classification of device-code files by their own target: the ELF
 * e_flags of a code object, the entry ids of an offload bundle.
 */
#include "arch_content.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* The processor of a bundle whose HIP entries are all for one. */
static bool bundle_processor(const void* data, size_t size, char* processor,
                             size_t out_size, const char** what) {
  kpack_bundle_t* bundle = NULL;
  kpack_bundle_info_t info;
  bool one = false;
  if (kpack_bundle_parse(data, size, &bundle) != KPACK_SUCCESS ||
      kpack_bundle_get_info(bundle, &info) != KPACK_SUCCESS)
    goto done;
  processor[0] = '\0';
  for (size_t i = 0; i < info.entry_count; i++) {
    kpack_bundle_entry_t e;
    if (kpack_bundle_get_entry(bundle, i, &e) != KPACK_SUCCESS)
      goto done;
    if (e.arch == NULL)
      continue; /* the host entry */
    size_t n = strcspn(e.arch, ":");
    if (processor[0] == '\0' && n < out_size) {
      snprintf(processor, out_size, "%.*s", (int)n, e.arch);
    } else if (strlen(processor) != n || strncmp(processor, e.arch, n) != 0) {
      goto done; /* several processors: not one GPU's file */
    }
  }
  one = processor[0] != '\0';
  *what = info.compression == KPACK_BUNDLE_UNCOMPRESSED
              ? "offload bundle"
              : "compressed offload bundle";
done:
  if (!one)
    processor[0] = '\0'; /* not the first of several */
  kpack_bundle_free(bundle);
  return one;
}

bool ac_file_processor(const char* path, char* processor, size_t size,
                       const char** what, bool* failed) {
  static const char bundle_magic[] = "__CLANG_OFFLOAD_BUNDLE__";
  unsigned char head[64];
  struct stat st;
  bool found = false;
  void* map = MAP_FAILED;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0) {
    cli_error("%s: %s", path, strerror(errno));
    *failed = true;
    goto done;
  }
  ssize_t n = pread(fd, head, sizeof(head), 0);
  if (n < 0) {
    cli_error("%s: %s", path, strerror(errno));
    *failed = true;
    goto done;
  }
  bool code_object = kpack_is_code_object(head, (size_t)n);
  bool bundle = (n >= 24 && memcmp(head, bundle_magic, 24) == 0) ||
                (n >= 4 && memcmp(head, "CCOB", 4) == 0);
  if (!code_object && !bundle)
    goto done;
  map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    cli_error("%s: %s", path, strerror(errno));
    *failed = true;
    goto done;
  }
  if (code_object) {
    kpack_code_object_t* co = NULL;
    kpack_code_object_info_t info;
    if (kpack_code_object_parse(map, (size_t)st.st_size, &co) ==
            KPACK_SUCCESS &&
        kpack_code_object_get_info(co, &info) == KPACK_SUCCESS &&
        info.processor[0] != '\0') {
      snprintf(processor, size, "%s", info.processor);
      *what = "code object";
      found = true;
    }
    kpack_code_object_free(co);
  } else {
    found = bundle_processor(map, (size_t)st.st_size, processor, size, what);
  }
done:
  if (map != MAP_FAILED)
    munmap(map, (size_t)st.st_size);
  if (fd >= 0)
    close(fd);
  return found;
}
