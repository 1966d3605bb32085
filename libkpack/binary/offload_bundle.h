/* SPDX-License-Identifier: MIT
 *
 * Internal interface of the offload bundle reader (offload_bundle.c) for the
 * fat binary reader (fatbin.c). A bundle is read from a kp_input that starts
 * where the bundle starts and ends where it may end at the latest (the end
 * of .hip_fatbin), a small read at a time: the entry table alone, one code
 * object, or the whole bundle. Stateless apart from the handles returned.
 */
#ifndef KPACK_OFFLOAD_BUNDLE_H
#define KPACK_OFFLOAD_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/input.h"
#include "rocm_kpack/kpack_bundle.h"

#define OB_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define OB_MAGIC_SIZE 24u
#define OB_CCOB_MAGIC "CCOB"
#define OB_CCOB_MAGIC_SIZE 4u

/* The whole bundle: entries carry their data (pointing into a memory input
 * when the bundle is plain; otherwise owned). Errors as
 * kpack_bundle_parse(), and IO_ERROR. */
kpack_error_t ob_parse(const kp_input* in, kpack_bundle_t** bundle);

/* The entry table alone: data is NULL in every entry; ob_read_entry() reads
 * one later. A CCOB payload is decompressed as far as the table, except
 * version 1, which records no compressed size and is decompressed to its
 * end to find it. Errors as ob_parse(). */
kpack_error_t ob_list(const kp_input* in, kpack_bundle_t** bundle);

/* Copies entry `index` of a bundle from ob_parse() or ob_list() into buf
 * (the entry's size), from the input the bundle was read from. A
 * compressed payload is decompressed from its start to the entry's end
 * through a small window.
 *   IO_ERROR, DECOMPRESSION_FAILED, OUT_OF_MEMORY */
kpack_error_t ob_read_entry(const kpack_bundle_t* bundle, size_t index,
                            void* buf);

/* Bytes the bundle occupies in `in`, keeping nothing. Errors as ob_parse(). */
kpack_error_t ob_measure(const kp_input* in, uint64_t* extent);

#endif /* KPACK_OFFLOAD_BUNDLE_H */
