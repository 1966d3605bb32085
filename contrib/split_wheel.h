/* SPDX-License-Identifier: MIT
 *
 * `kpack split --wheel`: the wheel split of the split command
 * (split_wheel.c), over libkpack's kpack_wheel_split().
 */
#ifndef KPACK_SPLIT_WHEEL_H
#define KPACK_SPLIT_WHEEL_H

#include <stdbool.h>

/* Whether a split command line asks for a wheel split (--wheel). */
bool sw_wants_wheel(int argc, char** argv);

/* Runs `kpack split --wheel ...` (argv as the split command gets it);
 * `tree_split` is the split command's own entry point, run on the wheel's
 * unpacked files. Returns the command's exit status. */
int sw_run(int argc, char** argv, int (*tree_split)(int argc, char** argv));

#endif /* KPACK_SPLIT_WHEEL_H */
