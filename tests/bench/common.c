/* SPDX-License-Identifier: MIT
 *
 * Helpers shared by the benchmark rows: clocks and medians, the table,
 * page-cache control, running commands with their peak RSS, and listing an
 * archive's kernels.
 */
#include <ctype.h>
#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

double bn_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

double bn_median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(*v), compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define NAME_WIDTH 66
#define VALUE_WIDTH 48
#define TARGET_WIDTH 22

void bn_table_header(void) {
  printf("| %-*s | %-*s | %-*s | %-4s |\n", NAME_WIDTH, "row", VALUE_WIDTH,
         "measured", TARGET_WIDTH, "target", "");
  printf("|");
  for (int i = 0; i < NAME_WIDTH + 2; i++)
    putchar('-');
  printf("|");
  for (int i = 0; i < VALUE_WIDTH + 2; i++)
    putchar('-');
  printf("|");
  for (int i = 0; i < TARGET_WIDTH + 2; i++)
    putchar('-');
  printf("|------|\n");
  fflush(stdout);
}

void bn_row(const char* name, const char* measured, const char* target,
            bool pass) {
  printf("| %-*s | %-*s | %-*s | %-4s |\n", NAME_WIDTH, name, VALUE_WIDTH,
         measured, TARGET_WIDTH, target, pass ? "PASS" : "MISS");
  fflush(stdout);
}

void bn_row_info(const char* name, const char* measured, const char* note) {
  printf("| %-*s | %-*s | %-*s | %-4s |\n", NAME_WIDTH, name, VALUE_WIDTH,
         measured, TARGET_WIDTH, note, "info");
  fflush(stdout);
}

void bn_row_not_run(const char* name, const char* target, const char* why) {
  char value[128];
  snprintf(value, sizeof(value), "not run: %s", why);
  bn_row(name, value, target, false);
}

void bn_die(const char* fmt, ...) {
  va_list ap;
  fprintf(stderr, "bench: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n");
  exit(1);
}

void bn_die_kpack(const char* what, kpack_error_t err) {
  bn_die("%s: %s", what, kpack_error_string(err));
}

bool bn_exists(const char* path) {
  return access(path, F_OK) == 0;
}

uint64_t bn_file_size(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0)
    bn_die("%s: cannot stat", path);
  return (uint64_t)st.st_size;
}

void bn_evict(const char* path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    bn_die("%s: cannot open", path);
  (void)fdatasync(fd);
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

void bn_warm(const char* path) {
  static char buf[1 << 20];
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    bn_die("%s: cannot open", path);
  while (read(fd, buf, sizeof(buf)) > 0) {
  }
  close(fd);
}

static void warm_file(const char* path, const char* name, const struct stat* st,
                      void* context) {
  (void)name;
  (void)context;
  if (S_ISREG(st->st_mode))
    bn_warm(path);
}

void bn_warm_tree(const char* dir) {
  size_t dirs = 0;
  bn_walk_each(dir, &dirs, warm_file, NULL);
}

long bn_proc_value(const char* file, const char* key) {
  FILE* f = fopen(file, "r");
  char line[256];
  long v = -1;
  size_t k = strlen(key);
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, key, k) == 0)
      v = atol(line + k);
  if (f)
    fclose(f);
  return v;
}

long bn_archive_pages_kb(pid_t pid) {
  char path[64], line[4096];
  snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
  FILE* f = fopen(path, "r");
  long kb = 0;
  bool archive = false;
  while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
    size_t n = strcspn(line, "\n");
    line[n] = '\0';
    if (strncmp(line, "Rss:", 4) == 0) {
      if (archive)
        kb += atol(line + 4);
    } else if (isxdigit((unsigned char)line[0]) && !isupper(line[0])) {
      /* A mapping's first line (its range in lowercase hex, permissions,
       * offset, device, inode, path); the fields after it start with an
       * upper-case name. */
      archive = n > 6 && strcmp(line + n - 6, ".kpack") == 0;
    }
  }
  if (f != NULL)
    fclose(f);
  return kb;
}

/* ---- the spawner ---------------------------------------------------------
 * A child's peak RSS as wait4() reports it (ru_maxrss) is the larger of its
 * own and that of the process it was forked from, up to its exec: forked
 * from the bench after the data sets were generated, `kpack list` of the
 * whole install read 110 MiB where /usr/bin/time read 23. Every command is
 * therefore started by the spawner, a process forked at the start of
 * main(), before anything is generated, small as /usr/bin/time is: it
 * forks, execs (or runs a builtin, bn_builtins), waits and sends back the
 * wait status, the time and ru_maxrss. A request is one datagram: the log
 * path (empty: /dev/null), then each argument, each ending in a NUL. */

enum { BN_REQUEST_MAX = 1 << 18, BN_ARGS_MAX = 2048 };

static int spawner = -1;

/* Forks, runs argv (a builtin or a program on PATH) and waits for it. */
static bn_proc run_child(char* const argv[], const char* log) {
  bn_proc r = {.status = -1};
  double t = bn_now();
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    for (const bn_builtin* b = bn_builtins; b->name != NULL; b++)
      if (strcmp(argv[0], b->name) == 0)
        _exit(b->main(argv));
    execvp(argv[0], argv);
    _exit(127);
  }
  struct rusage ru;
  if (pid < 0 || wait4(pid, &r.status, 0, &ru) != pid)
    return r;
  r.seconds = bn_now() - t;
  r.max_rss_kb = ru.ru_maxrss;
  return r;
}

static void __attribute__((noreturn)) serve_requests(int fd) {
  static char request[BN_REQUEST_MAX];
  static char* argv[BN_ARGS_MAX];
  for (;;) {
    ssize_t n = recv(fd, request, sizeof(request), 0);
    if (n <= 0)
      _exit(0); /* the bench has gone */
    const char* log = request;
    size_t argc = 0;
    for (char* p = request + strlen(request) + 1;
         p < request + n && argc + 1 < BN_ARGS_MAX; p += strlen(p) + 1)
      argv[argc++] = p;
    argv[argc] = NULL;
    bn_proc r =
        argc > 0 ? run_child(argv, *log ? log : NULL) : (bn_proc){.status = -1};
    if (send(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r))
      _exit(1);
  }
}

void bn_spawner_start(void) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    bn_die("cannot make the spawner's socket");
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    bn_die("cannot fork the spawner");
  if (pid == 0) {
    close(sv[0]);
    serve_requests(sv[1]);
  }
  close(sv[1]);
  spawner = sv[0];
}

/* Appends s and its NUL to a request of *used bytes. */
static void request_add(char* request, size_t* used, const char* s) {
  size_t len = strlen(s) + 1;
  if (len > BN_REQUEST_MAX - *used)
    bn_die("too many arguments for the spawner");
  memcpy(request + *used, s, len);
  *used += len;
}

bn_proc bn_run(char* const argv[], const char* log) {
  static char request[BN_REQUEST_MAX];
  bn_proc r = {.status = -1};
  size_t used = 0;
  if (spawner < 0)
    bn_die("the spawner is not running");
  request_add(request, &used, log != NULL ? log : "");
  for (size_t i = 0; argv[i] != NULL; i++)
    request_add(request, &used, argv[i]);
  if (send(spawner, request, used, 0) != (ssize_t)used ||
      recv(spawner, &r, sizeof(r), 0) != (ssize_t)sizeof(r) || r.status == -1)
    bn_die("%s: cannot run", argv[0]);
  return r;
}

bn_proc bn_run_ok(char* const argv[]) {
  bn_proc r = bn_run(argv, NULL);
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    fprintf(stderr, "bench: command failed:");
    for (size_t i = 0; argv[i] != NULL; i++)
      fprintf(stderr, " %s", argv[i]);
    fprintf(stderr, "\n");
    exit(1);
  }
  return r;
}

bool bn_have(const char* program) {
  const char* path = getenv("PATH");
  char* copy = strdup(path && *path ? path : "/usr/bin:/bin");
  char* save = NULL;
  bool found = false;
  for (char* dir = strtok_r(copy, ":", &save); dir && !found;
       dir = strtok_r(NULL, ":", &save)) {
    char full[4096];
    snprintf(full, sizeof(full), "%s/%s", dir, program);
    found = access(full, X_OK) == 0;
  }
  free(copy);
  return found;
}

kpack_archive_t bn_open_listed(const char* path, bn_kernel** kernels,
                               size_t* count) {
  kpack_archive_t a;
  kpack_error_t err = kpack_open(path, &a);
  if (err != KPACK_SUCCESS)
    bn_die_kpack(path, err);
  bn_list(a, kernels, count);
  return a;
}

void bn_list(kpack_archive_t a, bn_kernel** kernels, size_t* count) {
  size_t binaries, n = 0;
  kpack_get_kernel_count(a, count);
  bn_kernel* k = calloc(*count ? *count : 1, sizeof(*k));
  kpack_get_binary_count(a, &binaries);
  for (size_t i = 0; i < binaries; i++) {
    const char* b;
    size_t arches;
    kpack_get_binary(a, i, &b);
    kpack_get_binary_arch_count(a, b, &arches);
    for (size_t j = 0; j < arches && n < *count; j++) {
      kpack_kernel_info_t info;
      k[n].binary = b;
      kpack_get_binary_arch(a, b, j, &k[n].arch);
      kpack_get_kernel_info(a, b, k[n].arch, &info);
      k[n].size = info.size;
      n++;
    }
  }
  *kernels = k;
}

/* ---- FUSE daemons -------------------------------------------------------- */

/* Starts a FUSE daemon in the foreground; returns the seconds until the
 * mount appears. Its output goes to `log`, or nowhere when NULL. */
double bn_daemon_start(bn_daemon* m, char* const argv[], const char* dir,
                       const char* log) {
  struct stat before, st;
  mkdir(dir, 0755);
  if (stat(dir, &before) != 0)
    bn_die("%s: cannot stat", dir);
  m->dir = dir;
  double t = bn_now();
  m->started = t;
  m->pid = fork();
  if (m->pid == 0) {
    int out = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(out, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  for (;;) {
    if (stat(dir, &st) == 0 && st.st_dev != before.st_dev)
      return bn_now() - t;
    if (waitpid(m->pid, NULL, WNOHANG) == m->pid || bn_now() - t > 60)
      bn_die("%s did not mount %s", argv[0], dir);
    usleep(200);
  }
}

bool bn_mount_phases(const bn_daemon* m, double mounted, double* phases) {
  static const char* const keys[] = {"started_ns", "sources_opened_ns",
                                     "tree_built_ns", "mounted_ns", "init_ns"};
  double at[5] = {0};
  char path[4096], line[256];
  snprintf(path, sizeof(path), "%s/.kpackfs/stats", m->dir);
  FILE* f = fopen(path, "r");
  if (f == NULL)
    return false;
  size_t found = 0;
  while (fgets(line, sizeof(line), f) != NULL)
    for (size_t k = 0; k < 5; k++) {
      size_t n = strlen(keys[k]);
      if (strncmp(line, keys[k], n) == 0 && line[n] == '=') {
        at[k] = (double)strtoull(line + n + 1, NULL, 10) * 1e-9;
        found++;
      }
    }
  fclose(f);
  if (found != 5)
    return false;
  phases[BN_START] = at[0] - m->started;
  for (size_t k = 1; k < 5; k++)
    phases[k] = at[k] - at[k - 1];
  phases[BN_SEEN] = m->started + mounted - at[4];
  return true;
}

void bn_phases_text(char* out, size_t cap, double (*phases)[BN_PHASES],
                    int reps) {
  static const char* const names[BN_PHASES] = {"start", "TOCs", "tree",
                                               "mount", "INIT", "seen"};
  double total = 0;
  size_t used = 0;
  for (int p = 0; p < BN_PHASES; p++) {
    double v[64];
    for (int r = 0; r < reps && r < 64; r++)
      v[r] = phases[r][p];
    double ms = bn_median(v, reps) * 1e3;
    total += ms;
    used += (size_t)snprintf(out + used, used < cap ? cap - used : 0,
                             "%s%s %.1f", p ? " + " : "", names[p], ms);
  }
  if (used < cap)
    snprintf(out + used, cap - used, " = %.1f ms", total);
}

void bn_daemon_stop(bn_daemon* m) {
  char* argv[] = {"fusermount3", "-u", (char*)m->dir, NULL};
  bn_proc p = bn_run(argv, NULL);
  if (!WIFEXITED(p.status) || WEXITSTATUS(p.status) != 0)
    kill(m->pid, SIGTERM);
  waitpid(m->pid, NULL, 0);
}

size_t bn_walk_each(const char* path, size_t* dirs, bn_file_fn* file,
                    void* context) {
  size_t count = 1;
  DIR* d = opendir(path);
  if (d == NULL)
    return count;
  ++*dirs;
  char child[4096];
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
    struct stat st;
    if (lstat(child, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      count += bn_walk_each(child, dirs, file, context);
    } else {
      count++;
      if (file != NULL)
        file(child, e->d_name, &st, context);
    }
  }
  closedir(d);
  return count;
}

size_t bn_walk(const char* path, size_t* dirs) {
  return bn_walk_each(path, dirs, NULL, NULL);
}
