/* SPDX-License-Identifier: MIT
 *
 * libkpack extensions beyond ROCm's published API (kpack.h), one header per
 * concern; including this one alone gives the whole extended API:
 *   kpack_archive.h         one archive: kernel info without decompression,
 *                           reads into caller memory, TOC header getters,
 *                           error names
 *   kpack_writer.h          the streaming archive writer
 *   kpack_entry_metadata.h  per-kernel TOC metadata maps
 *   kpack_layout.h          the tree an archive shows as files
 *   kpack_paths.h           ':'-separated lists ("\:" a literal colon) and
 *                           directories of archives
 *   kpack_trace.h           the loader's search as events (kpack resolve)
 *   kpack_kcache.h          the shared decompressed-kernel cache (kpackfs)
 *   kpack_bundle.h          clang offload bundles and HIP fat binaries
 *   kpack_fatbin_stream.h   a fat binary's code objects, streamed as
 *                           archive entries
 *   kpack_host.h            HIP host binaries: HIPF/HIPK records
 *   kpack_code_object.h     an AMDGPU code object's target and kernels
 *   kpack_render.h          the `kernels` and `metadata.json` text of one
 *   kpack_target.h          GPU target matching (kpack_target_serves,
 *                           kpack_target_may_serve)
 *   kpack_prefix.h          a kernel's code object from a prefix of its bytes
 *   kpack_transform.h       kpack-ifying a HIP host binary
 *   kpack_message.h         the messages of the long calls below
 *   kpack_split.h           the producer: splitting binaries and trees
 *   kpack_verify_binary.h   checking split binaries load
 * Status values are those of kpack_types.h.
 */
#ifndef ROCM_KPACK_EXT_H
#define ROCM_KPACK_EXT_H

#include "kpack.h"

#include "kpack_archive.h"
#include "kpack_bundle.h"
#include "kpack_code_object.h"
#include "kpack_entry_metadata.h"
#include "kpack_fatbin_stream.h"
#include "kpack_host.h"
#include "kpack_layout.h"
#include "kpack_kcache.h"
#include "kpack_message.h"
#include "kpack_paths.h"
#include "kpack_prefix.h"
#include "kpack_render.h"
#include "kpack_split.h"
#include "kpack_target.h"
#include "kpack_trace.h"
#include "kpack_transform.h"
#include "kpack_verify_binary.h"
#include "kpack_wheel.h"
#include "kpack_writer.h"

#endif /* ROCM_KPACK_EXT_H */
