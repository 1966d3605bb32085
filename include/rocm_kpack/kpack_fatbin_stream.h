/* SPDX-License-Identifier: MIT
 *
 * The code objects of a HIP fat binary as archive entries, streamed: listing
 * reads the bundles' entry tables only, reading holds one code object (or
 * one decompressed CCOB bundle) at a time. `kpack create --fatbin` and
 * `kpack split` both pack fat binaries through this module.
 */
#ifndef KPACK_FATBIN_STREAM_H
#define KPACK_FATBIN_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocm_kpack/kpack_ext.h"

/* One AMDGPU entry of a fat binary: kernel `name#bundle` for `arch`. The
 * strings are valid during the fbs_entry_fn call only. */
typedef struct fbs_entry {
  const char* binary; /* "NAME#N": N is the co_index */
  const char* arch;
  size_t bundle;   /* co_index */
  size_t entry;    /* index in the bundle */
  uint64_t size;   /* bytes of the code object */
  bool compressed; /* the bundle is a CCOB envelope */
} fbs_entry;

/* Return false to stop the listing (after reporting why). */
typedef bool (*fbs_entry_fn)(const fbs_entry* entry, void* user);

/* Calls `fn` for every AMDGPU entry of every bundle of `fatbin` (opened
 * from `path`), bundles in co_index order, entries in stored order; host
 * entries are skipped. An arch that cannot be a directory name, or a bundle
 * that cannot be listed, is reported naming path and code object. With
 * `verbose`, one line per bundle on stderr. False if stopped. */
bool fbs_list(const char* path, const kpack_fatbin_t* fatbin, const char* name,
              bool verbose, fbs_entry_fn fn, void* user);

/* Reads entries one at a time. A compressed bundle is decompressed once and
 * kept until fbs_reader_release(); a plain bundle's entry table is kept
 * likewise and each code object is read into one reused buffer. */
typedef struct fbs_reader {
  struct fbs_open* open; /* bundles kept: (fatbin, index, handle) */
  size_t open_count, open_cap;
  void* code; /* the last code object read from a plain bundle */
  size_t code_cap;
} fbs_reader;

/* The bytes of entry (`bundle`, `entry`) of `fatbin` into *data / *size,
 * valid until the next call on this reader. An empty entry is a valid empty
 * kernel (*size 0). Failures are reported naming `path` and the code
 * object; false then. */
bool fbs_read(fbs_reader* r, const char* path, const kpack_fatbin_t* fatbin,
              size_t bundle, size_t entry, bool compressed, const void** data,
              size_t* size);

/* Frees the bundles kept (call when moving to another binary: entries of
 * one binary come together). The reader stays usable. */
void fbs_reader_release(fbs_reader* r);

/* Frees everything; the reader may be reused as {0}. */
void fbs_reader_free(fbs_reader* r);

#endif /* KPACK_FATBIN_STREAM_H */
