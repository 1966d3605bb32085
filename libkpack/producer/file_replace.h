/* SPDX-License-Identifier: MIT
 *
 * Writing files so that no reader, crash or kill ever finds one half
 * written: a new file is written in full beside its destination and renamed
 * over it; a file with other hard links is rewritten in its own inode
 * through a committed redo copy that the next run completes; and a run
 * that fails takes back the files it made (fr_outputs). `kpack split`
 * mirrors and rewrites trees with these. docs/split.md explains the steps.
 */
#ifndef KPACK_FILE_REPLACE_H
#define KPACK_FILE_REPLACE_H

#include <stdbool.h>
#include <sys/stat.h>

#include "producer/report.h"

/* Every name this module creates starts with this, in the directory of the
 * file it replaces: ".kpack-split.NAME.tmp" (being written; removable at
 * any time) and ".kpack-split.NAME.redo" (complete and committed: NAME's
 * new bytes, to be copied into NAME's inode). Tree walks skip them. */
#define FR_PREFIX ".kpack-split."

/* True if `name` (one path component) is one of ours. */
bool fr_is_own_name(const char* name);

/* Every function reports its failures to run `r` and counts its steps
 * there (pr_step()). */

/* A new empty file beside `dst` (named FR_PREFIX + basename + ".tmp", a
 * stale one of an earlier run replaced), open for writing, mode 0600.
 * *tmp is malloc'ed. Reports and returns false on failure. */
bool fr_create_temp(pr_run* r, const char* dst, char** tmp, int* fd);

/* FR_PREFIX + basename(dst) + ".tmp" beside `dst`: where a new version of
 * `dst` is written (malloc'ed; NULL when out of memory). */
char* fr_temp_name(const char* dst);

/* Copies the whole regular file `src` into `fd` (at its current offset). */
bool fr_copy_into(pr_run* r, const char* src, int fd,
                  const char* dst_for_messages);

/* Gives the temporary file `fd`, which will become `dst`, the mode, mtime
 * (and, when run as root, the owner) of `like`, syncs it when `durable`,
 * and closes it (also on failure). Failures are reported against `dst`,
 * the file the user asked for. */
bool fr_finish_temp(pr_run* r, int fd, const char* dst, const struct stat* like,
                    bool durable);

/* Replaces the bytes of `dst`, which has other hard links, by those of the
 * finished temporary file `tmp`, keeping dst's inode (so every link sees the
 * new bytes): `tmp` is renamed to the redo name and the directory synced
 * (the commit point), the bytes are copied into dst and synced, dst's mtime
 * restored to that of `tmp`, then the redo file is removed. Killed after the
 * commit point, the next fr_recover() of the directory finishes the copy. */
bool fr_rewrite_in_place(pr_run* r, const char* tmp, const char* dst);

/* Finishes or removes what an interrupted run left in directory `dir`:
 * each redo file is copied into the file it names (as
 * fr_rewrite_in_place() does) and removed; each temporary file and each
 * kept earlier version (".old") is removed.
 * *recovered counts the redo files completed. */
bool fr_recover(pr_run* r, const char* dir, unsigned* recovered);

/* What an in-place run holds locked (flock), each open once. */
typedef struct fr_lock {
  dev_t dev;
  ino_t ino;
  int fd;
  bool exclusive;
} fr_lock;

typedef struct fr_locks {
  fr_lock* items;
  size_t count, cap;
} fr_locks;

/* Keeps other in-place runs out of what this one writes, before it
 * writes anything: fr_recover() would take a live run's kept and
 * temporary files for a killed run's, and two runs rewriting one file
 * would each replace the other's temporary file. The input (a tree the
 * run walks, or a file it rewrites) is locked exclusive and every
 * directory above it shared, so two runs over one tree or file, or over
 * a tree and a tree or file inside it, cannot both go on; runs over other
 * files, those of one directory too, can. Reports and returns false when
 * another process holds a lock that stands in the way. What cannot be
 * opened, or lies on a filesystem without locks, is passed over. The
 * locks last until fr_locks_free() or the process ends. */
bool fr_lock_input(pr_run* r, fr_locks* l, const char* input);
/* Takes turns with other runs that write archives into directory `dir`:
 * locks it exclusive, waiting while another process holds it (after a
 * note that says so, polling so that a cancelled run stops waiting, and
 * asking go_on(user) at each poll: false cancels). A directory this run
 * holds already is fine. 1: locked, or not lockable (cannot be opened, no
 * locks on its filesystem); 0: `dir` was removed or replaced while this
 * run waited (nothing held: make it and try again); -1: cancelled, or out
 * of memory (said). */
int fr_lock_turn(pr_run* r, fr_locks* l, const char* dir,
                 bool (*go_on)(void* user), void* user);
void fr_locks_free(fr_locks* l);

/* mkdir -p: `path` and the directories above it, mode 0755 less the
 * umask; an existing directory is fine. False with errno set on failure
 * (ENOTDIR when something else is in the way). */
bool fr_mkdirs(const char* path);

/* The output paths of a run as they were before it wrote anything, so
 * that a failed run can take back what it made. Every path is noted
 * before the first write (a path noted after this run made it would
 * count as there before). */
typedef struct fr_output {
  char* path;
  bool existed; /* something was there before the run */
  dev_t dev;    /* ... and which inode, to tell a replaced file */
  ino_t ino;
  mode_t mode;              /* ... its type and mode */
  struct timespec times[2]; /* ... its atime and mtime */
} fr_output;

/* A file put in place by fr_outputs_swap(), and where what was there is
 * kept meanwhile (NULL: nothing was). */
typedef struct fr_swap {
  char* path;
  char* kept;
  bool in_inode; /* kept is a copy of path's bytes (fr_outputs_rewrite()) */
} fr_swap;

typedef struct fr_outputs {
  fr_output* items; /* in the order noted: a directory before its content */
  size_t count, cap;
  fr_swap* swaps; /* in the order made */
  size_t swap_count, swap_cap;
} fr_outputs;

/* Notes `path`, a file or directory the run may create or replace.
 * Reports and returns false when out of memory. */
bool fr_outputs_note(pr_run* r, fr_outputs* o, const char* path);
/* Notes `path` and each directory above it (those of a relative path
 * down from its first component), which mkdir -p may create. */
bool fr_outputs_note_parents(pr_run* r, fr_outputs* o, const char* path);
/* Puts the finished file `tmp` in place of `dst` (tmp NULL: removes
 * dst), keeping what dst was, under FR_PREFIX + NAME + ".old" beside it,
 * until fr_outputs_commit() drops it or fr_outputs_undo() puts it back. A
 * reader of dst sees the old file or the new one. With `durable`, the
 * directory is synced after. */
bool fr_outputs_swap(pr_run* r, fr_outputs* o, const char* tmp, const char* dst,
                     bool durable);
/* fr_rewrite_in_place() for a run that may be taken back: a synced copy
 * of dst's bytes and times is kept first, under FR_PREFIX + NAME + ".old",
 * which fr_outputs_undo() copies back into dst's inode (through the redo
 * file, as a rewrite goes) and fr_outputs_commit() drops. */
bool fr_outputs_rewrite(pr_run* r, fr_outputs* o, const char* tmp,
                        const char* dst);
/* The run succeeded: the files kept by fr_outputs_swap() are removed (a
 * failure to is a warning). */
void fr_outputs_commit(pr_run* r, fr_outputs* o);
/* Takes back what a failed run made: each file fr_outputs_swap() replaced
 * or removed is put back, newest first; every noted path that was not
 * there before is removed, newest first (a directory when it is empty);
 * the directories that were there get their mode and times back. Then
 * says in a note what is left under `where`: nothing of the run (silent
 * when it had made nothing), or the paths it made that could not be
 * removed and the files it replaced that could not be put back. */
void fr_outputs_undo(pr_run* r, const fr_outputs* o, const char* where);
void fr_outputs_free(fr_outputs* o);

#endif /* KPACK_FILE_REPLACE_H */
