/* SPDX-License-Identifier: MIT
 *
 * One driver per libkpack entry point that takes untrusted bytes. The
 * libFuzzer harnesses (fuzz_*.c) call them with generated input; the cmocka
 * replay suite (tests/test_fuzz_replay.c) calls them with the committed
 * corpus and every past crash, so each finding stays a regression test.
 *
 * A driver returns normally for any input. It abort()s when libkpack breaks
 * one of its own promises (a status outside the enum, a half-open handle,
 * two read paths disagreeing, a loaded code object that is not one of the
 * fixture's kernels), so such a bug is a finding even when nothing crashes.
 */
#ifndef KPACK_FUZZ_DRIVERS_H
#define KPACK_FUZZ_DRIVERS_H

#include <stddef.h>
#include <stdint.h>

/* The loader fixture, shared with make_corpus.c so that the HIPK seeds name
 * archives that exist. Below a fresh directory ROOT:
 *   ROOT/lib/libfoo.so                       the "binary" (binary_path)
 *   ROOT/.kpack/foo_gfx942.kpack             zstd, gfx942 + its feature forms
 *   ROOT/.kpack/foo_gfx90a.kpack             none, gfx90a
 *   ROOT/.kpack/foo_gfx90a:xnack-.kpack      zstd, gfx90a:xnack-, #1 only
 * Every archive holds kernels of KF_KERNEL_NAME "#0" / "#1". */
#define KF_KERNEL_NAME "lib/libfoo.so"
#define KF_BINARY_PATH "lib/libfoo.so"
#define KF_ARCHIVE_PATTERN "../.kpack/foo_@GFXARCH@.kpack"

/* Archive entry point: the input is a whole .kpack file. It is written to a
 * memfd and opened as /proc/self/fd/N; every query and every kernel is read
 * both ways, then the file is cut in half under the open handle and every
 * kernel is read again. Returns how many kernels read before the cut. */
size_t kf_archive_input(const uint8_t* data, size_t size);

/* Loader entry point: the input is HIPK metadata. It is placed so that it
 * ends exactly at the end of a mapping followed by an inaccessible page, so
 * a read past the bytes given faults. Needs kf_hipk_setup() first; the
 * environment's ROCM_KPACK_* variables are cleared there. Three loads go
 * through the embedded search paths, one through ROCM_KPACK_PATH; returns
 * how many of the four succeeded. */
void kf_hipk_setup(void);
size_t kf_hipk_input(const uint8_t* data, size_t size);
void kf_hipk_teardown(void);

/* Offload bundle / fat binary entry point: the input is parsed both as a
 * bundle (plain or CCOB) and as an ELF image; every entry's bytes are
 * touched, and every bundle is also listed and read an entry at a time,
 * which must agree with the whole parse. Returns how many entries were
 * walked. */
size_t kf_bundle_input(const uint8_t* data, size_t size);

/* Host binary entry point: the input is read as a HIP host ELF by
 * kpack_host_open_memory(); every record is fetched and its status checked
 * against its problem, and the search paths of HIPK records are resolved.
 * Returns how many records read without a problem. */
size_t kf_host_input(const uint8_t* data, size_t size);

/* Code object entry point: the input is parsed as an AMDGPU code object;
 * every kernel, the target and the note's JSON (pretty and compact) are
 * walked, and what the header promises is checked. Returns 0 if it does
 * not parse, else 1 + the number of kernels. */
size_t kf_code_object_input(const uint8_t* data, size_t size);

/* Transform entry point: the input is a host ELF, classified and, when
 * fat, transformed (kpack_transform.h). A refusal must carry a message and
 * a documented status; an output must open as a kpack-ified binary whose
 * every record reads, with its index and the metadata given. Returns how
 * many records were transformed. */
size_t kf_transform_input(const uint8_t* data, size_t size);

/* Rule file entry point of `kpack split --per-arch` (the library's
 * producer/arch_rules.h, in tests/fuzz/rules_driver.c): the bytes before
 * the first NUL are a rule file, loaded from a memfd as /proc/self/fd/N (a
 * refused file keeps the rules before its bad line); the bytes after it
 * are paths, one a line (the first KF_RULES_MAX_PATHS), placed by the rules
 * after a fixed set of paths the shipped rules are written for. Each
 * placement must be the first rule ar_pattern_match() accepts, with a known
 * processor that fits its buffer and, for <arch>, is the part of the path
 * it matched. Returns how many paths, fixed or given, a rule matched. */
#define KF_RULES_MAX_PATHS 32 /* matching is fuzzed, not a tree's walk */
size_t kf_rules_input(const uint8_t* data, size_t size);

/* Wheel entry point (tests/fuzz/wheel_driver.c, built with libkpack's
 * internal headers): the input is opened as a zip, every entry streamed
 * (never more bytes than the central directory says, exactly as many on
 * success) and the small ones parsed as METADATA (what parses formats to
 * text that parses and formats the same); then it is unpacked as the wheel
 * fz-1.0-py3-none-any.whl into a scratch directory under $TMPDIR, where
 * every file it reports must be, with its size. Returns how many entries
 * read, plus 1 when it unpacked. kf_wheel_teardown() removes the scratch
 * directory (also at exit). */
size_t kf_wheel_input(const uint8_t* data, size_t size);
void kf_wheel_teardown(void);

#endif /* KPACK_FUZZ_DRIVERS_H */
