/* SPDX-License-Identifier: MIT
 *
 * The loader (docs/loader.md): search order across arches, targets and
 * archives, path resolution and @GFXARCH@, the environment, the status of each
 * kind of failure, debug logging, trace events and concurrent use of one cache.
 * Archives are written by the project's writer into a fresh directory:
 * TMP/lib/libx.so is the (never created) binary, TMP/.kpack the archives.
 * The suite is linked with --wrap=kpack_open, so that a test can hold a
 * load inside an open (see "fork" below); every other open passes through.
 */
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

static char* tmp;
static char* binary; /* TMP/lib/libx.so */

static const char* const env_vars[] = {
    "ROCM_KPACK_PATH", "ROCM_KPACK_PATH_PREFIX", "ROCM_KPACK_DISABLE",
    "ROCM_KPACK_DEBUG"};

static int setup(void** state) {
  (void)state;
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(*env_vars); i++)
    unsetenv(env_vars[i]);
  /* Canonical, so that trace paths (realpath'ed) share its prefix. */
  char* dir = kt_tmpdir();
  tmp = realpath(dir, NULL);
  assert_non_null(tmp);
  free(dir);
  binary = kt_path(tmp, "lib/libx.so");
  dir = kt_path(tmp, "lib");
  assert_int_equal(mkdir(dir, 0755), 0);
  free(dir);
  dir = kt_path(tmp, ".kpack");
  assert_int_equal(mkdir(dir, 0755), 0);
  free(dir);
  return 0;
}

static void give_back_descriptors(void);

static int teardown(void** state) {
  (void)state;
  give_back_descriptors();
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(*env_vars); i++)
    unsetenv(env_vars[i]);
  kt_rmtree(tmp);
  free(tmp);
  free(binary);
  return 0;
}

/* ---- fixtures ------------------------------------------------------------ */

/* A kernel of the fixture archives: its bytes are a function of `seed`. */
typedef struct kspec {
  const char* binary;
  const char* arch;
  uint32_t seed;
} kspec;

#define ARCHES(...)                   \
  (const char* const[]){__VA_ARGS__}, \
      sizeof((const char* const[]){__VA_ARGS__}) / sizeof(const char*)
#define NO_ARCHES NULL, 0
#define KERNELS(...)            \
  (const kspec[]){__VA_ARGS__}, \
      sizeof((const kspec[]){__VA_ARGS__}) / sizeof(kspec)

static size_t seed_size(uint32_t seed) {
  return 4096 + seed * 37;
}

/* TMP/rel, absolute; free() it. */
static char* at(const char* rel) {
  return kt_path(tmp, rel);
}

/* Writes TMP/rel with the given declared arches and kernels. */
static void archive_scheme(const char* rel, kpack_compression_scheme_t scheme,
                           const char* const* arches, size_t arch_count,
                           const kspec* ks, size_t n) {
  kt_kernel* k = calloc(n ? n : 1, sizeof(*k));
  assert_non_null(k);
  for (size_t i = 0; i < n; i++) {
    k[i].binary = ks[i].binary;
    k[i].arch = ks[i].arch;
    k[i].size = seed_size(ks[i].seed);
    k[i].data = kt_pattern(k[i].size, ks[i].seed);
  }
  char* path = at(rel);
  kt_write_archive(path, scheme, arches, arch_count, k, n);
  free(path);
  for (size_t i = 0; i < n; i++)
    free((void*)k[i].data);
  free(k);
}

static void archive(const char* rel, const char* const* arches,
                    size_t arch_count, const kspec* ks, size_t n) {
  archive_scheme(rel, KPACK_COMPRESSION_ZSTD_PER_KERNEL, arches, arch_count, ks,
                 n);
}

/* HIPK metadata in a heap buffer; free() it. */
static void* hipk_n(const char* name, const char* const* paths, size_t n) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_map(&pk, 2);
  msgpack_pack_str_with_body(&pk, "kernel_name", 11);
  msgpack_pack_str_with_body(&pk, name, strlen(name));
  msgpack_pack_str_with_body(&pk, "kpack_search_paths", 18);
  msgpack_pack_array(&pk, n);
  for (size_t i = 0; i < n; i++)
    msgpack_pack_str_with_body(&pk, paths[i], strlen(paths[i]));
  return sb.data; /* the sbuffer's malloc'ed storage */
}

#define HIPK(name, ...)                            \
  hipk_n(name, (const char* const[]){__VA_ARGS__}, \
         sizeof((const char* const[]){__VA_ARGS__}) / sizeof(const char*))

static kpack_cache_t new_cache(void) {
  kpack_cache_t cache;
  assert_int_equal(kpack_cache_create(&cache), KPACK_SUCCESS);
  assert_non_null(cache);
  return cache;
}

/* A cache created with one environment variable set (NULL: none). */
static kpack_cache_t cache_with_env(const char* name, const char* value) {
  if (name != NULL)
    assert_int_equal(setenv(name, value, 1), 0);
  kpack_cache_t cache = new_cache();
  if (name != NULL)
    unsetenv(name);
  return cache;
}

static kpack_error_t load_arches(kpack_cache_t cache, const void* meta,
                                 uint32_t co_index, const char* const* arches,
                                 size_t n, void** data, size_t* size) {
  return kpack_load_code_object(cache, meta, binary, co_index, arches, n, data,
                                size);
}

#define LOAD(cache, meta, co, data, size, ...) \
  load_arches(cache, meta, co, ARCHES(__VA_ARGS__), data, size)

/* Loads and checks the bytes are those of `seed`. */
static void expect_seed_n(kpack_cache_t cache, const void* meta,
                          uint32_t co_index, const char* const* arches,
                          size_t n, uint32_t seed) {
  void* data = NULL;
  size_t size = 0;
  assert_int_equal(load_arches(cache, meta, co_index, arches, n, &data, &size),
                   KPACK_SUCCESS);
  assert_int_equal(size, seed_size(seed));
  void* want = kt_pattern(size, seed);
  assert_memory_equal(data, want, size);
  free(want);
  kpack_free_code_object(data);
}

#define EXPECT_SEED(cache, meta, co, seed, ...) \
  expect_seed_n(cache, meta, co, ARCHES(__VA_ARGS__), seed)

static void expect_status_n(kpack_cache_t cache, const void* meta,
                            const char* const* arches, size_t n,
                            kpack_error_t want) {
  void* data = (void*)&data;
  size_t size = 99;
  assert_int_equal(load_arches(cache, meta, 0, arches, n, &data, &size), want);
  assert_null(data);
  assert_int_equal(size, 0);
}

#define EXPECT_STATUS(cache, meta, want, ...) \
  expect_status_n(cache, meta, ARCHES(__VA_ARGS__), want)

/* Descriptors held by use_up_descriptors(); teardown gives them back if a
 * test failed before it did. */
static int held_fds[64];
static size_t held_count;
static struct rlimit saved_limit;
static bool limit_lowered;

/* Leaves no free file descriptor, under a soft limit of 64. */
static void use_up_descriptors(void) {
  struct rlimit low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved_limit), 0);
  low = saved_limit;
  low.rlim_cur = 64;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  limit_lowered = true;
  int fd;
  while (held_count < 64 && (fd = dup(STDERR_FILENO)) >= 0)
    held_fds[held_count++] = fd;
  assert_int_equal(errno, EMFILE);
}

static void give_back_descriptors(void) {
  while (held_count > 0)
    close(held_fds[--held_count]);
  if (limit_lowered)
    setrlimit(RLIMIT_NOFILE, &saved_limit);
  limit_lowered = false;
}

/* ---- trace recording ----------------------------------------------------- */

/* Events as text lines, e.g. "KERNEL gfx90a /t/.kpack/a.kpack
 * KPACK_ERROR_KERNEL_NOT_FOUND". Paths under TMP are shown as "@/rel". */
typedef struct recorder {
  pthread_mutex_t lock; /* events may arrive from many threads */
  char** lines;
  size_t count;
  size_t opened; /* ARCHIVE events that opened the archive */
} recorder;

static const char* shorten(const char* path) {
  size_t n = strlen(tmp);
  if (path != NULL && strncmp(path, tmp, n) == 0)
    return path + n;
  return path ? path : "-";
}

static void record(const kpack_trace_event_t* ev, void* user) {
  recorder* r = user;
  char* line = NULL;
  const char* status = kpack_error_string(ev->status);
  int n = -1;
  switch (ev->kind) {
    case KPACK_TRACE_LOAD:
      n = asprintf(&line, "LOAD %s", ev->kernel);
      break;
    case KPACK_TRACE_PATH:
      n = asprintf(&line, "PATH %s %s %s", shorten(ev->path), ev->source,
                   ev->is_directory ? "dir"
                   : ev->exists     ? "exists"
                                    : "missing");
      break;
    case KPACK_TRACE_ARCHIVE: {
      char arches[256] = "";
      for (size_t i = 0; i < ev->arch_count; i++) {
        strncat(arches, " ", sizeof(arches) - strlen(arches) - 1);
        strncat(arches, ev->arches[i], sizeof(arches) - strlen(arches) - 1);
      }
      n = asprintf(&line, "ARCHIVE %s %s %s%s%s", shorten(ev->path), status,
                   ev->opened ? "opened" : "cached", arches,
                   ev->transient ? " transient" : "");
      break;
    }
    case KPACK_TRACE_TARGET:
      n = asprintf(&line, "TARGET %s", ev->target);
      break;
    case KPACK_TRACE_KERNEL:
      n = asprintf(&line, "KERNEL %s %s %s", ev->target, shorten(ev->path),
                   status);
      break;
    case KPACK_TRACE_RESULT:
      n = asprintf(&line, "RESULT %s", status);
      break;
  }
  assert_true(n > 0);
  pthread_mutex_lock(&r->lock);
  char** grown = realloc(r->lines, (r->count + 1) * sizeof(*grown));
  assert_non_null(grown);
  r->lines = grown;
  r->lines[r->count++] = line;
  if (ev->kind == KPACK_TRACE_ARCHIVE && ev->opened)
    r->opened++;
  pthread_mutex_unlock(&r->lock);
}

static void recorder_init(recorder* r, kpack_cache_t cache) {
  memset(r, 0, sizeof(*r));
  pthread_mutex_init(&r->lock, NULL);
  assert_int_equal(kpack_cache_set_trace(cache, record, r), KPACK_SUCCESS);
}

static void recorder_clear(recorder* r) {
  for (size_t i = 0; i < r->count; i++)
    free(r->lines[i]);
  free(r->lines);
  r->lines = NULL;
  r->count = 0;
  r->opened = 0;
}

static void recorder_free(recorder* r) {
  recorder_clear(r);
  pthread_mutex_destroy(&r->lock);
}

/* Lines that start with `prefix`, joined by '\n'; free() it. */
static char* lines_with(const recorder* r, const char* prefix) {
  size_t len = 1;
  for (size_t i = 0; i < r->count; i++)
    if (strncmp(r->lines[i], prefix, strlen(prefix)) == 0)
      len += strlen(r->lines[i]) + 1;
  char* out = calloc(1, len);
  assert_non_null(out);
  for (size_t i = 0; i < r->count; i++)
    if (strncmp(r->lines[i], prefix, strlen(prefix)) == 0) {
      strcat(out, r->lines[i]);
      strcat(out, "\n");
    }
  return out;
}

static void expect_lines(const recorder* r, const char* prefix,
                         const char* want) {
  char* got = lines_with(r, prefix);
  assert_string_equal(got, want);
  free(got);
}

/* ---- arguments, DISABLE, metadata ---------------------------------------- */

static void test_cache_create_rejects_null_and_destroy_accepts_null(
    void** state) {
  (void)state;
  assert_int_equal(kpack_cache_create(NULL), KPACK_ERROR_INVALID_ARGUMENT);
  kpack_cache_destroy(NULL);
  kpack_free_code_object(NULL);
  assert_int_equal(kpack_cache_set_trace(NULL, record, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
}

static void test_null_pointers_and_zero_arch_count_are_invalid(void** state) {
  (void)state;
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  const char* arches[] = {"gfx90a", NULL};
  void* data;
  size_t size;
  assert_int_equal(
      kpack_load_code_object(NULL, meta, binary, 0, arches, 1, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_load_code_object(cache, NULL, binary, 0, arches, 1, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_load_code_object(cache, meta, NULL, 0, arches, 1, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_load_code_object(cache, meta, binary, 0, NULL, 1, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_load_code_object(cache, meta, binary, 0, arches, 0, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_load_code_object(cache, meta, binary, 0, arches, 2, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT); /* a NULL entry */
  assert_int_equal(
      kpack_load_code_object(cache, meta, binary, 0, arches, 1, NULL, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_load_code_object(cache, meta, binary, 0, arches, 1, &data, NULL),
      KPACK_ERROR_INVALID_ARGUMENT);
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_argument_check_comes_before_disable(void** state) {
  (void)state;
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_DISABLE", "1");
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  const char* arches[] = {"gfx90a"};
  void* data;
  size_t size;
  assert_int_equal(
      kpack_load_code_object(cache, meta, binary, 0, arches, 0, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_disable_comes_before_metadata(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_DISABLE", "yes");
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  static const uint8_t not_a_map[] = {0x91, 0x01};
  EXPECT_STATUS(cache, meta, KPACK_ERROR_NOT_IMPLEMENTED, "gfx90a");
  EXPECT_STATUS(cache, not_a_map, KPACK_ERROR_NOT_IMPLEMENTED, "gfx90a");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_disable_flag_is_off_when_empty_or_starting_with_zero(
    void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  const char* off[] = {"", "0", "0yes"};
  for (size_t i = 0; i < 3; i++) {
    kpack_cache_t cache = cache_with_env("ROCM_KPACK_DISABLE", off[i]);
    EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
    kpack_cache_destroy(cache);
  }
  free(meta);
}

static void test_environment_is_read_only_at_create(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  kpack_cache_t cache = new_cache();
  setenv("ROCM_KPACK_DISABLE", "1", 1);
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  unsetenv("ROCM_KPACK_DISABLE");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_malformed_metadata_is_invalid_metadata(void** state) {
  (void)state;
  kpack_cache_t cache = new_cache();
  static const uint8_t array[] = {0x91, 0xa1, 'k'};
  static const uint8_t empty_map[] = {0x80};
  void* no_paths = hipk_n("lib/libx.so", NULL, 0);
  EXPECT_STATUS(cache, array, KPACK_ERROR_INVALID_METADATA, "gfx90a");
  EXPECT_STATUS(cache, empty_map, KPACK_ERROR_INVALID_METADATA, "gfx90a");
  EXPECT_STATUS(cache, no_paths, KPACK_ERROR_INVALID_METADATA, "gfx90a");
  free(no_paths);
  kpack_cache_destroy(cache);
}

static void test_metadata_pointer_in_no_mapping_is_invalid_metadata(
    void** state) {
  (void)state;
  kpack_cache_t cache = new_cache();
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  void* gone = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(gone != MAP_FAILED);
  assert_int_equal(munmap(gone, page), 0);
  EXPECT_STATUS(cache, gone, KPACK_ERROR_INVALID_METADATA, "gfx90a");
  kpack_cache_destroy(cache);
}

/* ---- paths --------------------------------------------------------------- */

static void test_relative_search_path_resolves_against_binary_directory(
    void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  free(meta);
  kpack_cache_destroy(cache);
}

/* A library loaded through a symlinked directory (a "view" of an install
 * tree, as ROCm's packaging makes them) finds the archives of the real
 * tree, as ROCm's loader does: TMP/view/lib -> ../lib, so the binary
 * TMP/view/lib/libx.so has ../.kpack = TMP/.kpack, not TMP/view/.kpack. */
static void test_symlinked_library_directory_finds_the_real_archives(
    void** state) {
  (void)state;
  archive(".kpack/x_gfx90a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  char* view = at("view");
  char* view_binary = at("view/lib/libx.so");
  assert_int_equal(mkdir(view, 0755), 0);
  char* lib = at("view/lib");
  assert_int_equal(symlink("../lib", lib), 0);
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/x_@GFXARCH@.kpack");
  const char* arches[] = {"gfx90a:xnack-"};
  void* data;
  size_t size;
  for (int round = 0; round < 3; round++) { /* cold, then remembered */
    assert_int_equal(kpack_load_code_object(cache, meta, view_binary, 0, arches,
                                            1, &data, &size),
                     KPACK_SUCCESS);
    assert_int_equal(size, seed_size(1));
    kpack_free_code_object(data);
    expect_lines(&r, "PATH",
                 "PATH /.kpack/x_gfx90a:xnack-.kpack embedded missing\n"
                 "PATH /.kpack/x_gfx90a.kpack embedded exists\n"
                 "PATH /.kpack/x_amdgcnspirv.kpack embedded missing\n");
    recorder_clear(&r);
  }
  free(meta);
  free(lib);
  free(view_binary);
  free(view);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

/* Only a resolution that led to an archive is remembered: an archive that
 * appears later, where the path leads, is found. */
static void test_resolution_that_led_nowhere_is_done_again(void** state) {
  (void)state;
  char* view = at("view");
  char* view_binary = at("view/lib/libx.so");
  assert_int_equal(mkdir(view, 0755), 0);
  char* lib = at("view/lib");
  assert_int_equal(symlink("../lib", lib), 0);
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/late.kpack");
  const char* arches[] = {"gfx90a"};
  void* data;
  size_t size;
  assert_int_equal(kpack_load_code_object(cache, meta, view_binary, 0, arches,
                                          1, &data, &size),
                   KPACK_ERROR_ARCHIVE_NOT_FOUND);
  archive(".kpack/late.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  assert_int_equal(kpack_load_code_object(cache, meta, view_binary, 0, arches,
                                          1, &data, &size),
                   KPACK_SUCCESS);
  assert_int_equal(size, seed_size(2));
  kpack_free_code_object(data);
  free(meta);
  free(lib);
  free(view_binary);
  free(view);
  kpack_cache_destroy(cache);
}

static void test_absolute_search_path_is_used_as_is(void** state) {
  (void)state;
  archive_scheme(".kpack/a.kpack", KPACK_COMPRESSION_NOOP, ARCHES("gfx90a"),
                 KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  char* abs = at(".kpack/a.kpack");
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "/nonexistent/x.kpack", abs);
  EXPECT_SEED(cache, meta, 0, 2, "gfx90a");
  free(meta);
  free(abs);
  kpack_cache_destroy(cache);
}

static void test_co_index_selects_the_kernel(void** state) {
  (void)state;
  archive(
      ".kpack/a.kpack", ARCHES("gfx90a"),
      KERNELS({"lib/libx.so#0", "gfx90a", 1}, {"lib/libx.so#1", "gfx90a", 2}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  EXPECT_SEED(cache, meta, 1, 2, "gfx90a");
  void* data;
  size_t size;
  assert_int_equal(LOAD(cache, meta, 2, &data, &size, "gfx90a"),
                   KPACK_ERROR_KERNEL_NOT_FOUND);
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_gfxarch_placeholder_selects_the_arch_archive(void** state) {
  (void)state;
  archive(".kpack/x_gfx942.kpack", ARCHES("gfx942"),
          KERNELS({"lib/libx.so#0", "gfx942", 1}));
  archive(".kpack/x_gfx90a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/x_@GFXARCH@.kpack");
  EXPECT_SEED(cache, meta, 0, 2, "gfx90a");
  /* Only the requested arch's file is a candidate, and the portable
   * SPIR-V one, searched last. */
  expect_lines(&r, "PATH",
               "PATH /.kpack/x_gfx90a.kpack embedded exists\n"
               "PATH /.kpack/x_amdgcnspirv.kpack embedded missing\n");
  recorder_clear(&r);
  EXPECT_SEED(cache, meta, 0, 1, "gfx942", "gfx90a");
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

/* Portable SPIR-V serves an agent that no native archive serves, and
 * only then: native code first, for every arch of the agent, as the HIP
 * runtime compiles SPIR-V only when nothing native runs. */
static void test_spirv_archive_serves_only_when_nothing_native_does(
    void** state) {
  (void)state;
  archive(".kpack/x_gfx90a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  archive(".kpack/x_amdgcnspirv.kpack", ARCHES("amdgcnspirv"),
          KERNELS({"lib/libx.so#0", "amdgcnspirv", 5}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/x_@GFXARCH@.kpack");
  EXPECT_SEED(cache, meta, 0, 2, "gfx90a:sramecc+:xnack-");
  EXPECT_SEED(cache, meta, 0, 5, "gfx1100");
  /* The second arch's native code comes before the SPIR-V. */
  EXPECT_SEED(cache, meta, 0, 2, "gfx1100", "gfx90a");
  EXPECT_SEED(cache, meta, 0, 5, "amdgcnspirv");
  free(meta);
  meta = HIPK("lib/liby.so", "../.kpack/x_@GFXARCH@.kpack");
  EXPECT_STATUS(cache, meta, KPACK_ERROR_KERNEL_NOT_FOUND, "gfx1100");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_gfxarch_placeholder_expands_each_compatible_target(
    void** state) {
  (void)state;
  archive(".kpack/x_gfx90a:xnack-.kpack", ARCHES("gfx90a:xnack-"),
          KERNELS({"lib/libx.so#0", "gfx90a:xnack-", 3}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/x_@GFXARCH@.kpack");
  EXPECT_SEED(cache, meta, 0, 3, "gfx90a:xnack-");
  expect_lines(&r, "PATH",
               "PATH /.kpack/x_gfx90a:xnack-.kpack embedded exists\n"
               "PATH /.kpack/x_gfx90a.kpack embedded missing\n"
               "PATH /.kpack/x_amdgcnspirv.kpack embedded missing\n");
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

static void test_rocm_kpack_path_replaces_embedded_paths(void** state) {
  (void)state;
  archive(".kpack/embedded.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive("override.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  archive("other.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/other.so#0", "gfx90a", 3}));
  void* meta = HIPK("lib/libx.so", "../.kpack/embedded.kpack");
  char* override = at("override.kpack");
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_PATH", override);
  EXPECT_SEED(cache, meta, 0, 2, "gfx90a");
  kpack_cache_destroy(cache);
  /* The embedded archive holds the kernel, but is never consulted. */
  char* other = at("other.kpack");
  cache = cache_with_env("ROCM_KPACK_PATH", other);
  EXPECT_STATUS(cache, meta, KPACK_ERROR_KERNEL_NOT_FOUND, "gfx90a");
  kpack_cache_destroy(cache);
  free(other);
  free(override);
  free(meta);
}

static void test_rocm_kpack_path_takes_backslash_colon_in_a_name(void** state) {
  (void)state;
  archive("x_gfx90a:xnack-.kpack", ARCHES("gfx90a:xnack-"),
          KERNELS({"lib/libx.so#0", "gfx90a:xnack-", 4}));
  void* meta = HIPK("lib/libx.so", "../.kpack/none.kpack");
  char* name = at("x_gfx90a");
  char* spec;
  assert_true(asprintf(&spec, "/nowhere.kpack:%s\\:xnack-.kpack", name) > 0);
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_PATH", spec);
  EXPECT_SEED(cache, meta, 0, 4, "gfx90a:xnack-");
  kpack_cache_destroy(cache);
  free(spec);
  free(name);
  free(meta);
}

static void test_rocm_kpack_path_directory_means_its_kpack_files_in_order(
    void** state) {
  (void)state;
  char* dir = at("many");
  assert_int_equal(mkdir(dir, 0755), 0);
  archive("many/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  archive("many/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive("many/c.kpack", ARCHES("gfx942"),
          KERNELS({"lib/libx.so#0", "gfx942", 3}));
  char* readme = at("many/README");
  kt_write_file(readme, "not an archive", 14);
  void* meta = HIPK("lib/libx.so", "../.kpack/none.kpack");
  char* spec;
  assert_true(asprintf(&spec, "::%s/:", dir) > 0);
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_PATH", spec);
  recorder r;
  recorder_init(&r, cache);
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  expect_lines(&r, "PATH",
               "PATH /many ROCM_KPACK_PATH dir\n"
               "PATH /many/a.kpack ROCM_KPACK_PATH exists\n"
               "PATH /many/b.kpack ROCM_KPACK_PATH exists\n"
               "PATH /many/c.kpack ROCM_KPACK_PATH exists\n");
  EXPECT_SEED(cache, meta, 0, 3, "gfx942");
  recorder_free(&r);
  kpack_cache_destroy(cache);
  free(spec);
  free(readme);
  free(dir);
  free(meta);
}

static void test_path_prefix_is_searched_before_embedded_paths(void** state) {
  (void)state;
  archive(
      ".kpack/embedded.kpack", ARCHES("gfx90a", "gfx942"),
      KERNELS({"lib/libx.so#0", "gfx90a", 1}, {"lib/libx.so#0", "gfx942", 4}));
  archive("prefix.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  void* meta = HIPK("lib/libx.so", "../.kpack/embedded.kpack");
  char* prefix;
  assert_true(asprintf(&prefix, "%s/missing.kpack::%s/prefix.kpack", tmp, tmp) >
              0);
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_PATH_PREFIX", prefix);
  recorder r;
  recorder_init(&r, cache);
  EXPECT_SEED(cache, meta, 0, 2, "gfx90a");
  /* Embedded paths still follow the prefix. */
  EXPECT_SEED(cache, meta, 0, 4, "gfx942");
  expect_lines(&r, "PATH",
               "PATH /missing.kpack ROCM_KPACK_PATH_PREFIX missing\n"
               "PATH /prefix.kpack ROCM_KPACK_PATH_PREFIX exists\n"
               "PATH /.kpack/embedded.kpack embedded exists\n"
               "PATH /missing.kpack ROCM_KPACK_PATH_PREFIX missing\n"
               "PATH /prefix.kpack ROCM_KPACK_PATH_PREFIX exists\n"
               "PATH /.kpack/embedded.kpack embedded exists\n");
  recorder_free(&r);
  kpack_cache_destroy(cache);
  free(prefix);
  free(meta);
}

static void test_path_prefix_directory_is_expanded(void** state) {
  (void)state;
  archive(".kpack/embedded.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  char* dir = at("pre");
  assert_int_equal(mkdir(dir, 0755), 0);
  archive("pre/p.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 5}));
  void* meta = HIPK("lib/libx.so", "../.kpack/embedded.kpack");
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_PATH_PREFIX", dir);
  EXPECT_SEED(cache, meta, 0, 5, "gfx90a");
  kpack_cache_destroy(cache);
  free(dir);
  free(meta);
}

/* ---- search order -------------------------------------------------------- */

static void test_first_arch_wins_even_from_a_later_archive(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive(".kpack/b.kpack", ARCHES("gfx942"),
          KERNELS({"lib/libx.so#0", "gfx942", 2}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack", "../.kpack/b.kpack");
  EXPECT_SEED(cache, meta, 0, 2, "gfx942", "gfx90a");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a", "gfx942");
  EXPECT_SEED(cache, meta, 0, 1, "gfx1100", "gfx90a");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_archive_order_breaks_ties_for_one_target(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive(".kpack/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  kpack_cache_t cache = new_cache();
  void* ab = HIPK("lib/libx.so", "../.kpack/a.kpack", "../.kpack/b.kpack");
  void* ba = HIPK("lib/libx.so", "../.kpack/b.kpack", "../.kpack/a.kpack");
  EXPECT_SEED(cache, ab, 0, 1, "gfx90a");
  EXPECT_SEED(cache, ba, 0, 2, "gfx90a");
  free(ab);
  free(ba);
  kpack_cache_destroy(cache);
}

static void test_triple_prefixed_arch_matches_bare_name(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a:xnack-"),
          KERNELS({"lib/libx.so#0", "gfx90a:xnack-", 1}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "amdgcn-amd-amdhsa--gfx90a:xnack-");
  EXPECT_SEED(cache, meta, 0, 1, "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_most_specific_declared_target_wins(void** state) {
  (void)state;
  archive(".kpack/a.kpack",
          ARCHES("gfx942", "gfx942:xnack-", "gfx942:sramecc+"),
          KERNELS({"lib/libx.so#0", "gfx942", 1},
                  {"lib/libx.so#0", "gfx942:xnack-", 2},
                  {"lib/libx.so#0", "gfx942:sramecc+", 3}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_SEED(cache, meta, 0, 3, "gfx942:sramecc+:xnack-");
  EXPECT_SEED(cache, meta, 0, 2, "gfx942:sramecc-:xnack-");
  EXPECT_SEED(cache, meta, 0, 1, "gfx942:xnack+");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_three_feature_arch_tries_targets_in_subset_order(
    void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx1"),
          KERNELS({"lib/libx.so#0", "gfx1", 1}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "gfx1:a+:b-:c+");
  expect_lines(&r, "TARGET",
               "TARGET gfx1:a+:b-:c+\n"
               "TARGET gfx1:a+:b-\n"
               "TARGET gfx1:a+:c+\n"
               "TARGET gfx1:b-:c+\n"
               "TARGET gfx1:a+\n"
               "TARGET gfx1:b-\n"
               "TARGET gfx1:c+\n"
               "TARGET gfx1\n");
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

static void test_miss_in_feature_archive_falls_through_to_bare_archive(
    void** state) {
  (void)state;
  /* The xnack- archive holds only a few kernels; ours is in the bare one. */
  archive(".kpack/xnack.kpack", ARCHES("gfx90a:xnack-"),
          KERNELS({"lib/other.so#0", "gfx90a:xnack-", 1}));
  archive(".kpack/bare.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta =
      HIPK("lib/libx.so", "../.kpack/xnack.kpack", "../.kpack/bare.kpack");
  EXPECT_SEED(cache, meta, 0, 2, "gfx90a:xnack-");
  expect_lines(&r, "KERNEL",
               "KERNEL gfx90a:xnack- /.kpack/xnack.kpack "
               "KPACK_ERROR_KERNEL_NOT_FOUND\n"
               "KERNEL gfx90a /.kpack/bare.kpack KPACK_SUCCESS\n");
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

/* ---- failure statuses ---------------------------------------------------- */

static void test_no_existing_archive_is_archive_not_found(void** state) {
  (void)state;
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/none.kpack", "/nonexistent/k");
  EXPECT_STATUS(cache, meta, KPACK_ERROR_ARCHIVE_NOT_FOUND, "gfx90a");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_archive_that_fails_to_open_is_skipped(void** state) {
  (void)state;
  char* bad = at(".kpack/bad.kpack");
  kt_write_file(bad, "KPAK but not really an archive", 30);
  archive(".kpack/good.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  kpack_cache_t cache = new_cache();
  void* only_bad = HIPK("lib/libx.so", "../.kpack/bad.kpack");
  void* both =
      HIPK("lib/libx.so", "../.kpack/bad.kpack", "../.kpack/good.kpack");
  EXPECT_STATUS(cache, only_bad, KPACK_ERROR_ARCHIVE_NOT_FOUND, "gfx90a");
  EXPECT_SEED(cache, both, 0, 1, "gfx90a");
  free(only_bad);
  free(both);
  free(bad);
  kpack_cache_destroy(cache);
}

static void test_failed_open_is_remembered(void** state) {
  (void)state;
  char* bad = at(".kpack/bad.kpack");
  kt_write_file(bad, "nonsense", 8);
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/bad.kpack");
  EXPECT_STATUS(cache, meta, KPACK_ERROR_ARCHIVE_NOT_FOUND, "gfx90a");
  EXPECT_STATUS(cache, meta, KPACK_ERROR_ARCHIVE_NOT_FOUND, "gfx90a");
  expect_lines(&r, "ARCHIVE",
               "ARCHIVE /.kpack/bad.kpack KPACK_ERROR_INVALID_FORMAT opened\n"
               "ARCHIVE /.kpack/bad.kpack KPACK_ERROR_INVALID_FORMAT cached\n");
  assert_int_equal(r.opened, 1);
  free(meta);
  free(bad);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

/* A HIP process that briefly ran out of file descriptors must not lose its
 * kernels for the rest of its life: EMFILE is not remembered. */
static void test_open_failing_for_lack_of_descriptors_is_tried_again(
    void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  use_up_descriptors();
  void* data = NULL;
  size_t size = 0;
  kpack_error_t err = LOAD(cache, meta, 0, &data, &size, "gfx90a");
  give_back_descriptors();
  assert_int_equal(err, KPACK_ERROR_ARCHIVE_NOT_FOUND);
  expect_lines(&r, "ARCHIVE",
               "ARCHIVE /.kpack/a.kpack KPACK_ERROR_IO_ERROR opened "
               "transient\n");
  recorder_clear(&r);
  /* Descriptors are free again: the same cache opens it this time. */
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  expect_lines(&r, "ARCHIVE",
               "ARCHIVE /.kpack/a.kpack KPACK_SUCCESS opened gfx90a\n");
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

static void test_no_declared_compatible_target_is_arch_not_found(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a", "gfx942:xnack+"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_STATUS(cache, meta, KPACK_ERROR_ARCH_NOT_FOUND, "gfx1100",
                "gfx942:xnack-");
  /* A feature-less request does not match a featured archive arch. */
  EXPECT_STATUS(cache, meta, KPACK_ERROR_ARCH_NOT_FOUND, "gfx942");
  /* Names with no processor have no targets at all. */
  EXPECT_STATUS(cache, meta, KPACK_ERROR_ARCH_NOT_FOUND, "", ":xnack-");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_declared_target_without_the_kernel_is_kernel_not_found(
    void** state) {
  (void)state;
  archive(
      ".kpack/a.kpack", ARCHES("gfx90a", "gfx942"),
      KERNELS({"lib/other.so#0", "gfx90a", 1}, {"lib/libx.so#0", "gfx942", 2}));
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_STATUS(cache, meta, KPACK_ERROR_KERNEL_NOT_FOUND, "gfx90a");
  free(meta);
  kpack_cache_destroy(cache);
}

/* Flips a byte in the middle of the stored kernel (a zstd frame). */
static void corrupt_kernel(const char* rel, const char* kernel,
                           const char* arch) {
  char* path = at(rel);
  kpack_archive_t a;
  kpack_kernel_info_t info;
  assert_int_equal(kpack_open(path, &a), KPACK_SUCCESS);
  assert_int_equal(kpack_get_kernel_info(a, kernel, arch, &info),
                   KPACK_SUCCESS);
  kpack_close(a);
  size_t size;
  uint8_t* bytes = kt_read_file(path, &size);
  assert_non_null(bytes);
  bytes[info.offset + info.stored_size / 2] ^= 0x5a;
  kt_write_file(path, bytes, size);
  free(bytes);
  free(path);
}

static void test_corrupt_kernel_is_the_last_real_error(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive(".kpack/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/other.so#0", "gfx90a", 2}));
  corrupt_kernel(".kpack/a.kpack", "lib/libx.so#0", "gfx90a");
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack", "../.kpack/b.kpack");
  /* b.kpack's miss after a.kpack's failure does not hide the failure. */
  EXPECT_STATUS(cache, meta, KPACK_ERROR_DECOMPRESSION_FAILED, "gfx90a");
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_corrupt_kernel_falls_through_to_a_good_copy(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive(".kpack/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  corrupt_kernel(".kpack/a.kpack", "lib/libx.so#0", "gfx90a");
  kpack_cache_t cache = new_cache();
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack", "../.kpack/b.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  free(meta);
  kpack_cache_destroy(cache);
}

/* ---- the archive table --------------------------------------------------- */

static void test_archive_is_opened_once_across_calls(void** state) {
  (void)state;
  archive(
      ".kpack/a.kpack", ARCHES("gfx90a"),
      KERNELS({"lib/libx.so#0", "gfx90a", 1}, {"lib/libx.so#1", "gfx90a", 2}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  EXPECT_SEED(cache, meta, 1, 2, "gfx90a");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  assert_int_equal(r.opened, 1);
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

static void test_paths_to_one_file_share_one_archive(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/other.so#0", "gfx90a", 1}));
  char* target = at(".kpack/a.kpack");
  char* link = at(".kpack/link.kpack");
  assert_int_equal(symlink(target, link), 0);
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack", "../.kpack/link.kpack",
                    "../lib/../.kpack/a.kpack");
  EXPECT_STATUS(cache, meta, KPACK_ERROR_KERNEL_NOT_FOUND, "gfx90a");
  assert_int_equal(r.opened, 1);
  /* The one archive was tried once for the one target. */
  char* kernels = lines_with(&r, "KERNEL");
  assert_non_null(strstr(kernels, "KPACK_ERROR_KERNEL_NOT_FOUND\n"));
  assert_null(strstr(strstr(kernels, "\n") + 1, "KERNEL"));
  free(kernels);
  free(meta);
  free(link);
  free(target);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

static void test_archives_after_a_hit_are_not_opened(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive(".kpack/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack", "../.kpack/b.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a");
  assert_int_equal(r.opened, 1);
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

/* ---- events and debug logging -------------------------------------------- */

static void test_trace_reports_each_step_of_a_search(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a", "gfx942"),
          KERNELS({"lib/libx.so#0", "gfx942", 1}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta =
      HIPK("lib/libx.so", "../.kpack/missing.kpack", "../.kpack/a.kpack");
  EXPECT_SEED(cache, meta, 0, 1, "gfx90a:xnack-", "gfx942");
  expect_lines(&r, "",
               "LOAD lib/libx.so#0\n"
               "PATH /.kpack/missing.kpack embedded missing\n"
               "PATH /.kpack/a.kpack embedded exists\n"
               "TARGET gfx90a:xnack-\n"
               "ARCHIVE /.kpack/a.kpack KPACK_SUCCESS opened gfx90a gfx942\n"
               "TARGET gfx90a\n"
               "KERNEL gfx90a /.kpack/a.kpack KPACK_ERROR_KERNEL_NOT_FOUND\n"
               "TARGET gfx942\n"
               "KERNEL gfx942 /.kpack/a.kpack KPACK_SUCCESS\n"
               "RESULT KPACK_SUCCESS\n");
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

static void test_trace_reports_early_failures_as_results(void** state) {
  (void)state;
  static const uint8_t not_a_map[] = {0xc0};
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  EXPECT_STATUS(cache, not_a_map, KPACK_ERROR_INVALID_METADATA, "gfx90a");
  expect_lines(&r, "", "RESULT KPACK_ERROR_INVALID_METADATA\n");
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

/* Sends stderr to TMP/stderr.log; returns the descriptor to restore. */
static int capture_stderr(void) {
  char* log_path = at("stderr.log");
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  assert_true(saved >= 0);
  int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  assert_true(dup2(fd, STDERR_FILENO) >= 0);
  close(fd);
  free(log_path);
  return saved;
}

/* Restores stderr; returns what was written to it meanwhile. */
static char* captured_stderr(int saved) {
  char* log_path = at("stderr.log");
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  size_t n;
  char* out = kt_read_file(log_path, &n);
  assert_non_null(out);
  free(log_path);
  return out;
}

/* Runs one load with stderr sent to a file; returns what was written. */
static char* load_capturing_stderr(kpack_cache_t cache, const void* meta,
                                   kpack_error_t want) {
  int saved = capture_stderr();
  void* data;
  size_t size;
  kpack_error_t err = LOAD(cache, meta, 0, &data, &size, "gfx90a");
  char* out = captured_stderr(saved);
  assert_int_equal(err, want);
  kpack_free_code_object(data);
  return out;
}

static void test_debug_logs_each_decision_with_kpack_prefix(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  void* meta =
      HIPK("lib/libx.so", "../.kpack/nothere.kpack", "../.kpack/a.kpack");
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_DEBUG", "1");
  char* log = load_capturing_stderr(cache, meta, KPACK_SUCCESS);
  /* Every line carries the prefix. */
  size_t lines = 0;
  for (char* line = log; *line != '\0'; lines++) {
    assert_true(strncmp(line, "kpack: ", 7) == 0);
    char* nl = strchr(line, '\n');
    assert_non_null(nl);
    line = nl + 1;
  }
  assert_int_equal(lines, 7);
  /* Paths tried, archive opened, arch matched, result. */
  assert_non_null(strstr(log, "kpack: load lib/libx.so#0 (binary "));
  assert_non_null(strstr(log, "/.kpack/nothere.kpack (embedded): missing\n"));
  assert_non_null(strstr(log, "/.kpack/a.kpack (embedded): exists\n"));
  assert_non_null(
      strstr(log, ".kpack: KPACK_SUCCESS (opened), arches gfx90a\n"));
  assert_non_null(strstr(log, "kpack: target gfx90a for gfx90a\n"));
  assert_non_null(strstr(log, "kpack: kernel lib/libx.so#0 gfx90a in "));
  assert_non_null(strstr(log, "kpack: result lib/libx.so#0: KPACK_SUCCESS, "));
  free(log);
  /* A failure names its status. */
  void* none = HIPK("lib/libx.so", "../.kpack/nothere.kpack");
  log = load_capturing_stderr(cache, none, KPACK_ERROR_ARCHIVE_NOT_FOUND);
  assert_non_null(strstr(
      log, "kpack: result lib/libx.so#0: KPACK_ERROR_ARCHIVE_NOT_FOUND\n"));
  free(log);
  free(none);
  free(meta);
  kpack_cache_destroy(cache);
}

static void test_debug_is_silent_when_off(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  const char* off[] = {NULL, "", "0"};
  for (size_t i = 0; i < 3; i++) {
    kpack_cache_t cache =
        off[i] ? cache_with_env("ROCM_KPACK_DEBUG", off[i]) : new_cache();
    char* log = load_capturing_stderr(cache, meta, KPACK_SUCCESS);
    assert_string_equal(log, "");
    free(log);
    kpack_cache_destroy(cache);
  }
  free(meta);
}

/* ROCM_KPACK_DEBUG says which failures are remembered and why. */
static void test_debug_tells_transient_from_remembered_failures(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  char* bad = at(".kpack/bad.kpack");
  kt_write_file(bad, "nonsense", 8);
  void* a = HIPK("lib/libx.so", "../.kpack/a.kpack");
  void* b = HIPK("lib/libx.so", "../.kpack/bad.kpack");
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_DEBUG", "1");
  void* data;
  size_t size;
  int saved = capture_stderr();
  use_up_descriptors();
  kpack_error_t err_a = LOAD(cache, a, 0, &data, &size, "gfx90a");
  give_back_descriptors();
  kpack_error_t err_b = LOAD(cache, b, 0, &data, &size, "gfx90a");
  char* log = captured_stderr(saved);
  assert_int_equal(err_a, KPACK_ERROR_ARCHIVE_NOT_FOUND);
  assert_int_equal(err_b, KPACK_ERROR_ARCHIVE_NOT_FOUND);
  if (strstr(log,
             "a.kpack: KPACK_ERROR_IO_ERROR (opened), Too many open "
             "files: transient, not remembered (tried again next "
             "load)\n") == NULL ||
      strstr(log,
             "bad.kpack: KPACK_ERROR_INVALID_FORMAT (opened): "
             "remembered, not tried again\n") == NULL)
    fail_msg("unexpected log:\n%s", log);
  free(log);
  free(a);
  free(b);
  free(bad);
  kpack_cache_destroy(cache);
}

/* ---- kpack_resolve_code_object ------------------------------------------- */

static void test_resolve_searches_given_paths_like_load(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#3", "gfx90a", 7}));
  kpack_cache_t cache = new_cache();
  const char* paths[] = {"../.kpack/a.kpack"};
  const char* arches[] = {"gfx90a"};
  void* data;
  size_t size;
  assert_int_equal(
      kpack_resolve_code_object(cache, "lib/libx.so", paths, 1, binary, 3,
                                arches, 1, &data, &size),
      KPACK_SUCCESS);
  void* want = kt_pattern(seed_size(7), 7);
  assert_int_equal(size, seed_size(7));
  assert_memory_equal(data, want, size);
  free(want);
  kpack_free_code_object(data);
  assert_int_equal(
      kpack_resolve_code_object(cache, "lib/libx.so", paths, 1, binary, 0,
                                arches, 1, &data, &size),
      KPACK_ERROR_KERNEL_NOT_FOUND);
  assert_int_equal(kpack_resolve_code_object(cache, NULL, paths, 1, binary, 0,
                                             arches, 1, &data, &size),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(
      kpack_resolve_code_object(cache, "lib/libx.so", NULL, 1, binary, 0,
                                arches, 1, &data, &size),
      KPACK_ERROR_INVALID_ARGUMENT);
  kpack_cache_destroy(cache);
}

static void test_resolve_without_paths_uses_rocm_kpack_path(void** state) {
  (void)state;
  archive("env.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 8}));
  char* env = at("env.kpack");
  kpack_cache_t cache = cache_with_env("ROCM_KPACK_PATH", env);
  const char* arches[] = {"gfx90a"};
  void* data;
  size_t size;
  assert_int_equal(
      kpack_resolve_code_object(cache, "lib/libx.so", NULL, 0, binary, 0,
                                arches, 1, &data, &size),
      KPACK_SUCCESS);
  assert_int_equal(size, seed_size(8));
  kpack_free_code_object(data);
  kpack_cache_destroy(cache);
  free(env);
}

/* ---- concurrency --------------------------------------------------------- */

#define THREADS 8
#define ROUNDS 40

typedef struct worker {
  kpack_cache_t cache;
  const void* meta;
  pthread_barrier_t* start;
  unsigned id;
  int failures;
} worker;

/* Kernel #i for gfx90a is seed 10 + i, for gfx942 seed 20 + i; gfx942 only
 * in the last archive, so every search visits all three. */
static void* worker_main(void* arg) {
  worker* w = arg;
  pthread_barrier_wait(w->start);
  for (unsigned round = 0; round < ROUNDS; round++) {
    uint32_t co = (w->id + round) % 3;
    bool new_arch = (w->id + round) % 2 == 0;
    const char* arches[] = {new_arch ? "gfx942" : "gfx1100", "gfx90a"};
    uint32_t seed = (new_arch ? 20 : 10) + co;
    void* data;
    size_t size;
    if (kpack_load_code_object(w->cache, w->meta, binary, co, arches, 2, &data,
                               &size) != KPACK_SUCCESS) {
      w->failures++;
      continue;
    }
    void* want = kt_pattern(seed_size(seed), seed);
    if (size != seed_size(seed) || memcmp(data, want, size) != 0)
      w->failures++;
    free(want);
    kpack_free_code_object(data);
  }
  return NULL;
}

static void test_concurrent_loads_open_each_archive_once(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 10},
                  {"lib/libx.so#1", "gfx90a", 11}));
  archive(".kpack/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#2", "gfx90a", 12}));
  archive(
      ".kpack/c.kpack", ARCHES("gfx942"),
      KERNELS({"lib/libx.so#0", "gfx942", 20}, {"lib/libx.so#1", "gfx942", 21},
              {"lib/libx.so#2", "gfx942", 22}));
  kpack_cache_t cache = new_cache();
  recorder r;
  recorder_init(&r, cache);
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack", "../.kpack/b.kpack",
                    "../.kpack/c.kpack");
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, THREADS);
  pthread_t threads[THREADS];
  worker workers[THREADS];
  for (unsigned i = 0; i < THREADS; i++) {
    workers[i] = (worker){cache, meta, &start, i, 0};
    assert_int_equal(
        pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
  }
  for (unsigned i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    assert_int_equal(workers[i].failures, 0);
  }
  pthread_barrier_destroy(&start);
  assert_int_equal(r.opened, 3);
  /* Each archive opened by exactly one of the racing threads. */
  char* opened = lines_with(&r, "ARCHIVE");
  const char* names[] = {"a", "b", "c"};
  for (size_t i = 0; i < 3; i++) {
    char needle[64];
    snprintf(needle, sizeof(needle), "/.kpack/%s.kpack KPACK_SUCCESS opened",
             names[i]);
    char* first = strstr(opened, needle);
    assert_non_null(first);
    assert_null(strstr(first + 1, needle));
  }
  free(opened);
  free(meta);
  recorder_free(&r);
  kpack_cache_destroy(cache);
}

/* ---- fork ---------------------------------------------------------------- */

/* The loader's opens come here first. Once armed, the first open of a path
 * ending in `suffix` in this process says so on `entered` and waits for a
 * byte on `release` before it goes on: a test can then fork, or load, while
 * a thread is inside that open. Pipes, not a condition variable, because a
 * forked child must be able to use them too. */
kpack_error_t __real_kpack_open(const char* path, kpack_archive_t* archive);

static struct {
  const char* suffix;
  pid_t pid;
  int entered[2];
  int release[2];
  atomic_bool armed;
  atomic_uint opens; /* opens of `suffix` paths, held or not */
} gate;

kpack_error_t __wrap_kpack_open(const char* path, kpack_archive_t* archive);
kpack_error_t __wrap_kpack_open(const char* path, kpack_archive_t* archive) {
  size_t n = strlen(path), m = gate.suffix ? strlen(gate.suffix) : 0;
  if (m > 0 && n >= m && strcmp(path + n - m, gate.suffix) == 0) {
    atomic_fetch_add(&gate.opens, 1);
    if (getpid() == gate.pid && atomic_exchange(&gate.armed, false)) {
      char byte = 1;
      if (write(gate.entered[1], &byte, 1) != 1 ||
          read(gate.release[0], &byte, 1) != 1)
        abort();
    }
  }
  return __real_kpack_open(path, archive);
}

static void gate_arm(const char* suffix) {
  assert_int_equal(pipe(gate.entered), 0);
  assert_int_equal(pipe(gate.release), 0);
  gate.suffix = suffix;
  gate.pid = getpid();
  atomic_store(&gate.opens, 0);
  atomic_store(&gate.armed, true);
}

static void gate_wait_entered(void) {
  char byte;
  assert_int_equal(read(gate.entered[0], &byte, 1), 1);
}

static void gate_release(void) {
  char byte = 1;
  assert_int_equal(write(gate.release[1], &byte, 1), 1);
}

static void gate_close(void) {
  gate.suffix = NULL;
  close(gate.entered[0]);
  close(gate.entered[1]);
  close(gate.release[0]);
  close(gate.release[1]);
}

typedef struct loader_thread {
  pthread_t thread;
  kpack_cache_t cache;
  const void* meta;
  uint32_t seed; /* what the load must return */
  bool ok;
} loader_thread;

/* One load that must return kernel #0 for gfx90a, with the bytes of seed. */
static bool load_ok(kpack_cache_t cache, const void* meta, uint32_t seed) {
  const char* arches[] = {"gfx90a"};
  void* data = NULL;
  size_t size = 0;
  if (kpack_load_code_object(cache, meta, binary, 0, arches, 1, &data, &size) !=
      KPACK_SUCCESS)
    return false;
  void* want = kt_pattern(seed_size(seed), seed);
  bool ok = size == seed_size(seed) && memcmp(data, want, size) == 0;
  free(want);
  kpack_free_code_object(data);
  return ok;
}

static void* loader_main(void* arg) {
  loader_thread* t = arg;
  t->ok = load_ok(t->cache, t->meta, t->seed);
  return NULL;
}

static void start_loader(loader_thread* t, kpack_cache_t cache,
                         const void* meta, uint32_t seed) {
  *t = (loader_thread){.cache = cache, .meta = meta, .seed = seed};
  assert_int_equal(pthread_create(&t->thread, NULL, loader_main, t), 0);
}

/* What a forked child reported: 'y' every load returned its kernel, 'n'
 * one did not, 0 nothing (it was stuck on a lock until its alarm). */
typedef char child_report;

/* Forks; the child loads `metas` (the archive of each holds seed 1 + i)
 * and reports on a pipe. It then kills itself instead of exiting: memory
 * of the parent's other threads is unreachable in a child by the nature of
 * fork, and valgrind's leak check at exit would count it against us. */
static child_report load_in_child(kpack_cache_t cache, void* const* metas,
                                  size_t n) {
  int report[2];
  assert_int_equal(pipe(report), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(report[0]);
    alarm(60);
    bool ok = true;
    for (size_t i = 0; i < n; i++)
      ok = load_ok(cache, metas[i], 1 + (uint32_t)i) && ok;
    child_report r = ok ? 'y' : 'n';
    if (write(report[1], &r, 1) != 1)
      _exit(1);
    raise(SIGKILL);
  }
  close(report[1]);
  child_report r = 0;
  if (read(report[0], &r, 1) != 1)
    r = 0;
  close(report[0]);
  assert_int_equal(waitpid(pid, NULL, 0), pid);
  return r;
}

static void expect_child_loaded(child_report r) {
  if (r == 0)
    fail_msg("the forked child never finished its loads: stuck on a lock");
  if (r != 'y')
    fail_msg("a load in the forked child failed");
}

/* A HIP process forks (a Python worker pool) while another thread is inside
 * the loader, opening an archive. The child gets the cache as it was, with
 * only the forking thread: it must still load, from that archive (which it
 * opens itself) and from others. */
static void test_child_forked_during_an_open_can_load(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive(".kpack/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  void* metas[] = {HIPK("lib/libx.so", "../.kpack/a.kpack"),
                   HIPK("lib/libx.so", "../.kpack/b.kpack")};
  kpack_cache_t cache = new_cache();
  loader_thread t;
  gate_arm("/.kpack/a.kpack");
  start_loader(&t, cache, metas[0], 1);
  gate_wait_entered();
  child_report status = load_in_child(cache, metas, 2);
  gate_release();
  pthread_join(t.thread, NULL);
  gate_close();
  expect_child_loaded(status);
  assert_true(t.ok);
  free(metas[0]);
  free(metas[1]);
  kpack_cache_destroy(cache);
}

/* Threads waiting for another's open of the same archive are not in the
 * child either; the child must not wait for them, and in the parent the
 * archive is still opened once for all of them. */
static void test_child_forked_while_threads_wait_for_an_open_can_load(
    void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  void* meta = HIPK("lib/libx.so", "../.kpack/a.kpack");
  kpack_cache_t cache = new_cache();
  loader_thread opener, waiters[3];
  gate_arm("/.kpack/a.kpack");
  start_loader(&opener, cache, meta, 1);
  gate_wait_entered();
  for (size_t i = 0; i < 3; i++)
    start_loader(&waiters[i], cache, meta, 1);
  /* Likely, not certainly, waiting by now; the checks hold either way. */
  kt_sleep_ms(50);
  child_report status = load_in_child(cache, &meta, 1);
  gate_release();
  pthread_join(opener.thread, NULL);
  for (size_t i = 0; i < 3; i++) {
    pthread_join(waiters[i].thread, NULL);
    assert_true(waiters[i].ok);
  }
  gate_close();
  expect_child_loaded(status);
  assert_true(opener.ok);
  assert_int_equal(atomic_load(&gate.opens), 1);
  free(meta);
  kpack_cache_destroy(cache);
}

/* An open in progress (a slow file system) holds up only the loads that
 * need that archive, not loads through the same cache from others. */
static void test_slow_open_holds_up_no_other_archive(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  archive(".kpack/b.kpack", ARCHES("gfx90a"),
          KERNELS({"lib/libx.so#0", "gfx90a", 2}));
  void* a = HIPK("lib/libx.so", "../.kpack/a.kpack");
  void* b = HIPK("lib/libx.so", "../.kpack/b.kpack");
  kpack_cache_t cache = new_cache();
  loader_thread slow, other;
  gate_arm("/.kpack/a.kpack");
  start_loader(&slow, cache, a, 1);
  gate_wait_entered();
  start_loader(&other, cache, b, 2);
  /* A deadline only to end the test if the load waits for the held open;
   * it finishes in milliseconds otherwise. */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 60;
  int joined = pthread_timedjoin_np(other.thread, NULL, &deadline);
  gate_release();
  pthread_join(slow.thread, NULL);
  if (joined != 0)
    pthread_join(other.thread, NULL);
  gate_close();
  assert_int_equal(joined, 0);
  assert_true(other.ok);
  assert_true(slow.ok);
  free(a);
  free(b);
  kpack_cache_destroy(cache);
}

/* ---- kpack_enumerate_architectures --------------------------------------- */

typedef struct arch_log {
  char seen[8][32];
  size_t count;
  size_t stop_after;
} arch_log;

static bool collect_arch(const char* arch, void* user) {
  arch_log* log = user;
  snprintf(log->seen[log->count], sizeof(log->seen[0]), "%s", arch);
  log->count++;
  return log->count < log->stop_after;
}

static void test_enumerate_calls_back_in_declared_order(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx942", "gfx90a:xnack-", "gfx1100"),
          KERNELS({"lib/libx.so#0", "gfx90a:xnack-", 1}));
  char* path = at(".kpack/a.kpack");
  arch_log log = {.stop_after = 100};
  assert_int_equal(kpack_enumerate_architectures(path, collect_arch, &log),
                   KPACK_SUCCESS);
  assert_int_equal(log.count, 3);
  assert_string_equal(log.seen[0], "gfx942");
  assert_string_equal(log.seen[1], "gfx90a:xnack-");
  assert_string_equal(log.seen[2], "gfx1100");
  free(path);
}

static void test_enumerate_stops_when_callback_returns_false(void** state) {
  (void)state;
  archive(".kpack/a.kpack", ARCHES("gfx942", "gfx90a", "gfx1100"),
          KERNELS({"lib/libx.so#0", "gfx90a", 1}));
  char* path = at(".kpack/a.kpack");
  arch_log log = {.stop_after = 2};
  assert_int_equal(kpack_enumerate_architectures(path, collect_arch, &log),
                   KPACK_SUCCESS);
  assert_int_equal(log.count, 2);
  assert_string_equal(log.seen[1], "gfx90a");
  free(path);
}

static void test_enumerate_reports_argument_and_open_errors(void** state) {
  (void)state;
  arch_log log = {.stop_after = 100};
  char* missing = at("missing.kpack");
  char* bad = at("bad.kpack");
  kt_write_file(bad, "XXXXXXXXXXXXXXXXXXXX", 20);
  assert_int_equal(kpack_enumerate_architectures(NULL, collect_arch, &log),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_enumerate_architectures(missing, NULL, &log),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kpack_enumerate_architectures(missing, collect_arch, &log),
                   KPACK_ERROR_FILE_NOT_FOUND);
  assert_int_equal(kpack_enumerate_architectures(bad, collect_arch, &log),
                   KPACK_ERROR_INVALID_FORMAT);
  assert_int_equal(log.count, 0);
  free(bad);
  free(missing);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      T(test_cache_create_rejects_null_and_destroy_accepts_null),
      T(test_null_pointers_and_zero_arch_count_are_invalid),
      T(test_argument_check_comes_before_disable),
      T(test_disable_comes_before_metadata),
      T(test_disable_flag_is_off_when_empty_or_starting_with_zero),
      T(test_environment_is_read_only_at_create),
      T(test_malformed_metadata_is_invalid_metadata),
      T(test_metadata_pointer_in_no_mapping_is_invalid_metadata),
      T(test_relative_search_path_resolves_against_binary_directory),
      T(test_symlinked_library_directory_finds_the_real_archives),
      T(test_resolution_that_led_nowhere_is_done_again),
      T(test_absolute_search_path_is_used_as_is),
      T(test_co_index_selects_the_kernel),
      T(test_gfxarch_placeholder_selects_the_arch_archive),
      T(test_spirv_archive_serves_only_when_nothing_native_does),
      T(test_gfxarch_placeholder_expands_each_compatible_target),
      T(test_rocm_kpack_path_replaces_embedded_paths),
      T(test_rocm_kpack_path_directory_means_its_kpack_files_in_order),
      T(test_rocm_kpack_path_takes_backslash_colon_in_a_name),
      T(test_path_prefix_is_searched_before_embedded_paths),
      T(test_path_prefix_directory_is_expanded),
      T(test_first_arch_wins_even_from_a_later_archive),
      T(test_archive_order_breaks_ties_for_one_target),
      T(test_triple_prefixed_arch_matches_bare_name),
      T(test_most_specific_declared_target_wins),
      T(test_three_feature_arch_tries_targets_in_subset_order),
      T(test_miss_in_feature_archive_falls_through_to_bare_archive),
      T(test_no_existing_archive_is_archive_not_found),
      T(test_archive_that_fails_to_open_is_skipped),
      T(test_failed_open_is_remembered),
      T(test_open_failing_for_lack_of_descriptors_is_tried_again),
      T(test_no_declared_compatible_target_is_arch_not_found),
      T(test_declared_target_without_the_kernel_is_kernel_not_found),
      T(test_corrupt_kernel_is_the_last_real_error),
      T(test_corrupt_kernel_falls_through_to_a_good_copy),
      T(test_archive_is_opened_once_across_calls),
      T(test_paths_to_one_file_share_one_archive),
      T(test_archives_after_a_hit_are_not_opened),
      T(test_trace_reports_each_step_of_a_search),
      T(test_trace_reports_early_failures_as_results),
      T(test_debug_logs_each_decision_with_kpack_prefix),
      T(test_debug_is_silent_when_off),
      T(test_debug_tells_transient_from_remembered_failures),
      T(test_resolve_searches_given_paths_like_load),
      T(test_resolve_without_paths_uses_rocm_kpack_path),
      T(test_concurrent_loads_open_each_archive_once),
      T(test_child_forked_during_an_open_can_load),
      T(test_child_forked_while_threads_wait_for_an_open_can_load),
      T(test_slow_open_holds_up_no_other_archive),
      T(test_enumerate_calls_back_in_declared_order),
      T(test_enumerate_stops_when_callback_returns_false),
      T(test_enumerate_reports_argument_and_open_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
