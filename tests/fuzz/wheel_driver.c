/* SPDX-License-Identifier: MIT
 *
 * Driver of the wheel reader (see fuzz_drivers.h): the input is read as a
 * zip, every entry is streamed and checked against the central directory,
 * the small ones are also parsed as METADATA, and the whole input is
 * unpacked as a wheel into a scratch directory. Apart from fuzz_drivers.c
 * because the wheel modules are internal: only this driver is built with
 * libkpack's own headers.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/input.h"
#include "common/zip.h"
#include "fuzz_drivers.h"
#include "producer/wheel.h"

static void require(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "kpack fuzz: broken invariant: %s\n", what);
    abort();
  }
}

static kpack_error_t count_bytes(void* user, const void* data, size_t size) {
  (void)data;
  *(uint64_t*)user += size;
  return KPACK_SUCCESS;
}

static char* scratch; /* a directory of the driver's own, made once */

static void remove_scratch(void) {
  kf_wheel_teardown();
}

static int remove_one(const char* path, const struct stat* st, int flag,
                      struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void kf_wheel_teardown(void) {
  if (scratch != NULL)
    nftw(scratch, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  free(scratch);
  scratch = NULL;
}

/* METADATA that parses formats into text that parses to the same text. */
static void check_metadata(const char* text, size_t size) {
  kp_metadata md, again;
  char *out, *out2;
  size_t n, n2;
  kpack_error_t err = kp_metadata_parse(text, size, &md);
  require(err == KPACK_SUCCESS || err == KPACK_ERROR_INVALID_METADATA,
          "METADATA: undocumented status");
  if (err != KPACK_SUCCESS)
    return;
  require(kp_metadata_format(&md, &out, &n) == KPACK_SUCCESS, "format");
  require(kp_metadata_parse(out, n, &again) == KPACK_SUCCESS,
          "formatted METADATA parses");
  require(kp_metadata_format(&again, &out2, &n2) == KPACK_SUCCESS && n == n2 &&
              memcmp(out, out2, n) == 0,
          "METADATA formats the same twice");
  free(out);
  free(out2);
  kp_metadata_free(&md);
  kp_metadata_free(&again);
}

/* Unpacks the input as fz-1.0-py3-none-any.whl; true when it unpacked. */
static bool unpack(const uint8_t* data, size_t size) {
  char path[4096], dir[4096];
  if (scratch == NULL) {
    const char* tmp = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof(tmpl), "%s/kpack-fuzz-wheel.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    require(mkdtemp(tmpl) != NULL, "a scratch directory");
    scratch = strdup(tmpl);
    atexit(remove_scratch);
  }
  snprintf(path, sizeof(path), "%s/fz-1.0-py3-none-any.whl", scratch);
  snprintf(dir, sizeof(dir), "%s/out", scratch);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  require(fd >= 0 && kp_pwrite_all(fd, data, size, 0) == KPACK_SUCCESS,
          "writing the input");
  close(fd);
  kp_wheel* w = NULL;
  kpack_error_t err = kp_wheel_unpack(path, dir, &w);
  require(err == KPACK_SUCCESS || err == KPACK_ERROR_INVALID_FORMAT ||
              err == KPACK_ERROR_INVALID_METADATA ||
              err == KPACK_ERROR_UNSUPPORTED_VERSION ||
              err == KPACK_ERROR_DECOMPRESSION_FAILED ||
              err == KPACK_ERROR_IO_ERROR,
          "unpack: undocumented status");
  require((err == KPACK_SUCCESS) == (w != NULL), "unpack: a half result");
  for (size_t i = 0; w != NULL && i < w->file_count; i++) {
    char file[8192];
    struct stat st;
    snprintf(file, sizeof(file), "%s/%s", dir, w->files[i].path);
    require(lstat(file, &st) == 0 && S_ISREG(st.st_mode) &&
                (uint64_t)st.st_size == w->files[i].size,
            "an unpacked file is where and what the wheel says");
  }
  kp_wheel_free(w);
  nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
  return err == KPACK_SUCCESS;
}

size_t kf_wheel_input(const uint8_t* data, size_t size) {
  kp_zip* zip = NULL;
  size_t used = 0;
  kpack_error_t err = kp_zip_open_memory(data, size, &zip);
  require(err == KPACK_SUCCESS || err == KPACK_ERROR_INVALID_FORMAT ||
              err == KPACK_ERROR_UNSUPPORTED_VERSION ||
              err == KPACK_ERROR_OUT_OF_MEMORY,
          "zip open: undocumented status");
  require((err == KPACK_SUCCESS) == (zip != NULL), "zip open: a half result");
  for (size_t i = 0; i < kp_zip_count(zip); i++) {
    const kp_zip_entry* e = kp_zip_entry_at(zip, i);
    uint64_t got = 0;
    err = kp_zip_read(zip, i, count_bytes, &got);
    require(err == KPACK_SUCCESS || err == KPACK_ERROR_INVALID_FORMAT ||
                err == KPACK_ERROR_DECOMPRESSION_FAILED,
            "zip read: undocumented status");
    require(got <= e->size, "zip read: more bytes than the directory says");
    if (err != KPACK_SUCCESS)
      continue;
    require(got == e->size, "zip read: fewer bytes than the directory says");
    used++;
    char* text;
    size_t n;
    if (e->size <= 65536 &&
        kp_zip_read_alloc(zip, i, 65536, &text, &n) == KPACK_SUCCESS) {
      check_metadata(text, n);
      free(text);
    }
  }
  kp_zip_close(zip);
  return used + (unpack(data, size) ? 1 : 0);
}
