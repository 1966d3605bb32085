/* SPDX-License-Identifier: MIT
 *
 * What every kpackfs module shares: the FUSE API version and the version
 * string. Each module has its own header saying which state it owns:
 * sources.h (SOURCE arguments to archive paths), tree.h (the inode tree,
 * immutable once built), render.h (the `kernels` and `metadata.json` texts
 * and their cache), ops.h (the filesystem: everything the FUSE request
 * handlers share and change). main.c parses options and runs the session.
 */
#ifndef KPACKFS_H
#define KPACKFS_H

#define FUSE_USE_VERSION 35

#include <fuse_lowlevel.h>

#include "rocm_kpack/kpack_ext.h"

#define KPACKFS_VERSION KPACK_VERSION_STRING

#endif /* KPACKFS_H */
