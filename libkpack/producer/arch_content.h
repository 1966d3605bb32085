/* SPDX-License-Identifier: MIT
 *
 * Which GPU processor a file's own content is for, when it is device code
 * on its own (an AMDGPU code object, a clang offload bundle or a CCOB):
 * what `kpack split --per-arch` places such files by, whatever their name.
 */
#ifndef KPACK_PRODUCER_ARCH_CONTENT_H
#define KPACK_PRODUCER_ARCH_CONTENT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/report.h"

/* True when the regular file `path` is device code for one processor:
 * `processor` (of `size` bytes) gets it ("gfx90a", features left out) and
 * *what says what the file is ("code object", "offload bundle",
 * "compressed offload bundle"). False for any other file (*what left
 * alone), and for a bundle of several processors, which is no one GPU's
 * (`processor` is then "" and *what says "offload bundle for several
 * processors"). A file that cannot be read sets *failed, after a
 * message naming it to `report`. Only the headers are read (the file is
 * mapped), but for a CCOB, which is decompressed. */
bool ac_file_processor(const char* path, char* processor, size_t size,
                       const char** what, bool* failed, kp_report* report);

#endif /* KPACK_PRODUCER_ARCH_CONTENT_H */
