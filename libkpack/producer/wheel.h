/* SPDX-License-Identifier: MIT
 *
 * Python wheels (the binary distribution format, PEP 427 and its
 * successors), for splitting a wheel: file names, the .dist-info files
 * (METADATA, WHEEL, RECORD), unpacking a wheel into a directory and
 * packing a directory into a wheel, deterministically. The module owns
 * nothing global; each kp_wheel and kp_metadata is the caller's. Status
 * values are those of kpack_types.h.
 */
#ifndef KPACK_WHEEL_H
#define KPACK_WHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rocm_kpack/kpack_types.h"

/* ---- File names ---------------------------------------------------------- */

/* {distribution}-{version}(-{build})?-{python}-{abi}-{platform}.whl */
typedef struct kp_wheel_name {
  char* distribution; /* as in the file name (escaped) */
  char* version;
  char* build; /* NULL when the name has no build tag */
  char* tags;  /* "python-abi-platform", e.g. "cp311-cp311-linux_x86_64" */
} kp_wheel_name;

/* Splits a wheel's file name (a path's directories are ignored).
 *   INVALID_ARGUMENT  a pointer is NULL
 *   INVALID_FORMAT    no ".whl", not 5 or 6 '-'-separated parts, an empty
 *                     part, a build tag that does not start with a digit,
 *                     or a character outside [A-Za-z0-9._+!] in a part
 *   OUT_OF_MEMORY     allocation failed */
kpack_error_t kp_wheel_name_parse(const char* file_name, kp_wheel_name* name);

void kp_wheel_name_free(kp_wheel_name* name);

/* A project name as wheel file names and .dist-info directories spell it:
 * lower case, each run of '-', '_' and '.' one '_' ("Foo.Bar-baz" ->
 * "foo_bar_baz"). malloc'ed; NULL when out of memory. */
char* kp_wheel_escape_name(const char* project);

/* The file name of a wheel of `project` `version` (its '-' written '_'),
 * with an optional build tag (NULL for none) and `tags`
 * ("python-abi-platform", compressed tag sets such as "py2.py3" allowed).
 *   INVALID_ARGUMENT  a pointer is NULL, or a part is empty or holds a
 *                     character a wheel name cannot carry
 *   OUT_OF_MEMORY     allocation failed */
kpack_error_t kp_wheel_file_name(const char* project, const char* version,
                                 const char* build, const char* tags,
                                 char** file_name);

/* ---- METADATA ------------------------------------------------------------ */

/* Core metadata: "Field: value" lines (a value may continue on lines that
 * start with a space or tab), a blank line, then the description. Fields
 * keep their order and spelling; the body is kept byte for byte. */
typedef struct kp_metadata_field {
  char* name;
  char* value; /* continuation lines included, with their "\n" */
} kp_metadata_field;

typedef struct kp_metadata {
  kp_metadata_field* fields;
  size_t count, cap;
  char* body; /* after the blank line; NULL when there is none */
} kp_metadata;

/* Parses METADATA text of `size` bytes into *md (zero it first).
 *   INVALID_ARGUMENT  a pointer is NULL
 *   INVALID_METADATA  a NUL byte; a header line without ':' or whose
 *                     field name is empty or holds a space; no Name or no
 *                     Version field
 *   OUT_OF_MEMORY     allocation failed */
kpack_error_t kp_metadata_parse(const char* text, size_t size, kp_metadata* md);

/* The value of the first field called `name` (ASCII case ignored), or
 * NULL. */
const char* kp_metadata_get(const kp_metadata* md, const char* name);

/* Sets the first field called `name` to `value`, or appends it. */
kpack_error_t kp_metadata_set(kp_metadata* md, const char* name,
                              const char* value);

/* Adds "Field: value" (a whole line, without its newline) after the last
 * field of the same name, or after every field when there is none, as
 * Requires-Dist and Provides-Extra lines are added to a wheel.
 *   INVALID_ARGUMENT  no ':', an empty name or a newline in the line */
kpack_error_t kp_metadata_add_line(kp_metadata* md, const char* line);

/* The text: one "Field: value\n" per field, then "\n" and the body when
 * there is one. *text is malloc'ed and NUL-terminated. */
kpack_error_t kp_metadata_format(const kp_metadata* md, char** text,
                                 size_t* size);

void kp_metadata_free(kp_metadata* md);

/* ---- Unpacking ----------------------------------------------------------- */

typedef struct kp_wheel_file {
  char* path;    /* relative to the directory, '/'-separated */
  uint32_t mode; /* permission bits it was written with */
  uint64_t size;
} kp_wheel_file;

/* A wheel unpacked into a directory, and what its .dist-info says. */
typedef struct kp_wheel {
  kp_wheel_name name; /* from the wheel's file name */
  char* dist_info;    /* "<dist>-<version>.dist-info" as in the wheel */
  kp_metadata metadata;
  char** tags; /* the WHEEL file's Tag lines, in order */
  size_t tag_count;
  bool root_is_purelib;
  kp_wheel_file* files; /* every file written, in archive order */
  size_t file_count;
} kp_wheel;

/* Unpacks the wheel at `path` into `dir` (created if missing; an existing
 * one must be empty), each file with mode 0644, or 0755 when the archive
 * marks it executable, and checks it against the RECORD: every file but
 * RECORD (and its signatures) has a row whose sha256 and size match, and
 * every row names a file of the wheel. On failure *wheel is NULL and the
 * files written so far stay in `dir`.
 *   INVALID_ARGUMENT      a pointer is NULL; dir exists and is not empty
 *   FILE_NOT_FOUND        no file at path, or no directory to make dir in
 *   IO_ERROR              the wheel cannot be read, or a file not written
 *                         (errno says why)
 *   INVALID_FORMAT        not a zip (kp_zip_open()), a bad file name, an
 *                         entry name that is absolute, has an empty, "."
 *                         or ".." component, or a file and a directory of
 *                         one name; no single top-level .dist-info of the
 *                         file name's distribution and version; a file
 *                         whose hash or size differs from its RECORD row
 *   INVALID_METADATA      METADATA, WHEEL or RECORD missing or malformed
 *                         (a RECORD row that is not path,sha256=...,size,
 *                         a row for a file the wheel does not hold)
 *   UNSUPPORTED_VERSION   a Wheel-Version other than 1.x, or a compression
 *                         method other than stored or deflate
 *   DECOMPRESSION_FAILED  an entry's data is corrupt
 *   OUT_OF_MEMORY         allocation failed */
kpack_error_t kp_wheel_unpack(const char* path, const char* dir,
                              kp_wheel** wheel);

/* NULL is a no-op. */
void kp_wheel_free(kp_wheel* wheel);

/* ---- Packing ------------------------------------------------------------- */

typedef struct kp_wheel_pack_options {
  const char* project; /* METADATA Name, and the file name's distribution */
  const char* version;
  const char* build; /* build tag, or NULL */
  const char* tags;  /* "python-abi-platform", as in the file name */
  /* The METADATA to start from (its Name and Version are replaced), or
   * NULL: the directory's own .dist-info/METADATA, else a new one with
   * Metadata-Version 2.1, Name and Version. */
  const kp_metadata* metadata;
  /* "Field: value" lines added to it (kp_metadata_add_line()), e.g.
   * "Provides-Extra: device-gfx90a". */
  const char* const* extra_metadata;
  size_t extra_metadata_count;
  bool root_is_purelib;
  int level; /* deflate level 1-9; 0 stores */
  /* Files whose path ends with it are stored whatever the level (data
   * compressed already, e.g. ".kpack"); NULL for none. */
  const char* stored_suffix;
} kp_wheel_pack_options;

/* Packs every file below `dir` into a wheel written to `out_dir` under the
 * name kp_wheel_file_name() gives (*out_path, malloc'ed, when not NULL).
 * A top-level "*.dist-info" directory (at most one) is the wheel's own:
 * its files move to "<dist>-<version>.dist-info" but for METADATA, WHEEL,
 * RECORD and RECORD's signatures, which are written anew (and INSTALLER,
 * REQUESTED and direct_url.json, which belong to installations, not
 * wheels); a top-level "*.data" directory (at most one) becomes
 * "<dist>-<version>.data". Symbolic links are followed. Files go in
 * byte-wise order of their paths, the .dist-info files last and RECORD
 * the very last, each dated 1980-01-01 with mode 0644 or 0755 (any execute
 * bit): the same directory and options give the same bytes. The wheel is
 * written to a temporary file beside its final name and renamed over it.
 *   INVALID_ARGUMENT  a pointer is NULL, project, version or tags cannot
 *                     make a wheel name, a bad level, an extra line
 *                     kp_metadata_add_line() refuses, two top-level
 *                     .dist-info or .data directories, or a file that is
 *                     neither regular nor a directory
 *   FILE_NOT_FOUND    no directory `dir`
 *   IO_ERROR          a file could not be read or the wheel written
 *   INVALID_METADATA  the directory's METADATA is malformed
 *   OUT_OF_MEMORY     allocation failed */
kpack_error_t kp_wheel_pack(const char* dir, const char* out_dir,
                            const kp_wheel_pack_options* options,
                            char** out_path);

#endif /* KPACK_WHEEL_H */
