/* SPDX-License-Identifier: MIT
 *
 * The layout contract of a transformed ELF (docs/split.md, "The layout
 * contract"), checked the same way on the linker matrix's programs
 * (test_elf_matrix.c) and on real hipcc output (test_hipcc.c): the
 * structural rules, eu-elflint against the input, and the packaging tools
 * (strip, eu-strip, objcopy, patchelf) after which the file must still
 * load. Each check fails the running cmocka test with a message naming
 * the file and `what` was linked.
 */
#ifndef KPACK_TESTS_ELF_CONTRACT_H
#define KPACK_TESTS_ELF_CONTRACT_H

#include <stdbool.h>
#include <stddef.h>

/* Program headers aligned, not sharing file bytes, .hip_fatbin's memory
 * piece where the contract puts it, PT_PHDR the table and loaded, and in a
 * program with PT_INTERP the table where kernels before 5.18 look for it
 * (the first PT_LOAD's p_vaddr - p_offset plus e_phoff); sections inside
 * the file, aligned and named; the table covered by an allocated section;
 * .rocm_kpack_ref exactly `metadata` (when not NULL, else not empty). */
void kt_check_layout(const char* path, const void* metadata,
                     size_t metadata_size);

/* Only the rule kernels before 5.18 rely on (above), for a file a tool
 * made of an output. */
void kt_check_phdr_at_load_base(const char* path);

/* eu-elflint --gnu-ld finds nothing in `output` it did not find in
 * `input`. */
void kt_check_elflint(const char* input, const char* output, const char* what);

/* Puts `output` through GNU strip (all, --strip-debug), eu-strip (with and
 * without -f), objcopy --only-keep-debug with --add-gnu-debuglink on the
 * stripped file, patchelf --set-rpath and, for a shared object,
 * --set-soname, each writing a file of its own in `dir`, and calls
 * loads(file, ctx) on every result, which must fail the test when the
 * file does not load or behave. */
void kt_check_tools(const char* dir, const char* output, bool shared_object,
                    void (*loads)(const char* file, void* ctx), void* ctx,
                    const char* what);

/* Bytes of .hip_fatbin's address range in the pages that the PT_LOADs of
 * the file at `path` map from the file: how much of the device code is
 * still in the file (all of it before the transform, the zeros of the
 * pages it shares after). */
unsigned long long kt_fatbin_bytes_in_file(const char* path);

#endif /* KPACK_TESTS_ELF_CONTRACT_H */
