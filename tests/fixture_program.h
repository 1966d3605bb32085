/* SPDX-License-Identifier: MIT
 *
 * Real HIP-like host programs, linked by the system compiler at test time:
 * a shared object, a PIE or a non-PIE executable whose .hip_fatbin holds the
 * given offload bundles and whose .hipFatBinSegment holds one HIPF record
 * per bundle, the pointer filled the way the linker does it for the program
 * kind (RELATIVE in .rela.dyn or .relr.dyn, or stored). Each program has a
 * constructor that reads its own records at run time and keeps a report:
 * per record one line "MAGIC VERSION RESERVED HEX", HEX being up to 256
 * bytes at the record's pointer (never past its page). A shared object
 * exports it as `const char* fx_program_report(void)`; an executable
 * prints it on stdout.
 *
 * Independent of any test framework, like fixture_fatbin.h; a builder that
 * cannot write or compile prints why and returns false.
 */
#ifndef KPACK_TESTS_FIXTURE_PROGRAM_H
#define KPACK_TESTS_FIXTURE_PROGRAM_H

#include <stdbool.h>
#include <stddef.h>

#include "fixture_fatbin.h"

typedef enum fx_program_kind {
  FX_PROGRAM_SHARED, /* -shared -fPIC */
  FX_PROGRAM_PIE,    /* -pie -fPIE */
  FX_PROGRAM_EXEC,   /* -no-pie: ET_EXEC */
} fx_program_kind;

/* Where the linker puts .hip_fatbin. */
typedef enum fx_fatbin_place {
  FX_FATBIN_DEFAULT, /* where the linker puts an orphan: among the
                        read-only data, between other sections */
  FX_FATBIN_START,   /* after .fini, aligned to the largest page: the
                        first section of its segment */
  FX_FATBIN_END,     /* after .eh_frame: the last section of its segment */
} fx_fatbin_place;

typedef struct fx_program_opts {
  fx_program_kind kind;
  const fx_buf* bundles; /* bundle i is placed aligned in .hip_fatbin */
  size_t bundle_count;
  /* Record i points at bundle target[i]; when NULL, the bundles in reverse
   * order (so that record order and bundle order differ). */
  const size_t* target;
  size_t record_count; /* bundle_count when 0 */
  bool relr;           /* -Wl,-z,pack-relative-relocs: .relr.dyn */
  bool emit_relocs;    /* -g -Wl,--emit-relocs: static relocations kept */
  unsigned align_log2; /* bundle alignment: 1 << align_log2 (4096 when 0) */
  const char* flags;   /* more compiler and linker flags, or NULL */
  fx_fatbin_place place;
  /* An ld.lld to link with (e.g. "/usr/bin/ld.lld-14"); the compiler's
   * default linker when NULL. */
  const char* lld;
  bool tls;     /* thread-local data (.tdata, .tbss) the constructor uses */
  bool big_bss; /* a 200 MiB .bss the constructor touches */
} fx_program_opts;

/* Builds the program at `out`, with its sources and bundles in `dir`.
 * Returns false (having printed why) when the compiler fails. */
bool fx_build_program(const char* dir, const fx_program_opts* opts,
                      const char* out);

/* A shared object whose .hip_fatbin holds one bundle of the `count`
 * entries `e`, one record pointing at it; built in `dir` as
 * fx_build_program() does. */
bool fx_build_library(const char* dir, const fx_entry* e, size_t count,
                      const char* out);

/* Parses one report line: magic, version, reserved and the bytes at the
 * record's pointer into `bytes` (at most `cap`; *size of them). Returns the
 * start of the next line, or NULL when `line` holds no record. */
const char* fx_parse_report(const char* line, unsigned* magic,
                            unsigned* version, unsigned long long* reserved,
                            unsigned char* bytes, size_t cap, size_t* size);

#endif /* KPACK_TESTS_FIXTURE_PROGRAM_H */
