/* SPDX-License-Identifier: MIT
 *
 * What the kpack tool shows of an AMDGPU code object (code_object_view.c):
 * `kpack info` on a code object file, and the per-kernel resources and
 * JSON members that `kpack list --kernels` and `kpack info` share.
 */
#ifndef KPACK_CLI_CODE_OBJECT_VIEW_H
#define KPACK_CLI_CODE_OBJECT_VIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "rocm_kpack/kpack_ext.h"

/* The file starts like an AMDGPU code object: ELF64, little-endian,
 * e_machine 224 (what `kpack cat` writes and kpackfs shows as
 * kernel.hsaco). */
bool cli_is_code_object(const char* path);
/* `kpack info` on a code object file: target, version and the kernel table
 * (after a blank line unless `first`), or with `json` one object of
 * info's JSON array; with `demangle` (-C), kernel names as c++filt shows
 * them (JSON keeps "name" and adds "demangled"). Returns an exit status. */
int cli_code_object_info(const char* path, cli_json* json, bool first,
                         bool demangle);
/* `kpack info --metadata FILE`: the metadata note as indented JSON and a
 * newline, as kpackfs shows it in metadata.json. Returns an exit status. */
int cli_code_object_metadata(const char* path);
/* What a kpack_code_object_parse() status means for a code object, e.g.
 * "metadata note of the wrong shape" (cli_error_text() speaks of archives). */
const char* cli_code_object_error_text(kpack_error_t err);

/* The resource columns of one kernel, tab-separated for cli_table_row(), in
 * the order of the `kernels` file a mount shows; "-" where the note has no
 * value. */
void cli_co_resource_cells(const kpack_co_kernel_t* k, char* out, size_t cap);
/* Their headers: the keys of the `kernels` file in capitals (VGPR, LDS...). */
const char* const* cli_co_resource_headers(void);
/* A kernel's members in an open JSON object: name, symbol and every count,
 * named as in the note without the leading dot (null when absent). */
void cli_co_json_kernel_members(cli_json* w, const kpack_co_kernel_t* k);

#endif /* KPACK_CLI_CODE_OBJECT_VIEW_H */
