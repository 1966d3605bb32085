/* SPDX-License-Identifier: MIT
 *
 * Whole-file replacement that a kill cannot leave half done, and the
 * undoing of a failed run's outputs (see file_replace.h and docs/split.md,
 * "Replacing files safely" and "When a write fails").
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/grow.h"
#include "producer/file_replace.h"

bool fr_is_own_name(const char* name) {
  return strncmp(name, FR_PREFIX, strlen(FR_PREFIX)) == 0;
}

/* dir of `path` + "/" + FR_PREFIX + basename + suffix; NULL when out of
 * memory. */
static char* own_name(const char* path, const char* suffix) {
  const char* slash = strrchr(path, '/');
  const char* base = slash != NULL ? slash + 1 : path;
  int dir_len = slash != NULL ? (int)(slash - path + 1) : 0;
  char* out;
  if (asprintf(&out, "%.*s%s%s%s", dir_len, path, FR_PREFIX, base, suffix) < 0)
    return NULL;
  return out;
}

char* fr_temp_name(const char* dst) {
  return own_name(dst, ".tmp");
}

/* Syncs the directory holding `path`, so that a rename in it is durable. */
static bool sync_parent(pr_run* r, const char* path) {
  const char* slash = strrchr(path, '/');
  char* dir = slash == NULL   ? strdup(".")
              : slash == path ? strdup("/")
                              : strndup(path, (size_t)(slash - path));
  bool ok = false;
  int fd = dir != NULL ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
  if (fd >= 0 && fsync(fd) == 0)
    ok = true;
  else
    kp_error(&r->report, dir ? dir : path, KPACK_ERROR_IO_ERROR, errno,
             "%s: cannot sync the directory: %s", dir ? dir : path,
             strerror(errno));
  if (fd >= 0)
    close(fd);
  free(dir);
  return ok;
}

bool fr_create_temp(pr_run* r, const char* dst, char** tmp, int* fd) {
  *tmp = own_name(dst, ".tmp");
  if (*tmp == NULL) {
    kp_out_of_memory(&r->report);
    return false;
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    *fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (*fd >= 0)
      return true;
    if (errno != EEXIST || unlink(*tmp) != 0)
      break; /* a stale temporary file of a killed run is removed once */
  }
  kp_error(&r->report, *tmp, KPACK_ERROR_IO_ERROR, errno,
           "%s: cannot create: %s", *tmp, strerror(errno));
  free(*tmp);
  *tmp = NULL;
  return false;
}

/* Writes all of buf at `offset`. */
static bool write_all(int fd, const char* buf, size_t n, off_t offset) {
  while (n > 0) {
    ssize_t w = pwrite(fd, buf, n, offset);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    buf += w;
    n -= (size_t)w;
    offset += w;
  }
  return true;
}

/* Makes [at, at + len) of `out` read as zeros without writing them:
 * punched (`out` may hold older bytes there), else written. */
static bool zero_range(int out, off_t at, off_t len) {
  static const char zeros[1 << 16];
  if (fallocate(out, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, at, len) == 0)
    return true;
  for (off_t done = 0; done < len;) {
    size_t n = len - done < (off_t)sizeof(zeros) ? (size_t)(len - done)
                                                 : sizeof(zeros);
    if (!write_all(out, zeros, n, at + done))
      return false;
    done += (off_t)n;
  }
  return true;
}

/* Copies `in` to `out` from offset 0 to the end of `in`: copy_file_range
 * where the filesystems allow (no bytes through user space, reflinks where
 * supported), else a read/write loop. Only the data of a sparse input is
 * copied (SEEK_DATA, SEEK_HOLE): its holes stay holes. The first chunk is
 * at most half the file and a step is counted after it, so the kill hook
 * stops a copy halfway. */
static bool copy_fd(pr_run* r, int in, int out, off_t size) {
  static char buf[1 << 16];
  off_t done = 0, run_end = 0;
  bool stepped = false, plain = false;
  while (done < size) {
    ssize_t n = -1;
    if (done >= run_end) {
      off_t data = lseek(in, done, SEEK_DATA);
      if (data < 0 && errno == ENXIO)
        data = size; /* a hole to the end */
      if (data > done) {
        if (data > size)
          data = size;
        if (!zero_range(out, done, data - done) ||
            (data == size && ftruncate(out, size) != 0))
          return false;
        done = data;
        continue;
      }
      run_end = data < 0 ? size : lseek(in, done, SEEK_HOLE);
      if (run_end <= done || run_end > size)
        run_end = size; /* no holes known here */
    }
    off_t want = stepped ? size - done : size / 2 > 0 ? size / 2 : size;
    if (want > run_end - done)
      want = run_end - done;
    if (want > ((off_t)1 << 30))
      want = (off_t)1 << 30;
    if (!plain) {
      loff_t ri = done, wo = done;
      n = copy_file_range(in, &ri, out, &wo, (size_t)want, 0);
      if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
                    errno == EOPNOTSUPP)) {
        plain = true;
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
    } else {
      n = pread(in, buf, want < (off_t)sizeof(buf) ? (size_t)want : sizeof(buf),
                done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n > 0 && !write_all(out, buf, (size_t)n, done))
        return false;
    }
    if (n <= 0) {
      if (n == 0)
        errno = EIO; /* the source shrank under us */
      return false;
    }
    done += n;
    if (!stepped) {
      stepped = true;
      pr_step(r);
    }
  }
  return true;
}

bool fr_copy_into(pr_run* r, const char* src, int fd,
                  const char* dst_for_messages) {
  struct stat st;
  int in = open(src, O_RDONLY | O_CLOEXEC);
  bool ok = in >= 0 && fstat(in, &st) == 0 && copy_fd(r, in, fd, st.st_size);
  if (!ok && pr_is_write_errno(errno)) /* the copy's failure, not src's */
    pr_output_error(r, dst_for_messages, KPACK_ERROR_IO_ERROR, errno);
  else if (!ok)
    kp_error(&r->report, src, KPACK_ERROR_IO_ERROR, errno,
             "%s: cannot copy to %s: %s", src, dst_for_messages,
             strerror(errno));
  if (in >= 0)
    close(in);
  return ok;
}

bool fr_finish_temp(pr_run* r, int fd, const char* dst, const struct stat* like,
                    bool durable) {
  const struct timespec times[2] = {like->st_atim, like->st_mtim};
  const char* what = NULL;
  /* As root, the owner too (as cp -a does); a failure there is no error
   * for an unprivileged copy. */
  if (geteuid() == 0 && fchown(fd, like->st_uid, like->st_gid) != 0)
    what = "cannot set the owner";
  else if (fchmod(fd, like->st_mode & 07777) != 0)
    what = "cannot set the mode";
  else if (futimens(fd, times) != 0)
    what = "cannot set the times";
  if (what != NULL)
    kp_error(&r->report, dst, KPACK_ERROR_IO_ERROR, errno, "%s: %s: %s", dst,
             what, strerror(errno));
  /* Delayed write errors (a full disk) surface at fsync or close. */
  bool ok = what == NULL, wrote = ok;
  int why = 0;
  if (ok && durable && fsync(fd) != 0) {
    ok = false;
    why = errno;
  }
  if (close(fd) != 0 && ok) {
    ok = false;
    why = errno;
  }
  if (wrote && !ok)
    pr_output_error(r, dst, KPACK_ERROR_IO_ERROR, why);
  return ok;
}

/* Copies the committed redo file into `dst`'s own inode, syncs it, gives it
 * the redo file's mtime and removes the redo file. Safe to repeat: every
 * attempt writes the same bytes from the start. */
static bool apply_redo(pr_run* r, const char* redo, const char* dst) {
  struct stat st;
  int in = open(redo, O_RDONLY | O_CLOEXEC);
  int out = in >= 0 ? open(dst, O_WRONLY | O_CLOEXEC) : -1;
  bool ok = false;
  if (out < 0 || fstat(in, &st) != 0)
    goto fail;
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  /* Overwritten from the start, then cut to the new length. Until the
   * redo file is removed the copy may run again, with the same result. */
  if (!copy_fd(r, in, out, st.st_size) || ftruncate(out, st.st_size) != 0 ||
      futimens(out, times) != 0 || fsync(out) != 0)
    goto fail;
  close(out);
  out = -1;
  if (unlink(redo) != 0 || !sync_parent(r, redo))
    goto fail;
  pr_step(r);
  ok = true;
fail:
  if (!ok)
    kp_error(&r->report, dst, KPACK_ERROR_IO_ERROR, errno,
             "%s: cannot rewrite from %s: %s", dst, redo, strerror(errno));
  if (in >= 0)
    close(in);
  if (out >= 0)
    close(out);
  return ok;
}

bool fr_rewrite_in_place(pr_run* r, const char* tmp, const char* dst) {
  char* redo = own_name(dst, ".redo");
  bool ok = false;
  if (redo == NULL) {
    kp_out_of_memory(&r->report);
    return false;
  }
  if (rename(tmp, redo) != 0) {
    kp_error(&r->report, dst, KPACK_ERROR_IO_ERROR, errno,
             "%s: cannot commit %s: %s", dst, redo, strerror(errno));
    goto done;
  }
  if (!sync_parent(r, redo))
    goto done;
  pr_step(r); /* committed: from here the next run finishes the copy */
  ok = !pr_fault(r, dst) && apply_redo(r, redo, dst);
done:
  free(redo);
  return ok;
}

bool fr_recover(pr_run* r, const char* dir, unsigned* recovered) {
  DIR* d = opendir(dir);
  bool ok = true;
  if (d == NULL) {
    kp_error(&r->report, dir, KPACK_ERROR_IO_ERROR, errno, "%s: %s", dir,
             strerror(errno));
    return false;
  }
  for (struct dirent* e; ok && (e = readdir(d)) != NULL;) {
    size_t len = strlen(e->d_name);
    if (!fr_is_own_name(e->d_name))
      continue;
    char *path = NULL, *target = NULL;
    bool is_redo = len > 5 && strcmp(e->d_name + len - 5, ".redo") == 0;
    /* A kept earlier version (.old) is as stale as a temporary file: a
     * run killed while it put files in place had committed them. */
    bool is_tmp = len > 4 && (strcmp(e->d_name + len - 4, ".tmp") == 0 ||
                              strcmp(e->d_name + len - 4, ".old") == 0);
    size_t name_len = len - strlen(FR_PREFIX) - (is_redo ? 5 : 4);
    if (!is_redo && !is_tmp)
      continue;
    if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
      path = NULL;
    if (asprintf(&target, "%s/%.*s", dir, (int)name_len,
                 e->d_name + strlen(FR_PREFIX)) < 0)
      target = NULL;
    if (path == NULL || target == NULL) {
      kp_out_of_memory(&r->report);
      ok = false;
    } else if (is_tmp) {
      if (unlink(path) != 0 && errno != ENOENT) {
        kp_error(&r->report, path, KPACK_ERROR_IO_ERROR, errno,
                 "%s: cannot remove: %s", path, strerror(errno));
        ok = false;
      }
    } else if (access(target, F_OK) != 0) {
      kp_say(&r->report, KPACK_SEVERITY_NOTE, path, KPACK_SUCCESS, 0,
             "%s: %s, which it rewrites, is gone; left as it is", path, target);
    } else {
      ok = apply_redo(r, path, target);
      if (ok)
        (*recovered)++;
    }
    free(path);
    free(target);
  }
  closedir(d);
  return ok;
}

/* ---- one in-place run at a time ------------------------------------------ */

/* Locks `path` (a directory, or the file input itself), unless this run
 * holds it already at least as strongly. 1: locked, or not lockable
 * (cannot be opened, no locks on its filesystem); 0: another process
 * holds it; -1: out of memory. */
/* The lock this run holds on the file `st` describes, if any. */
static fr_lock* held_lock(fr_locks* l, const struct stat* st) {
  for (size_t i = 0; i < l->count; i++)
    if (l->items[i].dev == st->st_dev && l->items[i].ino == st->st_ino)
      return &l->items[i];
  return NULL;
}

/* Keeps `fd`, locked, in `l`; false (fd closed) when out of memory. */
static bool keep_lock(fr_locks* l, const struct stat* st, int fd,
                      bool exclusive) {
  fr_lock* grown = kp_grow(l->items, l->count, &l->cap, sizeof(*l->items), 8);
  if (grown == NULL) {
    close(fd);
    return false;
  }
  l->items = grown;
  l->items[l->count++] = (fr_lock){st->st_dev, st->st_ino, fd, exclusive};
  return true;
}

static int lock_one(fr_locks* l, const char* path, bool exclusive) {
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0)
      close(fd);
    return 1;
  }
  fr_lock* held = held_lock(l, &st);
  if (held != NULL) {
    close(fd);
    if (!exclusive || held->exclusive)
      return 1;
    /* Shared as the parent of another input, now wanted whole. */
    if (flock(held->fd, LOCK_EX | LOCK_NB) != 0)
      return errno == EWOULDBLOCK ? 0 : 1;
    held->exclusive = true;
    return 1;
  }
  if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    bool busy = errno == EWOULDBLOCK;
    close(fd);
    return busy ? 0 : 1;
  }
  return keep_lock(l, &st, fd, exclusive) ? 1 : -1;
}

bool fr_lock_input(pr_run* r, fr_locks* l, const char* input) {
  struct stat st;
  char* path = realpath(input, NULL);
  if (path == NULL || stat(path, &st) != 0) {
    free(path);
    return true; /* the walk says why it cannot be read */
  }
  int got = 1;
  bool first = true;
  for (;;) {
    got = lock_one(l, path, first);
    if (got != 1)
      break;
    char* slash = strrchr(path, '/');
    if (slash == NULL || strcmp(path, "/") == 0)
      break;
    slash[slash == path] = '\0'; /* "/usr" goes up to "/" */
    first = false;
  }
  if (got == 0 && first)
    kp_error(
        &r->report, input, KPACK_ERROR_IO_ERROR, EWOULDBLOCK,
        "%s: another kpack split --in-place is %s; wait for it to end", input,
        S_ISDIR(st.st_mode) ? "writing in this tree" : "rewriting this file");
  else if (got == 0)
    kp_error(&r->report, input, KPACK_ERROR_IO_ERROR, EWOULDBLOCK,
             "%s: another kpack split --in-place is writing in %s, which "
             "holds it; wait for it to end",
             input, path);
  else if (got < 0)
    kp_out_of_memory(&r->report);
  free(path);
  return got == 1;
}

int fr_lock_turn(pr_run* r, fr_locks* l, const char* dir,
                 bool (*go_on)(void* user), void* user) {
  struct stat st, now;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0)
      close(fd);
    return 1;
  }
  if (held_lock(l, &st) != NULL) {
    close(fd);
    return 1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      close(fd);
      return 1;
    }
    kp_say(&r->report, KPACK_SEVERITY_NOTE, dir, KPACK_SUCCESS, 0,
           "%s: another kpack split is writing archives here; waiting for "
           "it to end",
           dir);
    /* Polled, so that Ctrl-C (a handler that restarts system calls), the
     * caller's cancel flag or go_on ends the wait. */
    const struct timespec pause = {0, 50 * 1000 * 1000};
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (pr_cancelled(r) || !go_on(user)) {
        close(fd);
        return -1;
      }
      nanosleep(&pause, NULL);
    }
  }
  /* A run that failed while this one waited removed the directory it had
   * made: its name leads elsewhere now, or nowhere. */
  if (stat(dir, &now) != 0 || now.st_dev != st.st_dev ||
      now.st_ino != st.st_ino) {
    close(fd);
    return 0;
  }
  if (keep_lock(l, &st, fd, true))
    return 1;
  kp_out_of_memory(&r->report);
  return -1;
}

void fr_locks_free(fr_locks* l) {
  for (size_t i = 0; i < l->count; i++)
    close(l->items[i].fd);
  free(l->items);
  *l = (fr_locks){0};
}

bool fr_mkdirs(const char* path) {
  struct stat st;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return true;
    errno = ENOTDIR;
    return false;
  }
  if (errno != ENOENT)
    return false;
  /* The parent first, then this one (a racing run may make it too). */
  const char* slash = strrchr(path, '/');
  while (slash != NULL && slash > path && slash[-1] == '/')
    slash--;
  if (slash != NULL && slash > path) {
    char* parent = strndup(path, (size_t)(slash - path));
    bool ok = parent != NULL && fr_mkdirs(parent);
    free(parent);
    if (!ok)
      return false;
  }
  if (mkdir(path, 0755) == 0)
    return true;
  if (errno != EEXIST || stat(path, &st) != 0)
    return false;
  if (!S_ISDIR(st.st_mode))
    errno = ENOTDIR;
  return S_ISDIR(st.st_mode);
}

/* ---- taking back a failed run's outputs ---------------------------------- */

bool fr_outputs_note(pr_run* r, fr_outputs* o, const char* path) {
  struct stat st;
  fr_output* items = kp_grow(o->items, o->count, &o->cap, sizeof(*items), 64);
  char* copy = strdup(path);
  if (items != NULL)
    o->items = items;
  if (items == NULL || copy == NULL) {
    free(copy);
    kp_out_of_memory(&r->report);
    return false;
  }
  bool existed = lstat(path, &st) == 0;
  o->items[o->count++] = (fr_output){copy,
                                     existed,
                                     existed ? st.st_dev : 0,
                                     existed ? st.st_ino : 0,
                                     existed ? st.st_mode : 0,
                                     {st.st_atim, st.st_mtim}};
  return true;
}

/* Room for one more swap in `o`, and a copy of `dst` for it (malloc'ed);
 * NULL, said, when out of memory. */
static char* swap_room(pr_run* r, fr_outputs* o, const char* dst) {
  fr_swap* swaps =
      kp_grow(o->swaps, o->swap_count, &o->swap_cap, sizeof(*swaps), 64);
  if (swaps != NULL)
    o->swaps = swaps;
  char* path = swaps != NULL ? strdup(dst) : NULL;
  if (path == NULL)
    kp_out_of_memory(&r->report);
  return path;
}

bool fr_outputs_swap(pr_run* r, fr_outputs* o, const char* tmp, const char* dst,
                     bool durable) {
  struct stat st;
  char* kept = NULL;
  bool linked = false;
  char* path = swap_room(r, o, dst);
  if (path == NULL || pr_fault(r, dst))
    goto fail;
  if (lstat(dst, &st) == 0 && !S_ISDIR(st.st_mode)) {
    if ((kept = own_name(dst, ".old")) == NULL) {
      kp_out_of_memory(&r->report);
      goto fail;
    }
    unlink(kept); /* a killed run's */
    /* A second name keeps dst in place until the rename below replaces it
     * (where links are refused, dst is moved aside). */
    linked = tmp != NULL && link(dst, kept) == 0;
    if (!linked && rename(dst, kept) != 0) {
      kp_error(&r->report, dst, KPACK_ERROR_IO_ERROR, errno,
               "%s: cannot keep the earlier version as %s: %s", dst, kept,
               strerror(errno));
      goto fail;
    }
  } else if (tmp == NULL) {
    free(path);
    return true; /* nothing to remove */
  }
  /* The hook fails this step too: what was kept must go back. */
  bool failed = tmp != NULL && pr_fault(r, dst);
  if (!failed && tmp != NULL && rename(tmp, dst) != 0) {
    kp_error(&r->report, dst, KPACK_ERROR_IO_ERROR, errno,
             "%s: cannot replace with %s: %s", dst, tmp, strerror(errno));
    failed = true;
  }
  if (failed) {
    /* Back as it was: the second name dropped (a rename of one link over
     * another of the same file does nothing), or dst moved back. */
    if (kept != NULL && (linked ? unlink(kept) : rename(kept, dst)) != 0)
      kp_error(&r->report, dst, KPACK_ERROR_IO_ERROR, errno,
               "%s: cannot put back from %s: %s", dst, kept, strerror(errno));
    goto fail;
  }
  o->swaps[o->swap_count++] = (fr_swap){path, kept, false};
  pr_step(r);
  return !durable || sync_parent(r, dst);
fail:
  free(kept);
  free(path);
  return false;
}

/* A synced copy of `dst`, bytes and times, at `kept`. */
static bool keep_copy(pr_run* r, const char* dst, const char* kept) {
  struct stat st;
  int in = open(dst, O_RDONLY | O_CLOEXEC);
  unlink(kept); /* a killed run's */
  int out =
      in >= 0 ? open(kept, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
  bool ok = out >= 0 && fstat(in, &st) == 0;
  if (ok) {
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    ok = copy_fd(r, in, out, st.st_size) && futimens(out, times) == 0 &&
         fsync(out) == 0;
  }
  int why = errno;
  if (out >= 0 && close(out) != 0 && ok) {
    ok = false;
    why = errno;
  }
  if (in >= 0)
    close(in);
  if (!ok) {
    unlink(kept);
    kp_error(&r->report, dst, KPACK_ERROR_IO_ERROR, why,
             "%s: cannot keep the earlier version as %s: %s", dst, kept,
             strerror(why));
  }
  return ok;
}

bool fr_outputs_rewrite(pr_run* r, fr_outputs* o, const char* tmp,
                        const char* dst) {
  char* path = swap_room(r, o, dst);
  char* kept = path != NULL ? own_name(dst, ".old") : NULL;
  if (path != NULL && kept == NULL)
    kp_out_of_memory(&r->report);
  if (kept == NULL || pr_fault(r, dst) || !keep_copy(r, dst, kept)) {
    free(kept);
    free(path);
    return false;
  }
  /* Noted before the rewrite: one that fails halfway is taken back too. */
  o->swaps[o->swap_count++] = (fr_swap){path, kept, true};
  return fr_rewrite_in_place(r, tmp, dst);
}

/* Puts the bytes kept by fr_outputs_rewrite() back into x->path's inode,
 * through the redo file as a rewrite goes (a redo file of the rewrite
 * being taken back is replaced): a run killed meanwhile leaves the
 * earlier bytes for the next one to finish copying. */
static bool restore_copy(pr_run* r, const fr_swap* x) {
  char* redo = own_name(x->path, ".redo");
  bool ok = redo != NULL && rename(x->kept, redo) == 0 &&
            sync_parent(r, redo) && apply_redo(r, redo, x->path);
  free(redo);
  return ok;
}

void fr_outputs_commit(pr_run* r, fr_outputs* o) {
  for (size_t i = 0; i < o->swap_count; i++) {
    fr_swap* x = &o->swaps[i];
    if (x->kept != NULL && unlink(x->kept) != 0 && errno != ENOENT)
      kp_say(&r->report, KPACK_SEVERITY_WARNING, x->kept, KPACK_SUCCESS, errno,
             "%s: cannot remove: %s", x->kept, strerror(errno));
    free(x->kept);
    x->kept = NULL;
  }
}

bool fr_outputs_note_parents(pr_run* r, fr_outputs* o, const char* path) {
  char* copy = strdup(path);
  bool ok = copy != NULL;
  if (!ok)
    kp_out_of_memory(&r->report);
  /* The prefixes mkdir -p goes through, as fr_mkdirs() does. */
  for (char* p = copy; ok && p != NULL;) {
    p = strchr(p + 1, '/');
    if (p != NULL)
      *p = '\0';
    if (copy[0] != '\0')
      ok = fr_outputs_note(r, o, copy);
    if (p != NULL)
      *p = '/';
  }
  free(copy);
  return ok;
}

static int compare_output_paths(const void* a, const void* b) {
  return strcmp((*(const fr_output* const*)a)->path,
                (*(const fr_output* const*)b)->path);
}

void fr_outputs_undo(pr_run* r, const fr_outputs* o, const char* where) {
  struct stat st;
  size_t removed = 0, restored = 0;
  /* What the run replaced, back in place (one rename each). */
  for (size_t i = o->swap_count; i-- > 0;) {
    const fr_swap* x = &o->swaps[i];
    if (x->kept != NULL &&
        (x->in_inode ? restore_copy(r, x) : rename(x->kept, x->path) == 0))
      restored++;
  }
  /* Newest first: what a directory holds goes before the directory. */
  for (size_t i = o->count; i-- > 0;) {
    const fr_output* x = &o->items[i];
    if (x->existed || lstat(x->path, &st) != 0)
      continue;
    /* rmdir fails when something not ours is in the directory. */
    removed += (S_ISDIR(st.st_mode) ? rmdir(x->path) : unlink(x->path)) == 0;
  }
  /* The directories that were there: their mode, and the times that the
   * files made and removed in them changed; deepest first. */
  for (size_t i = o->count; i-- > 0;) {
    const fr_output* x = &o->items[i];
    if (!x->existed || !S_ISDIR(x->mode) || lstat(x->path, &st) != 0 ||
        !S_ISDIR(st.st_mode) || st.st_ino != x->ino)
      continue;
    if ((st.st_mode & 07777) != (x->mode & 07777))
      chmod(x->path, x->mode & 07777);
    utimensat(AT_FDCWD, x->path, x->times, AT_SYMLINK_NOFOLLOW);
  }
  /* A path may be noted twice (directories that several inputs share):
   * each is counted once. */
  const fr_output** order = calloc(o->count ? o->count : 1, sizeof(*order));
  if (order == NULL) {
    kp_out_of_memory(&r->report);
    return;
  }
  for (size_t i = 0; i < o->count; i++)
    order[i] = &o->items[i];
  qsort(order, o->count, sizeof(*order), compare_output_paths);
  size_t left = 0, replaced = 0;
  const char *left_example = NULL, *replaced_example = NULL;
  for (size_t i = 0; i < o->count; i++) {
    const fr_output* x = order[i];
    if ((i > 0 && strcmp(x->path, order[i - 1]->path) == 0) ||
        lstat(x->path, &st) != 0)
      continue;
    if (!x->existed) {
      left++;
      left_example = left_example != NULL ? left_example : x->path;
    } else if (!S_ISDIR(st.st_mode) &&
               (st.st_dev != x->dev || st.st_ino != x->ino)) {
      replaced++;
      replaced_example = replaced_example != NULL ? replaced_example : x->path;
    }
  }
  /* Not errors of their own: what the failure reported left. */
  if (left == 0 && replaced == 0 && removed > 0 && restored == 0)
    kp_say(&r->report, KPACK_SEVERITY_NOTE, where, KPACK_SUCCESS, 0,
           "%s: the files and directories this run made were removed", where);
  else if (left == 0 && replaced == 0 && restored > 0)
    kp_say(&r->report, KPACK_SEVERITY_NOTE, where, KPACK_SUCCESS, 0,
           "%s: the files and directories this run made were removed, the "
           "%zu file%s it replaced put back",
           where, restored, restored == 1 ? "" : "s");
  if (left > 0)
    kp_say(&r->report, KPACK_SEVERITY_NOTE, left_example, KPACK_SUCCESS, 0,
           "%s: %zu path%s this run made could not be removed, e.g. %s", where,
           left, left == 1 ? "" : "s", left_example);
  if (replaced > 0)
    kp_say(&r->report, KPACK_SEVERITY_NOTE, replaced_example, KPACK_SUCCESS, 0,
           "%s: %zu file%s there before this run %s replaced, e.g. %s", where,
           replaced, replaced == 1 ? "" : "s", replaced == 1 ? "was" : "were",
           replaced_example);
  free(order);
}

void fr_outputs_free(fr_outputs* o) {
  for (size_t i = 0; i < o->count; i++)
    free(o->items[i].path);
  free(o->items);
  for (size_t i = 0; i < o->swap_count; i++) {
    free(o->swaps[i].path);
    free(o->swaps[i].kept);
  }
  free(o->swaps);
  *o = (fr_outputs){0};
}
