/* SPDX-License-Identifier: MIT
 *
 * Bounded reads from a buffer or a file (see input.h).
 */
#include "common/input.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

kpack_error_t kp_pread_all(int fd, void* buf, size_t size, uint64_t offset) {
  uint8_t* p = buf;
  while (size > 0) {
    ssize_t n = pread(fd, p, size, (off_t)offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = 0; /* the file shrank: no system error to show */
      return KPACK_ERROR_IO_ERROR;
    }
    p += n;
    size -= (size_t)n;
    offset += (uint64_t)n;
  }
  return KPACK_SUCCESS;
}

kpack_error_t kp_pwrite_all(int fd, const void* buf, size_t size,
                            uint64_t offset) {
  const uint8_t* p = buf;
  while (size > 0) {
    ssize_t n = pwrite(fd, p, size, (off_t)offset);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = 0;
      return KPACK_ERROR_IO_ERROR;
    }
    p += n;
    size -= (size_t)n;
    offset += (uint64_t)n;
  }
  return KPACK_SUCCESS;
}

kpack_error_t kp_input_open(const char* path, kp_input* in) {
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return errno == ENOENT || errno == ENOTDIR ? KPACK_ERROR_FILE_NOT_FOUND
                                               : KPACK_ERROR_IO_ERROR;
  /* errno says why to callers that tell a passing failure (EMFILE...)
   * from a lasting one: close() must not change it. */
  int reason = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EISDIR : 0;
  if (reason != 0) {
    close(fd);
    errno = reason;
    return KPACK_ERROR_IO_ERROR;
  }
  *in = (kp_input){.fd = fd, .size = (uint64_t)st.st_size};
  return KPACK_SUCCESS;
}

bool kp_input_memory(const void* data, size_t size, kp_input* in) {
  if (data == NULL)
    return false;
  *in = (kp_input){.mem = data, .fd = -1, .size = size};
  return true;
}

kpack_error_t kp_input_slice(const kp_input* in, uint64_t offset, uint64_t size,
                             kp_input* out) {
  if (offset > in->size || size > in->size - offset)
    return KPACK_ERROR_INVALID_FORMAT;
  *out = *in;
  if (in->mem != NULL)
    out->mem = in->mem + offset;
  else
    out->base = in->base + offset;
  out->size = size;
  return KPACK_SUCCESS;
}

kpack_error_t kp_input_read(const kp_input* in, uint64_t offset, void* buf,
                            size_t size) {
  if (offset > in->size || size > in->size - offset)
    return KPACK_ERROR_INVALID_FORMAT;
  if (size == 0)
    return KPACK_SUCCESS;
  if (in->mem != NULL) {
    memcpy(buf, in->mem + offset, size);
    return KPACK_SUCCESS;
  }
  return kp_pread_all(in->fd, buf, size, in->base + offset);
}

kpack_error_t kp_input_view(const kp_input* in, uint64_t offset, size_t size,
                            kp_scratch* scratch, const uint8_t** view) {
  if (offset > in->size || size > in->size - offset)
    return KPACK_ERROR_INVALID_FORMAT;
  if (in->mem != NULL) {
    *view = in->mem + offset;
    return KPACK_SUCCESS;
  }
  if (size > scratch->cap) {
    uint8_t* p = realloc(scratch->data, size);
    if (p == NULL)
      return KPACK_ERROR_OUT_OF_MEMORY;
    scratch->data = p;
    scratch->cap = size;
  }
  kpack_error_t err = kp_input_read(in, offset, scratch->data, size);
  if (err == KPACK_SUCCESS)
    *view = scratch->data;
  return err;
}

void kp_scratch_free(kp_scratch* scratch) {
  free(scratch->data);
  scratch->data = NULL;
  scratch->cap = 0;
}
