/* SPDX-License-Identifier: MIT
 *
 * Shared test helpers (see support.h): temporary trees, deterministic kernel
 * bytes, and archives produced by the project's own writer.
 */
#include "support.h"
#include "fixture_fatbin.h"

#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* A child's exit status that says it could not give up its capabilities. */
#define KT_CANNOT_DROP 125

char* kt_tmpdir(void) {
  const char* base = getenv("TMPDIR");
  char* path;
  assert_true(asprintf(&path, "%s/kpack-test.XXXXXX",
                       base && *base ? base : "/tmp") > 0);
  assert_non_null(mkdtemp(path));
  return path;
}

char* kt_tmp;

int kt_tmp_setup(void** state) {
  (void)state;
  kt_tmp = kt_tmpdir();
  return 0;
}

int kt_tmp_teardown(void** state) {
  (void)state;
  kt_rmtree(kt_tmp);
  free(kt_tmp);
  kt_tmp = NULL;
  return 0;
}

char* kt_kpack;

int kt_kpack_setup(void** state) {
  kt_kpack = kt_program("kpack");
  return kt_tmp_setup(state);
}

int kt_kpack_teardown(void** state) {
  free(kt_kpack);
  kt_kpack = NULL;
  return kt_tmp_teardown(state);
}

static int remove_entry(const char* path, const struct stat* st, int flag,
                        struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void kt_rmtree(const char* path) {
  if (path != NULL)
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char* kt_path(const char* dir, const char* name) {
  char* path;
  assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
  return path;
}

char* kt_in_tmp(const char* name) {
  return kt_path(kt_tmp, name);
}

void kt_mkdirs(const char* path) {
  char* copy = strdup(path);
  assert_non_null(copy);
  for (char* p = copy + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(copy, 0755);
      *p = '/';
    }
  mkdir(copy, 0755);
  free(copy);
}

char* kt_tree_path(const char* tree, const char* rel) {
  const char* slash = strrchr(rel, '/');
  int n = slash != NULL ? (int)(slash - rel) : 0;
  char* dir;
  assert_true(asprintf(&dir, "%s%s%.*s", tree, n > 0 ? "/" : "", n, rel) > 0);
  kt_mkdirs(dir);
  free(dir);
  return kt_path(tree, rel);
}

void kt_copy_file(const char* from, const char* to) {
  size_t n;
  void* data = kt_read_file(from, &n);
  assert_non_null(data);
  kt_write_file(to, data, n);
  free(data);
  struct stat st;
  assert_int_equal(stat(from, &st), 0);
  assert_int_equal(chmod(to, st.st_mode & 07777), 0);
}

void* kt_pattern(size_t size, uint32_t seed) {
  uint8_t* p = malloc(size ? size : 1);
  assert_non_null(p);
  fx_fill_pattern(p, size, seed);
  return p;
}

/* Reads to EOF rather than trusting the size: /proc files report 0. */
void* kt_read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 4096, n = 0;
  uint8_t* data = malloc(cap);
  assert_non_null(data);
  for (size_t got; (got = fread(data + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      cap *= 2;
      data = realloc(data, cap);
      assert_non_null(data);
    }
  }
  bool failed = ferror(f) != 0;
  fclose(f);
  if (failed) {
    free(data);
    return NULL;
  }
  data[n] = '\0'; /* the loop leaves n < cap */
  *size = n;
  return data;
}

void kt_write_file(const char* path, const void* data, size_t size) {
  FILE* f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

bool kt_same_file(const char* a, const char* b) {
  size_t na, nb;
  void* x = kt_read_file(a, &na);
  void* y = kt_read_file(b, &nb);
  bool same = x != NULL && y != NULL && na == nb && memcmp(x, y, na) == 0;
  free(x);
  free(y);
  return same;
}

void kt_write_archive(const char* path, kpack_compression_scheme_t scheme,
                      const char* const* arches, size_t arch_count,
                      const kt_kernel* kernels, size_t kernel_count) {
  kpack_writer_options_t opts = {
      .scheme = scheme,
      .group_name = "test",
      .gfx_arch_family = "gfxtest",
      .gfx_arches = arches,
      .gfx_arch_count = arch_count,
  };
  kpack_writer_t* w;
  assert_int_equal(kpack_writer_create(path, &opts, &w), KPACK_SUCCESS);
  for (size_t i = 0; i < kernel_count; i++)
    assert_int_equal(
        kpack_writer_add_kernel(w, kernels[i].binary, kernels[i].arch,
                                kernels[i].data, kernels[i].size),
        KPACK_SUCCESS);
  assert_int_equal(kpack_writer_finish(w), KPACK_SUCCESS);
}

char* kt_librocrand(void) {
  const char* src = getenv("KPACK_SOURCE_DIR");
  char *cmd, line[4096];
  assert_true(asprintf(&cmd, "'%s/contrib/demo.sh' fetch",
                       src != NULL && *src ? src : ".") > 0);
  FILE* p = popen(cmd, "r");
  assert_non_null(p);
  char* got = fgets(line, sizeof(line), p);
  int status = pclose(p);
  free(cmd);
  if (got == NULL || status != 0)
    fail_msg("contrib/demo.sh fetch failed (status %d): cannot get librocrand1",
             status);
  line[strcspn(line, "\n")] = '\0';
  return strdup(line);
}

pid_t kt_spawn(char* const argv[], const char* log) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
      _exit(125);
    int in = open("/dev/null", O_RDONLY);
    int out =
        open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0)
      _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  return pid;
}

void kt_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int kt_wait(pid_t pid, double seconds) {
  int status;
  for (long waited = 0; waited <= (long)(seconds * 1000); waited += 10) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
      return status;
    if (r < 0)
      return -1;
    kt_sleep_ms(10);
  }
  return -1;
}

bool kt_is_mountpoint(const char* dir) {
  struct stat a, b;
  char* parent = kt_path(dir, "..");
  bool yes =
      stat(dir, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
  free(parent);
  return yes;
}

int kt_fusermount(const char* dir, bool lazy, double seconds) {
  char* argv[] = {"fusermount3",
                  "-u",
                  "-q",
                  lazy ? "-z" : (char*)dir,
                  lazy ? (char*)dir : NULL,
                  NULL};
  pid_t pid = kt_spawn(argv, NULL);
  int status = pid > 0 ? kt_wait(pid, seconds) : -1;
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A captured stream as a NUL-terminated string. */
static char* read_capture(int fd) {
  size_t cap = 4096, n = 0;
  char* text = malloc(cap);
  assert_non_null(text);
  lseek(fd, 0, SEEK_SET);
  for (ssize_t got; (got = read(fd, text + n, cap - n - 1)) > 0;) {
    n += (size_t)got;
    if (cap - n - 1 == 0) {
      cap *= 2;
      text = realloc(text, cap);
      assert_non_null(text);
    }
  }
  text[n] = '\0';
  return text;
}

/* kt_run(), and kt_run_as_user() with `drop_dac`. */
static int run(char* const argv[], double seconds, char** out, char** err,
               bool drop_dac) {
  char* dir = kt_tmpdir();
  char* out_path = kt_path(dir, "stdout");
  char* err_path = kt_path(dir, "stderr");
  int fds[2] = {open(out_path, O_RDWR | O_CREAT | O_TRUNC, 0600),
                open(err_path, O_RDWR | O_CREAT | O_TRUNC, 0600)};
  assert_true(fds[0] >= 0 && fds[1] >= 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    if (in < 0)
      _exit(126);
    dup2(in, 0);
    dup2(fds[0], 1);
    dup2(fds[1], 2);
    /* Root keeps only the capabilities its bounding set holds across the
     * exec. */
    if (drop_dac && geteuid() == 0 &&
        (prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0) != 0 ||
         prctl(PR_CAPBSET_DROP, CAP_DAC_READ_SEARCH, 0, 0, 0) != 0))
      _exit(KT_CANNOT_DROP);
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = kt_wait(pid, seconds);
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fail_msg("%s did not finish within %.0f s", argv[0], seconds);
  }
  if (!WIFEXITED(status))
    fail_msg("%s died of signal %d", argv[0], WTERMSIG(status));
  if (out != NULL)
    *out = read_capture(fds[0]);
  if (err != NULL)
    *err = read_capture(fds[1]);
  close(fds[0]);
  close(fds[1]);
  kt_rmtree(dir);
  free(out_path);
  free(err_path);
  free(dir);
  return WEXITSTATUS(status) == KT_CANNOT_DROP && drop_dac
             ? -1
             : WEXITSTATUS(status);
}

int kt_run(char* const argv[], double seconds, char** out, char** err) {
  return run(argv, seconds, out, err, false);
}

int kt_run_as_user(char* const argv[], double seconds, char** out, char** err) {
  return run(argv, seconds, out, err, true);
}

uint64_t kt_fnv1a(const void* data, size_t size, uint64_t hash) {
  const uint8_t* b = data;
  for (size_t i = 0; i < size; i++)
    hash = (hash ^ b[i]) * 1099511628211ull;
  return hash;
}

const char* kt_bin_dir(void) {
  const char* dir = getenv("KPACK_TEST_BIN");
  return dir != NULL && *dir ? dir : "build/bin";
}

char* kt_program(const char* name) {
  return kt_path(kt_bin_dir(), name);
}

int kt_run_args(const char* program, const char* const* args, double seconds,
                char** out, char** err) {
  char* argv[64];
  size_t n = 0;
  argv[n++] = (char*)program;
  for (const char* const* a = args; *a != NULL; a++) {
    assert_true(n < 63);
    argv[n++] = (char*)*a;
  }
  argv[n] = NULL;
  return kt_run(argv, seconds, out, err);
}

bool kt_loads_in_child(const char* path, const char* symbol) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
      fprintf(stderr, "dlopen: %s\n", dlerror());
    _exit(lib != NULL && dlsym(lib, symbol) != NULL ? 0 : 1);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void kt_check_readelf(const char* path) {
  char *out = NULL, *err = NULL;
  char* argv[] = {"readelf", "-a", "-W", (char*)path, NULL};
  assert_int_equal(kt_run(argv, 60, &out, &err), 0);
  if (err[0] != '\0' || strstr(out, "Warning") != NULL)
    fail_msg("readelf -a %s: %s", path, err);
  free(out);
  free(err);
}

char* kt_elflint(const char* path) {
  char *out = NULL, *err = NULL;
  char* argv[] = {"eu-elflint", "--gnu-ld", (char*)path, NULL};
  /* Findings go to stdout (exit 1); a file it cannot read is said on
   * stderr, and a missing eu-elflint exits 127. */
  if (kt_run(argv, 60, &out, &err) > 1 || err[0] != '\0')
    fail_msg("eu-elflint could not check %s: %s", path, err);
  size_t len = strlen(path);
  for (char* at; (at = strstr(out, path)) != NULL;)
    memmove(at, at + len, strlen(at + len) + 1);
  free(err);
  return out;
}

void kt_assert_contains(const char* text, const char* needle) {
  if (strstr(text, needle) == NULL)
    fail_msg("expected \"%s\" in:\n%s", needle, text);
}

/* One line per path below `dir` (walk order, names sorted) into `out`;
 * hard links name the first path of their inode. */
typedef struct kt_inode_seen {
  dev_t dev;
  ino_t ino;
  char* rel;
} kt_inode_seen;

static int kt_compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static void kt_state_of(const char* root, const char* rel, bool dir_times,
                        FILE* out, kt_inode_seen** seen, size_t* seen_count) {
  char* dir = rel[0] ? kt_path(root, rel) : strdup(root);
  DIR* d = opendir(dir);
  assert_non_null(d);
  char** names = NULL;
  size_t count = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    names = realloc(names, (count + 1) * sizeof(*names));
    names[count++] = strdup(e->d_name);
  }
  closedir(d);
  if (count > 1)
    qsort(names, count, sizeof(*names), kt_compare_names);
  for (size_t i = 0; i < count; i++) {
    char* child_rel = rel[0] ? kt_path(rel, names[i]) : strdup(names[i]);
    char* child = kt_path(root, child_rel);
    struct stat st;
    assert_int_equal(lstat(child, &st), 0);
    if (S_ISDIR(st.st_mode) && !dir_times)
      fprintf(out, "%s %o", child_rel, (unsigned)st.st_mode);
    else
      fprintf(out, "%s %o %lld.%09ld", child_rel, (unsigned)st.st_mode,
              (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlink(child, target, sizeof(target) - 1);
      assert_true(n >= 0);
      target[n] = '\0';
      fprintf(out, " -> %s\n", target);
    } else if (S_ISREG(st.st_mode)) {
      const char* first = NULL;
      for (size_t s = 0; s < *seen_count && first == NULL; s++)
        if ((*seen)[s].dev == st.st_dev && (*seen)[s].ino == st.st_ino)
          first = (*seen)[s].rel;
      if (first != NULL) {
        fprintf(out, " link of %s\n", first);
      } else {
        size_t size;
        void* data = kt_read_file(child, &size);
        assert_non_null(data);
        fprintf(out, " %zu bytes %016llx\n", size,
                (unsigned long long)kt_fnv1a(data, size, KT_FNV_START));
        free(data);
        *seen = realloc(*seen, (*seen_count + 1) * sizeof(**seen));
        (*seen)[(*seen_count)++] =
            (kt_inode_seen){st.st_dev, st.st_ino, strdup(child_rel)};
      }
    } else {
      fputc('\n', out);
      if (S_ISDIR(st.st_mode))
        kt_state_of(root, child_rel, dir_times, out, seen, seen_count);
    }
    free(child);
    free(child_rel);
    free(names[i]);
  }
  free(names);
  free(dir);
}

char* kt_tree_state(const char* dir, bool dir_times) {
  char* text = NULL;
  size_t size = 0;
  kt_inode_seen* seen = NULL;
  size_t seen_count = 0;
  FILE* out = open_memstream(&text, &size);
  assert_non_null(out);
  kt_state_of(dir, "", dir_times, out, &seen, &seen_count);
  assert_int_equal(fclose(out), 0);
  for (size_t i = 0; i < seen_count; i++)
    free(seen[i].rel);
  free(seen);
  return text;
}

void kt_assert_same_tree(const char* a, const char* b) {
  char* out = NULL;
  char* argv[] = {"diff", "-r", "--no-dereference", (char*)a, (char*)b, NULL};
  if (kt_run(argv, 60, &out, NULL) != 0)
    fail_msg("%s and %s differ:\n%s", a, b, out);
  free(out);
}

/* Forks kt_kpack with `args`, stdout to /dev/null, stderr to `err` (or
 * /dev/null when negative), `hook` set to `step` when that is not 0. */
static pid_t start_kpack(const char* hook, unsigned step,
                         const char* const* args, int err) {
  char* argv[64];
  size_t n = 0;
  argv[n++] = kt_kpack;
  for (const char* const* a = args; *a != NULL && n < 63; a++)
    argv[n++] = (char*)*a;
  argv[n] = NULL;
  char value[32];
  snprintf(value, sizeof(value), "%u", step);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    dup2(null, 1);
    dup2(err >= 0 ? err : null, 2);
    if (step > 0)
      setenv(hook, value, 1);
    execv(kt_kpack, argv);
    _exit(127);
  }
  return pid;
}

pid_t kt_start_hooked(const char* hook, unsigned step,
                      const char* const* args) {
  return start_kpack(hook, step, args, -1);
}

pid_t kt_start_piped(const char* const* args, int* err) {
  int fds[2];
  assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
  pid_t pid = start_kpack(NULL, 0, args, fds[1]);
  close(fds[1]);
  *err = fds[0];
  return pid;
}

bool kt_read_until(int fd, const char* needle, char** text) {
  size_t len = 0, cap = 256;
  char* buf = malloc(cap);
  assert_non_null(buf);
  buf[0] = '\0';
  while (strstr(buf, needle) == NULL) {
    if (len + 1 == cap) {
      buf = realloc(buf, cap *= 2);
      assert_non_null(buf);
    }
    ssize_t got = read(fd, buf + len, cap - 1 - len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    len += (size_t)got;
    buf[len] = '\0';
  }
  *text = buf;
  return strstr(buf, needle) != NULL;
}

int kt_wait_exit(pid_t pid) {
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

pid_t kt_start_stopped(const char* hook, unsigned step,
                       const char* const* args) {
  pid_t pid = kt_start_hooked(hook, step, args);
  int status;
  assert_int_equal(waitpid(pid, &status, WUNTRACED), pid);
  assert_true(WIFSTOPPED(status));
  return pid;
}

int kt_resume_stopped(pid_t pid) {
  assert_int_equal(kill(pid, SIGCONT), 0);
  return kt_wait_exit(pid);
}

int kt_run_killed(const char* hook, unsigned step, const char* const* args) {
  pid_t pid = kt_start_hooked(hook, step, args);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

unsigned kt_fail_each_write(const char* hook, const char* watched,
                            const char* const* args) {
  char* before = kt_tree_state(watched, true);
  unsigned failures = 0;
  for (unsigned n = 1; n < 200; n++) {
    char value[16], *err = NULL;
    snprintf(value, sizeof(value), "%u", n);
    setenv(hook, value, 1);
    int rc = kt_run_args(kt_kpack, args, 300, NULL, &err);
    unsetenv(hook);
    if (rc == 0) {
      free(err);
      break;
    }
    assert_int_equal(rc, 1);
    kt_assert_contains(err, "Input/output error");
    char* after = kt_tree_state(watched, true);
    if (strcmp(after, before) != 0)
      fail_msg("failed at write %u (%s), %s changed:\n%s\nwas:\n%s", n, err,
               watched, after, before);
    free(after);
    free(err);
    failures++;
  }
  free(before);
  return failures;
}
