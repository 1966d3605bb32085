/* SPDX-License-Identifier: MIT
 *
 * Drivers for the libFuzzer harnesses and the corpus replay suite (see
 * fuzz_drivers.h): each feeds one input to one libkpack entry point, walks
 * everything the result exposes, and checks the promises the headers make.
 */
#include "fuzz_drivers.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rocm_kpack/kpack_ext.h"

/* ---- shared -------------------------------------------------------------- */

/* A broken promise is a finding: abort() so libFuzzer records the input. */
static void require(bool ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "kpack fuzz: broken invariant: %s\n", what);
    abort();
  }
}

/* (No strcmp with kpack_error_string() here: libFuzzer would learn its
 * operands as "interesting" bytes and waste mutations on them.) */
static void require_status(kpack_error_t err) {
  require((unsigned)err <= KPACK_ERROR_ARCH_NOT_FOUND,
          "status outside kpack_error_t");
}

static uint64_t fnv1a(const void* data, size_t size) {
  const uint8_t* p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static void write_whole(int fd, const void* data, size_t size) {
  const uint8_t* p = data;
  off_t off = 0;
  while (size > 0) {
    ssize_t n = pwrite(fd, p, size, off);
    if (n < 0 && errno == EINTR)
      continue;
    require(n > 0, "writing the input file");
    p += n;
    off += n;
    size -= (size_t)n;
  }
}

/* ---- archives ------------------------------------------------------------ */

typedef struct kf_seen {
  const char* binary;
  const char* arch;
  kpack_error_t err;
  uint64_t size;
  uint64_t hash;
} kf_seen;

static int archive_fd = -1;
static char archive_path[64];

/* INVALID_FORMAT: a size the stored frame could never hold. */
static bool read_failure(kpack_error_t err) {
  return err == KPACK_ERROR_DECOMPRESSION_FAILED ||
         err == KPACK_ERROR_IO_ERROR || err == KPACK_ERROR_INVALID_FORMAT;
}

static bool same_text(const char* a, const char* b) {
  return (a == NULL && b == NULL) ||
         (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* A prefix of a kernel that reads whole is its first bytes, and what its
 * code object shows, rendered from the prefix kpack_kernel_render() reads,
 * is what the whole kernel renders. */
static void check_prefixes(kpack_archive_t a, const kf_seen* k,
                           const void* data, size_t size) {
  size_t half = size / 2, got = 1;
  uint8_t* prefix = malloc(half ? half : 1);
  require(prefix != NULL, "out of memory in the driver");
  require(kpack_read_kernel_prefix(a, k->binary, k->arch, prefix, half, &got) ==
                  KPACK_SUCCESS &&
              got == half && memcmp(prefix, data, half) == 0,
          "a prefix differs from the kernel's first bytes");
  free(prefix);
  kpack_co_render_t whole, part;
  kpack_error_t err = kpack_co_render(data, size, &whole);
  require(err == KPACK_SUCCESS || err == KPACK_ERROR_OUT_OF_MEMORY,
          "render of a kernel failed");
  if (err != KPACK_SUCCESS)
    return;
  err = kpack_kernel_render(a, k->binary, k->arch, &part, NULL);
  require(err == KPACK_SUCCESS || err == KPACK_ERROR_OUT_OF_MEMORY,
          "render from a prefix failed where the whole kernel rendered");
  if (err == KPACK_SUCCESS) {
    require(part.status == whole.status &&
                same_text(part.target, whole.target) &&
                part.kernel_count == whole.kernel_count &&
                same_text(part.kernels, whole.kernels) &&
                same_text(part.metadata_json, whole.metadata_json),
            "render from a prefix differs from the whole kernel's");
    kpack_co_render_free(&part);
  }
  kpack_co_render_free(&whole);
}

/* Reads one kernel through kpack_get_kernel() and kpack_read_kernel(), which
 * must agree, and records the outcome. */
static void read_both_ways(kpack_archive_t a, kf_seen* k) {
  kpack_kernel_info_t info;
  void* data = (void*)&info; /* must be reset, whatever the outcome */
  size_t size = 1;

  /* Info needs the frames located: in a zstd archive without a usable
   * frame-size table the first call walks them, and a region that does
   * not hold them fails it (kpack_archive.h), and every read with it. */
  kpack_error_t located = kpack_get_kernel_info(a, k->binary, k->arch, &info);
  require(located == KPACK_SUCCESS || located == KPACK_ERROR_INVALID_FORMAT ||
              located == KPACK_ERROR_IO_ERROR,
          "an enumerated kernel's info failed with an odd status");
  if (located != KPACK_SUCCESS) {
    k->err = kpack_get_kernel(a, k->binary, k->arch, &data, &size);
    require(k->err == located && data == NULL,
            "a read succeeded where its kernel's info failed");
    return;
  }
  require(info.type != NULL, "kernel info without a type");
  k->err = kpack_get_kernel(a, k->binary, k->arch, &data, &size);
  require_status(k->err);
  if (k->err != KPACK_SUCCESS) {
    require(data == NULL, "failed read left a buffer");
    require(read_failure(k->err), "kernel read failed with an odd status");
    /* The caller-buffer path must fail the same way when it can be tried
     * without trusting info.size for an allocation. */
    uint8_t small[256];
    size_t got;
    if (info.size <= sizeof(small))
      require(kpack_read_kernel(a, k->binary, k->arch, small, sizeof(small),
                                &got) == k->err,
              "read paths disagree on a failure");
    return;
  }
  require(data != NULL, "successful read returned NULL");
  require(size == info.size, "read size differs from kernel info");
  k->size = size;
  k->hash = fnv1a(data, size);

  void* copy = malloc(size ? size : 1);
  size_t got = 0;
  require(copy != NULL, "out of memory in the driver");
  require(kpack_read_kernel(a, k->binary, k->arch, copy, size, &got) ==
              KPACK_SUCCESS,
          "caller-buffer read failed where kpack_get_kernel succeeded");
  require(got == size && memcmp(copy, data, size) == 0,
          "read paths return different bytes");
  check_prefixes(a, k, data, size);
  if (size > 0)
    require(kpack_read_kernel(a, k->binary, k->arch, copy, size - 1, &got) ==
                KPACK_ERROR_INVALID_ARGUMENT,
            "short caller buffer accepted");
  free(copy);
  kpack_free_kernel(data);
}

/* After the file shrank: a kernel reads the same bytes or fails cleanly. */
static void reread_after_cut(kpack_archive_t a, const kf_seen* k) {
  void* data;
  size_t size;
  kpack_error_t err = kpack_get_kernel(a, k->binary, k->arch, &data, &size);
  require_status(err);
  if (err != KPACK_SUCCESS) {
    require(data == NULL && read_failure(err), "odd failure after the cut");
    return;
  }
  require(k->err == KPACK_SUCCESS, "a corrupt kernel became readable");
  require(size == k->size && fnv1a(data, size) == k->hash,
          "a kernel changed after the file shrank");
  kpack_free_kernel(data);
}

static size_t walk_archive(kpack_archive_t a, kf_seen** seen_out) {
  size_t arch_count = 0, binary_count = 0, kernel_count = 0, n = 0;
  const char* s;
  kpack_compression_scheme_t scheme;

  require(kpack_get_group_name(a, &s) == KPACK_SUCCESS && s != NULL,
          "group name");
  require(kpack_get_gfx_arch_family(a, &s) == KPACK_SUCCESS && s != NULL,
          "arch family");
  require(kpack_get_compression_scheme(a, &scheme) == KPACK_SUCCESS &&
              kpack_compression_scheme_name(scheme) != NULL,
          "compression scheme");
  require(
      kpack_get_path(a) != NULL && strcmp(kpack_get_path(a), archive_path) == 0,
      "archive path");

  require(kpack_get_architecture_count(a, &arch_count) == KPACK_SUCCESS,
          "architecture count");
  for (size_t i = 0; i < arch_count; i++)
    require(kpack_get_architecture(a, i, &s) == KPACK_SUCCESS && s != NULL &&
                strlen(s) < SIZE_MAX,
            "architecture");
  require(
      kpack_get_architecture(a, arch_count, &s) == KPACK_ERROR_INVALID_ARGUMENT,
      "architecture index past the end");

  require(kpack_get_binary_count(a, &binary_count) == KPACK_SUCCESS &&
              kpack_get_kernel_count(a, &kernel_count) == KPACK_SUCCESS,
          "binary and kernel counts");
  kf_seen* seen = calloc(kernel_count ? kernel_count : 1, sizeof(*seen));
  require(seen != NULL, "out of memory in the driver");
  const char* prev_binary = NULL;
  for (size_t i = 0; i < binary_count; i++) {
    const char* binary;
    size_t archs;
    require(kpack_get_binary(a, i, &binary) == KPACK_SUCCESS && binary != NULL,
            "binary");
    require(prev_binary == NULL || strcmp(prev_binary, binary) < 0,
            "binaries not strictly sorted");
    prev_binary = binary;
    require(kpack_get_binary_arch_count(a, binary, &archs) == KPACK_SUCCESS,
            "binary arch count");
    const char* prev_arch = NULL;
    for (size_t j = 0; j < archs; j++) {
      const char* arch;
      require(kpack_get_binary_arch(a, binary, j, &arch) == KPACK_SUCCESS &&
                  arch != NULL,
              "binary arch");
      require(prev_arch == NULL || strcmp(prev_arch, arch) < 0,
              "arches of a binary not strictly sorted");
      prev_arch = arch;
      require(n < kernel_count, "more kernels than kpack_get_kernel_count");
      seen[n++] = (kf_seen){.binary = binary, .arch = arch};
    }
    require(kpack_get_binary_arch(a, binary, archs, &s) ==
                KPACK_ERROR_INVALID_ARGUMENT,
            "binary arch index past the end");
  }
  require(n == kernel_count, "fewer kernels than kpack_get_kernel_count");
  require(kpack_get_binary(a, binary_count, &s) == KPACK_ERROR_INVALID_ARGUMENT,
          "binary index past the end");
  *seen_out = seen;
  return n;
}

/* kpackfs reads through the shared kernel cache: it must agree with
 * kpack_get_kernel() on every kernel, under a budget small enough to evict,
 * and hold no more than the budget once everything is released. */
static void read_through_cache(kpack_archive_t a, const kf_seen* seen,
                               size_t n) {
  const uint64_t budget = 4096;
  kpack_kcache_t* cache;
  kpack_kcache_stats_t stats;
  require(kpack_kcache_create(budget, &cache) == KPACK_SUCCESS,
          "kpack_kcache_create");
  for (size_t i = 0; i < n; i++) {
    kpack_kcache_entry_t *entry, *again;
    const void *data, *data2;
    size_t size, size2;
    kpack_error_t err = kpack_kcache_acquire(
        cache, a, seen[i].binary, seen[i].arch, &entry, &data, &size);
    require_status(err);
    require(err == seen[i].err, "kernel cache and kpack_get_kernel disagree");
    if (err != KPACK_SUCCESS) {
      require(entry == NULL && data == NULL, "failed acquire left an entry");
      continue;
    }
    require(data != NULL && size == seen[i].size &&
                fnv1a(data, size) == seen[i].hash,
            "kernel cache returned different bytes");
    /* A second pin of a pinned kernel is a hit on the same bytes. */
    require(kpack_kcache_acquire(cache, a, seen[i].binary, seen[i].arch, &again,
                                 &data2, &size2) == KPACK_SUCCESS &&
                again == entry && data2 == data && size2 == size,
            "second acquire of a pinned kernel");
    kpack_kcache_release(cache, again);
    kpack_kcache_release(cache, entry);
  }
  require(kpack_kcache_get_stats(cache, &stats) == KPACK_SUCCESS &&
              stats.pinned == 0 && stats.bytes <= budget,
          "kernel cache over budget with nothing pinned");
  kpack_kcache_purge(cache, a);
  kpack_kcache_destroy(cache);
}

/* An entry's metadata is either absent or one map, and renders as JSON
 * (or is refused as too deep). */
static void check_metadata(kpack_archive_t a, const kf_seen* k) {
  const void* m;
  size_t size;
  char* json = (char*)1;
  require(kpack_get_entry_metadata(a, k->binary, k->arch, &m, &size) ==
              KPACK_SUCCESS,
          "kpack_get_entry_metadata");
  kpack_error_t err =
      kpack_get_entry_metadata_json(a, k->binary, k->arch, &json);
  require_status(err);
  if (m == NULL) {
    require(size == 0 && err == KPACK_SUCCESS && json == NULL,
            "absent metadata rendered");
    return;
  }
  uint8_t tag = *(const uint8_t*)m;
  require(size > 0 && ((tag & 0xf0) == 0x80 || tag == 0xde || tag == 0xdf),
          "metadata that is not a map");
  require(
      err == KPACK_SUCCESS ? json != NULL && strlen(json) > 1 : json == NULL,
      "metadata JSON");
  free(json);
}

/* kpack_writer_copy_kernel() (archives merged by `kpack create`) reads
 * each kernel with the checks of a read: it succeeds exactly where the read
 * did, unless the metadata map is one the writer refuses. Aborted, so
 * nothing is synced or renamed. */
static void copy_through_writer(kpack_archive_t a, const kf_seen* seen,
                                size_t n) {
  static char path[64];
  if (path[0] == '\0')
    snprintf(path, sizeof(path), "/tmp/kpack-fuzz-copy-%ld.kpack",
             (long)getpid());
  for (int scheme = 0; scheme < 2; scheme++) {
    kpack_writer_options_t o = {.scheme = scheme};
    kpack_writer_t* w;
    require(kpack_writer_create(path, &o, &w) == KPACK_SUCCESS,
            "kpack_writer_create");
    for (size_t i = 0; i < n; i++) {
      kpack_error_t err =
          kpack_writer_copy_kernel(w, a, seen[i].binary, seen[i].arch, 0);
      require_status(err);
      require(seen[i].err == KPACK_SUCCESS
                  ? err == KPACK_SUCCESS || err == KPACK_ERROR_INVALID_METADATA
                  : err != KPACK_SUCCESS,
              "kpack_writer_copy_kernel and kpack_get_kernel disagree");
    }
    kpack_writer_abort(w);
  }
}

/* A name absent from the TOC is KERNEL_NOT_FOUND on every path. */
static void probe_missing(kpack_archive_t a, const char* binary,
                          const char* arch) {
  kpack_kernel_info_t info;
  void* data;
  size_t size;
  if (kpack_get_kernel_info(a, binary, arch, &info) !=
      KPACK_ERROR_KERNEL_NOT_FOUND)
    return;
  require(kpack_get_kernel(a, binary, arch, &data, &size) ==
                  KPACK_ERROR_KERNEL_NOT_FOUND &&
              data == NULL,
          "missing kernel found by kpack_get_kernel");
}

size_t kf_archive_input(const uint8_t* data, size_t size) {
  if (archive_fd < 0) {
    archive_fd = memfd_create("kpack-fuzz", MFD_CLOEXEC);
    require(archive_fd >= 0, "memfd_create");
    snprintf(archive_path, sizeof(archive_path), "/proc/self/fd/%d",
             archive_fd);
  }
  require(ftruncate(archive_fd, 0) == 0, "ftruncate");
  write_whole(archive_fd, data, size);

  kpack_archive_t a = (kpack_archive_t)(uintptr_t)1;
  kpack_error_t err = kpack_open(archive_path, &a);
  require_status(err);
  if (err != KPACK_SUCCESS) {
    require(a == NULL, "failed open left a handle");
    return 0;
  }

  kf_seen* seen = NULL;
  size_t n = walk_archive(a, &seen), read = 0;
  for (size_t i = 0; i < n; i++) {
    read_both_ways(a, &seen[i]);
    check_metadata(a, &seen[i]);
    read += seen[i].err == KPACK_SUCCESS;
  }
  read_through_cache(a, seen, n);
  copy_through_writer(a, seen, n);
  if (n > 0) {
    probe_missing(a, seen[0].binary, "gfx-no-such-arch");
    probe_missing(a, "no/such/binary#0", seen[0].arch);
  }

  /* Cut the file under the open handle: reads must notice, never fault. */
  require(ftruncate(archive_fd, (off_t)(size / 2)) == 0, "ftruncate");
  for (size_t i = 0; i < n; i++)
    reread_after_cut(a, &seen[i]);

  free(seen);
  kpack_close(a);
  return read;
}

/* ---- HIPK metadata and the loader ---------------------------------------- */

/* The most metadata bytes placed before the guard page: the loader never
 * looks further than 64 KiB. */
#define KF_META_CAP ((size_t)64 * 1024)

typedef struct kf_fixture_kernel {
  const char* binary;
  const char* arch;
  size_t size;
  uint8_t* data;
} kf_fixture_kernel;

static char* hipk_root;
static char* hipk_binary;
static char* hipk_env_path; /* ROOT/.kpack:ROOT/lib for ROCM_KPACK_PATH */
static uint8_t* meta_map;   /* KF_META_CAP bytes, then one PROT_NONE page */
static size_t meta_map_size;
static kf_fixture_kernel fixture[8];
static size_t fixture_count;

/* Kernel sizes differ, so a loaded buffer names the kernel it must be. */
static uint8_t* fixture_bytes(size_t size, unsigned seed) {
  uint8_t* p = malloc(size);
  require(p != NULL, "out of memory in the driver");
  uint32_t x = seed * 2654435761u + 7;
  for (size_t i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)(x % 5 + seed); /* a small alphabet, so zstd shrinks it */
  }
  return p;
}

static void write_fixture_archive(const char* name,
                                  kpack_compression_scheme_t scheme,
                                  const char* const* arches, size_t arch_count,
                                  const kf_fixture_kernel* kernels,
                                  size_t count) {
  char* path;
  kpack_writer_t* w;
  kpack_writer_options_t opts = {.scheme = scheme,
                                 .group_name = "foo",
                                 .gfx_arch_family = "gfxfuzz",
                                 .gfx_arches = arches,
                                 .gfx_arch_count = arch_count};
  require(asprintf(&path, "%s/.kpack/%s", hipk_root, name) > 0, "asprintf");
  require(kpack_writer_create(path, &opts, &w) == KPACK_SUCCESS,
          "fixture writer");
  for (size_t i = 0; i < count; i++)
    require(kpack_writer_add_kernel(w, kernels[i].binary, kernels[i].arch,
                                    kernels[i].data,
                                    kernels[i].size) == KPACK_SUCCESS,
            "fixture kernel");
  require(kpack_writer_finish(w) == KPACK_SUCCESS, "fixture finish");
  free(path);
}

static kf_fixture_kernel* add_fixture(const char* binary, const char* arch) {
  kf_fixture_kernel* k = &fixture[fixture_count];
  /* Distinct sizes; small enough to keep each load cheap. */
  k->binary = binary;
  k->arch = arch;
  k->size = 300 + 97 * fixture_count;
  k->data = fixture_bytes(k->size, (unsigned)fixture_count + 1);
  fixture_count++;
  return k;
}

void kf_hipk_setup(void) {
  const char* tmp = getenv("TMPDIR");
  char* dir;

  static const char* const vars[] = {"ROCM_KPACK_PATH",
                                     "ROCM_KPACK_PATH_PREFIX",
                                     "ROCM_KPACK_DISABLE", "ROCM_KPACK_DEBUG"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
    unsetenv(vars[i]);

  require(asprintf(&hipk_root, "%s/kpack-fuzz-hipk.XXXXXX",
                   tmp && *tmp ? tmp : "/tmp") > 0,
          "asprintf");
  require(mkdtemp(hipk_root) != NULL, "mkdtemp");
  require(asprintf(&dir, "%s/lib", hipk_root) > 0 && mkdir(dir, 0755) == 0,
          "mkdir lib");
  free(dir);
  require(asprintf(&dir, "%s/.kpack", hipk_root) > 0 && mkdir(dir, 0755) == 0,
          "mkdir .kpack");
  free(dir);
  require(
      asprintf(&hipk_env_path, "%s/.kpack:%s/lib", hipk_root, hipk_root) > 0,
      "asprintf");
  require(asprintf(&hipk_binary, "%s/%s", hipk_root, KF_BINARY_PATH) > 0,
          "asprintf");
  FILE* f = fopen(hipk_binary, "w");
  require(
      f != NULL && fputs("\177ELF host stand-in\n", f) >= 0 && fclose(f) == 0,
      "binary stand-in");

  fixture_count = 0;
  kf_fixture_kernel k942[3];
  k942[0] = *add_fixture(KF_KERNEL_NAME "#0", "gfx942");
  k942[1] = *add_fixture(KF_KERNEL_NAME "#1", "gfx942:sramecc+:xnack-");
  k942[2] = *add_fixture("lib/libother.so#0", "gfx942");
  static const char* const a942[] = {"gfx942", "gfx942:sramecc+:xnack-"};
  write_fixture_archive("foo_gfx942.kpack", KPACK_COMPRESSION_ZSTD_PER_KERNEL,
                        a942, 2, k942, 3);

  kf_fixture_kernel k90a[2];
  k90a[0] = *add_fixture(KF_KERNEL_NAME "#0", "gfx90a");
  k90a[1] = *add_fixture(KF_KERNEL_NAME "#1", "gfx90a");
  static const char* const a90a[] = {"gfx90a"};
  write_fixture_archive("foo_gfx90a.kpack", KPACK_COMPRESSION_NOOP, a90a, 1,
                        k90a, 2);

  kf_fixture_kernel kx[1];
  kx[0] = *add_fixture(KF_KERNEL_NAME "#1", "gfx90a:xnack-");
  static const char* const ax[] = {"gfx90a:xnack-"};
  write_fixture_archive("foo_gfx90a:xnack-.kpack",
                        KPACK_COMPRESSION_ZSTD_PER_KERNEL, ax, 1, kx, 1);

  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  meta_map_size = KF_META_CAP + page;
  meta_map = mmap(NULL, meta_map_size, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  require(meta_map != MAP_FAILED, "mmap");
  require(mprotect(meta_map + KF_META_CAP, page, PROT_NONE) == 0, "mprotect");
}

static int remove_entry(const char* path, const struct stat* st, int flag,
                        struct FTW* ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

void kf_hipk_teardown(void) {
  if (meta_map != NULL)
    munmap(meta_map, meta_map_size);
  meta_map = NULL;
  if (hipk_root != NULL)
    nftw(hipk_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  free(hipk_root);
  free(hipk_binary);
  free(hipk_env_path);
  hipk_root = hipk_binary = hipk_env_path = NULL;
  for (size_t i = 0; i < fixture_count; i++)
    free(fixture[i].data);
  fixture_count = 0;
}

typedef struct kf_load {
  kpack_error_t err;
  size_t size;
  uint64_t hash;
} kf_load;

static kf_load load(kpack_cache_t cache, const void* meta, uint32_t co_index,
                    const char* const* arches, size_t arch_count) {
  void* code = NULL;
  size_t size = 0;
  kf_load r = {0, 0, 0};
  r.err = kpack_load_code_object(cache, meta, hipk_binary, co_index, arches,
                                 arch_count, &code, &size);
  require_status(r.err);
  switch (r.err) {
    case KPACK_SUCCESS:
    case KPACK_ERROR_INVALID_METADATA:
    case KPACK_ERROR_ARCHIVE_NOT_FOUND:
    case KPACK_ERROR_ARCH_NOT_FOUND:
    case KPACK_ERROR_KERNEL_NOT_FOUND:
      break;
    default:
      require(false, "loader failed with a status its header does not list");
  }
  if (r.err != KPACK_SUCCESS)
    return r;
  /* Only the fixture's archives exist, so the bytes must be one of its
   * kernels, whole. */
  bool known = false;
  for (size_t i = 0; i < fixture_count && !known; i++)
    known = fixture[i].size == size && memcmp(fixture[i].data, code, size) == 0;
  require(known, "loaded code object is none of the fixture's kernels");
  r.size = size;
  r.hash = fnv1a(code, size);
  kpack_free_code_object(code);
  return r;
}

size_t kf_hipk_input(const uint8_t* data, size_t size) {
  static const char* const devices[] = {"gfx942:sramecc+:xnack-",
                                        "gfx90a:xnack-"};
  static const char* const isa[] = {"amdgcn-amd-amdhsa--gfx90a:xnack+",
                                    "gfx1100"};
  require(meta_map != NULL, "kf_hipk_setup() not called");
  if (size > KF_META_CAP)
    size = KF_META_CAP;
  uint8_t* meta = meta_map + KF_META_CAP - size; /* ends at the guard page */
  memcpy(meta, data, size);

  kpack_cache_t cache = NULL;
  require(kpack_cache_create(&cache) == KPACK_SUCCESS && cache != NULL,
          "kpack_cache_create");
  kf_load first = load(cache, meta, 0, devices, 2);
  kf_load other = load(cache, meta, 1, isa, 2);
  /* Archives opened by the first call are reused: same answer. */
  kf_load again = load(cache, meta, 0, devices, 2);
  require(first.err == again.err && first.size == again.size &&
              first.hash == again.hash,
          "the same load gave a different answer from a warm cache");
  kpack_cache_destroy(cache);

  /* ROCM_KPACK_PATH replaces the embedded paths: a directory of archives
   * (expanded to its *.kpack files) and one holding none. The metadata must
   * still parse, and a hit must still be a fixture kernel. */
  setenv("ROCM_KPACK_PATH", hipk_env_path, 1);
  require(kpack_cache_create(&cache) == KPACK_SUCCESS && cache != NULL,
          "kpack_cache_create with ROCM_KPACK_PATH");
  unsetenv("ROCM_KPACK_PATH");
  kf_load from_env = load(cache, meta, 1, devices, 2);
  kpack_cache_destroy(cache);
  require((first.err == KPACK_ERROR_INVALID_METADATA) ==
              (from_env.err == KPACK_ERROR_INVALID_METADATA),
          "ROCM_KPACK_PATH changed whether the metadata parses");

  return (size_t)(first.err == KPACK_SUCCESS) + (other.err == KPACK_SUCCESS) +
         (again.err == KPACK_SUCCESS) + (from_env.err == KPACK_SUCCESS);
}

/* ---- offload bundles and fat binaries ------------------------------------ */

static bool inside(const void* p, uint64_t n, const uint8_t* base,
                   size_t size) {
  const uint8_t* b = p;
  return b >= base && (size_t)(b - base) <= size &&
         n <= size - (size_t)(b - base);
}

/* Touches every entry; an uncompressed bundle's entries must lie in the
 * input. */
static size_t walk_bundle(const kpack_bundle_t* b, const uint8_t* data,
                          size_t size) {
  kpack_bundle_info_t info;
  kpack_bundle_entry_t e;
  volatile uint64_t sink = 0;
  require(kpack_bundle_get_info(b, &info) == KPACK_SUCCESS, "bundle info");
  for (size_t i = 0; i < info.entry_count; i++) {
    require(kpack_bundle_get_entry(b, i, &e) == KPACK_SUCCESS, "bundle entry");
    require(e.id != NULL, "entry without an ID");
    sink += strlen(e.id);
    if (e.arch != NULL)
      require(strstr(e.id, e.arch) != NULL, "entry arch not from its ID");
    require(e.data != NULL || e.size == 0, "entry without data");
    if (info.compression == KPACK_BUNDLE_UNCOMPRESSED)
      require(inside(e.data, e.size, data, size),
              "uncompressed entry outside the input");
    if (e.size > 0)
      sink += fnv1a(e.data, (size_t)e.size);
  }
  require(kpack_bundle_get_entry(b, info.entry_count, &e) ==
              KPACK_ERROR_INVALID_ARGUMENT,
          "entry index past the end");
  (void)sink;
  return info.entry_count;
}

/* The streaming reader must agree with the whole-bundle one: a bundle that
 * parses also lists, with the same entries, and each entry reads back as
 * the same bytes. A bundle that does not parse may still list (damage past
 * the table shows only on reading); its entries are read within a bound. */
static void compare_listing(const kpack_fatbin_t* f, size_t index,
                            const kpack_bundle_t* parsed) {
  kpack_bundle_t* listed = NULL;
  kpack_bundle_info_t li, pi;
  kpack_error_t err = kpack_fatbin_list_bundle(f, index, &listed);
  require_status(err);
  if (err != KPACK_SUCCESS) {
    require(listed == NULL, "failed listing left a bundle");
    require(parsed == NULL, "a bundle that parses does not list");
    return;
  }
  require(kpack_bundle_get_info(listed, &li) == KPACK_SUCCESS, "list info");
  if (parsed != NULL) {
    require(kpack_bundle_get_info(parsed, &pi) == KPACK_SUCCESS, "info");
    require(li.entry_count == pi.entry_count && li.extent == pi.extent &&
                li.compression == pi.compression,
            "listing and parse disagree on the bundle");
  }
  for (size_t i = 0; i < li.entry_count; i++) {
    kpack_bundle_entry_t le, pe;
    require(kpack_bundle_get_entry(listed, i, &le) == KPACK_SUCCESS,
            "listed entry");
    require(le.data == NULL, "a listed entry carries data");
    if (parsed == NULL && le.size > (1u << 20))
      continue;
    uint8_t* buf = malloc(le.size ? (size_t)le.size : 1);
    require(buf != NULL, "out of memory in the driver");
    err = kpack_bundle_read_entry(listed, i, buf, (size_t)le.size);
    require_status(err);
    if (parsed != NULL) {
      require(kpack_bundle_get_entry(parsed, i, &pe) == KPACK_SUCCESS &&
                  strcmp(pe.id, le.id) == 0 && pe.size == le.size,
              "listing and parse disagree on an entry");
      require(
          err == KPACK_SUCCESS && memcmp(buf, pe.data, (size_t)le.size) == 0,
          "a listed entry reads other bytes than the parsed one");
    } else {
      require(err == KPACK_SUCCESS || err == KPACK_ERROR_DECOMPRESSION_FAILED,
              "read_entry failed with a status its header does not list");
    }
    free(buf);
  }
  kpack_bundle_free(listed);
}

size_t kf_bundle_input(const uint8_t* data, size_t size) {
  size_t walked = 0;
  kpack_bundle_t* b = NULL;
  kpack_error_t err = kpack_bundle_parse(data, size, &b);
  require_status(err);
  if (err == KPACK_SUCCESS) {
    kpack_bundle_info_t info;
    require(
        kpack_bundle_get_info(b, &info) == KPACK_SUCCESS && info.extent <= size,
        "bundle extent beyond the input");
    walked += walk_bundle(b, data, size);
    kpack_bundle_free(b);
  } else {
    require(b == NULL, "failed parse left a bundle");
  }

  kpack_fatbin_t* f = NULL;
  err = kpack_fatbin_open_memory(data, size, &f);
  require_status(err);
  if (err != KPACK_SUCCESS) {
    require(f == NULL, "failed fatbin open left a handle");
    return walked;
  }
  kpack_fatbin_info_t info;
  require(kpack_fatbin_get_info(f, &info) == KPACK_SUCCESS, "fatbin info");
  require(info.fatbin_size <= size, "fatbin section larger than the input");
  for (size_t i = 0; i < info.bundle_count; i++) {
    err = kpack_fatbin_get_bundle(f, i, &b);
    require_status(err);
    if (err == KPACK_SUCCESS)
      walked += walk_bundle(b, data, size);
    else
      require(b == NULL, "failed bundle parse left a bundle");
    compare_listing(f, i, err == KPACK_SUCCESS ? b : NULL);
    kpack_bundle_free(b);
  }
  require(kpack_fatbin_get_bundle(f, info.bundle_count, &b) ==
              KPACK_ERROR_INVALID_ARGUMENT,
          "bundle index past the end");
  kpack_fatbin_close(f);
  return walked;
}

/* ---- code objects
 * -------------------------------------------------------------
 */

/* A NUL-terminated string of at most `max` bytes. */
static size_t bounded_strlen(const char* s, size_t max) {
  require(s != NULL, "a reported string is NULL");
  size_t n = strnlen(s, max + 1);
  require(n <= max, "a reported string longer than its input");
  return n;
}

/* kpack_co_render() agrees with the reader: empty files exactly
 * when the parse failed, one `kernels` line per kernel, a metadata.json
 * that is the note's JSON and a newline unless that JSON failed. */
static void check_render(const uint8_t* data, size_t size, kpack_error_t parsed,
                         size_t kernel_count) {
  kpack_co_render_t r;
  kpack_error_t err = kpack_co_render(data, size, &r);
  require(err == KPACK_SUCCESS || err == KPACK_ERROR_OUT_OF_MEMORY,
          "render failed on input");
  if (err != KPACK_SUCCESS)
    return;
  require(strlen(r.kernels) == r.kernels_size &&
              strlen(r.metadata_json) == r.metadata_json_size,
          "render sizes");
  if (parsed != KPACK_SUCCESS) {
    require(r.status == parsed && r.target == NULL && r.kernels_size == 0 &&
                r.metadata_json_size == 0,
            "a refused code object rendered text");
  } else {
    size_t lines = 0;
    for (const char* p = r.kernels; (p = strchr(p, '\n')) != NULL; p++)
      lines++;
    require(lines == kernel_count && r.kernel_count == kernel_count,
            "one kernels line per kernel");
    require(r.target != NULL, "a code object without a target");
    require(r.status == KPACK_SUCCESS
                ? r.metadata_json_size > 0 &&
                      r.metadata_json[r.metadata_json_size - 1] == '\n'
                : r.metadata_json_size == 0,
            "metadata.json");
  }
  kpack_co_render_free(&r);
}

/* The prefix kpack_code_object_prefix_needed() asks for parses and renders
 * exactly as the whole input does. Each round's prefix is a copy of its
 * own size, so that a read beyond it is an overflow the sanitizer sees. */
static void check_prefix(const uint8_t* data, size_t size,
                         kpack_error_t parsed) {
  uint8_t* copy = NULL;
  size_t avail = 0;
  uint64_t needed = 0;
  for (int round = 0;; round++) {
    free(copy);
    copy = malloc(avail ? avail : 1);
    require(copy != NULL, "out of memory in the driver");
    memcpy(copy, data, avail);
    require(kpack_code_object_prefix_needed(copy, avail, size, &needed) ==
                KPACK_SUCCESS,
            "prefix_needed refused a prefix");
    if (needed <= avail)
      break;
    require(needed <= size && round < 64, "prefix_needed does not converge");
    avail = (size_t)needed;
  }
  kpack_code_object_t* co = NULL;
  kpack_error_t err = kpack_code_object_parse_prefix(copy, avail, size, &co);
  require(err == parsed || err == KPACK_ERROR_OUT_OF_MEMORY ||
              parsed == KPACK_ERROR_OUT_OF_MEMORY,
          "a prefix parses with another status than the whole");
  kpack_code_object_free(co);
  kpack_co_render_t whole, part;
  if (kpack_co_render(data, size, &whole) == KPACK_SUCCESS) {
    if (kpack_co_render_prefix(copy, avail, size, &part) == KPACK_SUCCESS) {
      require(
          part.status == whole.status &&
              part.kernel_count == whole.kernel_count &&
              (part.target == NULL) == (whole.target == NULL) &&
              (part.target == NULL || strcmp(part.target, whole.target) == 0) &&
              strcmp(part.kernels, whole.kernels) == 0 &&
              strcmp(part.metadata_json, whole.metadata_json) == 0,
          "a prefix renders other text than the whole");
      kpack_co_render_free(&part);
    }
    kpack_co_render_free(&whole);
  }
  free(copy);
}

size_t kf_code_object_input(const uint8_t* data, size_t size) {
  kpack_code_object_t* co = NULL;
  kpack_error_t err = kpack_code_object_parse(data, size, &co);
  require_status(err);
  if (data != NULL)
    check_prefix(data, size, err);
  if (err != KPACK_SUCCESS) {
    require(co == NULL, "failed parse left a code object");
    if (data != NULL && err != KPACK_ERROR_OUT_OF_MEMORY)
      check_render(data, size, err, 0);
    return 0;
  }
  require(kpack_is_code_object(data, size), "parsed a non-code object");
  kpack_code_object_info_t info;
  require(kpack_code_object_get_info(co, &info) == KPACK_SUCCESS, "info");
  require(info.metadata_size <= size, "note larger than the input");
  require(info.has_metadata || info.kernel_count == 0, "kernels without note");
  /* Every kernel needs a ".name" key and value: at least 7 bytes. */
  require(info.kernel_count <= info.metadata_size / 7, "more kernels than fit");
  bounded_strlen(info.metadata_target, size);
  size_t proc = bounded_strlen(info.processor, size + 64);
  size_t target = bounded_strlen(info.target, size + 64);
  require(strncmp(info.processor, info.target, proc) == 0 && target >= proc,
          "the target does not start with the processor");
  if (proc > 0)
    require(kpack_target_serves(info.target, info.target),
            "a target does not serve its own arch");
  require(kpack_feature_name(info.xnack) != NULL &&
              kpack_feature_name(info.sramecc) != NULL,
          "feature setting outside the enum");
  volatile uint64_t sink = 0;
  for (size_t i = 0; i < info.kernel_count; i++) {
    kpack_co_kernel_t k;
    require(kpack_code_object_get_kernel(co, i, &k) == KPACK_SUCCESS, "kernel");
    sink += bounded_strlen(k.name, size) + bounded_strlen(k.symbol, size);
    sink += k.vgpr_count + k.sgpr_count + k.agpr_count + k.wavefront_size;
    require((k.present & ~0x7ffu) == 0, "unknown presence bits");
  }
  kpack_co_kernel_t k;
  require(kpack_code_object_get_kernel(co, info.kernel_count, &k) ==
              KPACK_ERROR_INVALID_ARGUMENT,
          "kernel index past the end");
  for (int pretty = 0; pretty < 2; pretty++) {
    char* json = NULL;
    size_t len = 0;
    err = kpack_code_object_metadata_json(co, pretty, &json, &len);
    /* The note was validated at parse; only map keys nested in map keys,
     * which JSON cannot show in bounded space, may still fail. */
    require(err == KPACK_SUCCESS || err == KPACK_ERROR_MSGPACK_PARSE_FAILED,
            "a parsed note fails to render");
    if (err != KPACK_SUCCESS) {
      require(json == NULL, "failed render left text");
      continue;
    }
    require(strlen(json) == len, "JSON length");
    require(info.has_metadata ? json[0] == '{' : strcmp(json, "null") == 0,
            "JSON of a note is not an object");
    free(json);
  }
  (void)sink;
  kpack_code_object_free(co);
  check_render(data, size, KPACK_SUCCESS, info.kernel_count);
  return 1 + info.kernel_count;
}

/* ---- host binaries ------------------------------------------------------- */

static kpack_error_t status_of(kpack_host_problem_t problem) {
  switch (problem) {
    case KPACK_HOST_OK:
      return KPACK_SUCCESS;
    case KPACK_HOST_BAD_METADATA:
      return KPACK_ERROR_INVALID_METADATA;
    case KPACK_HOST_BAD_MAGIC:
    case KPACK_HOST_NULL_POINTER:
    case KPACK_HOST_UNDEFINED_SYMBOL:
    case KPACK_HOST_OUTSIDE_SECTIONS:
    case KPACK_HOST_OUTSIDE_KPACK_REF:
      return KPACK_ERROR_INVALID_FORMAT;
  }
  require(false, "a problem outside kpack_host_problem_t");
  return KPACK_ERROR_INVALID_FORMAT;
}

size_t kf_host_input(const uint8_t* data, size_t size) {
  kpack_host_t* h = NULL;
  kpack_host_info_t info;
  kpack_host_wrapper_t w;
  size_t good = 0;
  kpack_error_t err = kpack_host_open_memory(data, size, &h);
  require_status(err);
  if (err != KPACK_SUCCESS) {
    require(h == NULL, "failed host open left a handle");
    require(
        err == KPACK_ERROR_INVALID_FORMAT || err == KPACK_ERROR_OUT_OF_MEMORY,
        "host open failed with a status its header does not list");
    return 0;
  }
  require(kpack_host_get_info(h, &info) == KPACK_SUCCESS, "host info");
  require(info.kind <= KPACK_HOST_KPACKIFIED, "kind outside the enum");
  bool any_hipk = false, any_hipf = false;
  for (size_t i = 0; i < info.wrapper_count; i++) {
    err = kpack_host_get_wrapper(h, i, &w);
    require(err == w.status && err == status_of(w.problem),
            "record status and problem disagree");
    require(kpack_host_problem_string(w.problem) != NULL, "problem string");
    any_hipk |= w.magic == KPACK_HOST_HIPK_MAGIC;
    any_hipf |= w.magic == KPACK_HOST_HIPF_MAGIC;
    const char* const* arches;
    size_t arch_count;
    require(
        kpack_host_get_arches(h, i, &arches, &arch_count) == KPACK_SUCCESS &&
            (arches == NULL) == (arch_count == 0),
        "recorded arches");
    require(arch_count == 0 ||
                (w.magic == KPACK_HOST_HIPK_MAGIC && err == KPACK_SUCCESS),
            "recorded arches on an unusable record");
    for (size_t j = 0; j < arch_count; j++)
      require(arches[j] != NULL && *arches[j] != '\0', "an empty arch");
    if (w.magic == KPACK_HOST_HIPK_MAGIC && err == KPACK_SUCCESS) {
      require(w.kernel_name != NULL && *w.kernel_name != '\0' &&
                  w.search_path_count > 0,
              "a usable HIPK record without kernel name or search paths");
      for (size_t j = 0; j < w.search_path_count; j++) {
        char* resolved = NULL;
        require(kpack_resolve_search_path("/opt/fuzz/lib/libx.so",
                                          w.search_paths[j],
                                          &resolved) == KPACK_SUCCESS &&
                    resolved != NULL,
                "a search path does not resolve");
        free(resolved);
      }
    } else if (w.magic != KPACK_HOST_HIPK_MAGIC) {
      require(w.kernel_name == NULL, "a kernel name on a non-HIPK record");
    }
    good += err == KPACK_SUCCESS;
  }
  require(kpack_host_get_wrapper(h, info.wrapper_count, &w) ==
              KPACK_ERROR_INVALID_ARGUMENT,
          "record index past the end");
  require(any_hipk == (info.kind == KPACK_HOST_KPACKIFIED),
          "kind disagrees with the records");
  require(!any_hipf || info.kind != KPACK_HOST_NONE,
          "HIPF records in a binary without device code");
  kpack_host_close(h);
  return good;
}

/* ---- the host-ELF transform ---------------------------------------------- */

static int transform_in = -1, transform_out = -1;
static char transform_in_path[64];

/* The whole of memfd `fd`, mapped: an executable's output may hold a hole
 * before its program headers, which costs nothing mapped. */
static uint8_t* map_memfd(int fd, size_t* size) {
  struct stat st;
  require(fstat(fd, &st) == 0, "fstat");
  *size = (size_t)st.st_size;
  void* p = mmap(NULL, *size ? *size : 1, PROT_READ, MAP_PRIVATE, fd, 0);
  require(p != MAP_FAILED, "mapping the output");
  return p;
}

size_t kf_transform_input(const uint8_t* data, size_t size) {
  static const char* const paths[] = {KF_ARCHIVE_PATTERN};
  kpack_transform_options_t o = {.kernel_name = KF_KERNEL_NAME,
                                 .search_paths = paths,
                                 .search_path_count = 1};
  kpack_transform_message_t msg;
  kpack_transform_result_t r;
  kpack_transform_kind_t kind;
  if (transform_in < 0) {
    transform_in = memfd_create("kpack-fuzz-in", MFD_CLOEXEC);
    transform_out = memfd_create("kpack-fuzz-out", MFD_CLOEXEC);
    require(transform_in >= 0 && transform_out >= 0, "memfd_create");
    snprintf(transform_in_path, sizeof(transform_in_path), "/proc/self/fd/%d",
             transform_in);
  }
  require(ftruncate(transform_in, 0) == 0, "ftruncate");
  require(ftruncate(transform_out, 0) == 0, "ftruncate");
  write_whole(transform_in, data, size);

  kpack_error_t err = kpack_transform_classify(transform_in_path, &kind, &msg);
  require_status(err);
  if (err != KPACK_SUCCESS) {
    require(
        err == KPACK_ERROR_INVALID_FORMAT || err == KPACK_ERROR_OUT_OF_MEMORY,
        "classify failed with a status its header does not list");
    require(msg.text[0] != '\0', "classify failed without a message");
    return 0;
  }
  require(kind <= KPACK_TRANSFORM_FAT, "kind outside the enum");
  err = kpack_transform_write(transform_in_path, transform_out, &o, &r, &msg);
  require_status(err);
  if (err != KPACK_SUCCESS) {
    require(msg.text[0] != '\0', "transform failed without a message");
    require(kind == KPACK_TRANSFORM_FAT || err == KPACK_ERROR_INVALID_ARGUMENT,
            "a file that is not FAT refused other than INVALID_ARGUMENT");
    require(err == KPACK_ERROR_INVALID_FORMAT ||
                err == KPACK_ERROR_INVALID_ARGUMENT ||
                err == KPACK_ERROR_OUT_OF_MEMORY || err == KPACK_ERROR_IO_ERROR,
            "transform failed with a status its header does not list");
    return 0;
  }
  require(kind == KPACK_TRANSFORM_FAT, "a file that is not FAT transformed");

  /* The output passes the readers' checks: an ELF, kpack-ified, each record
   * HIPK with its index and the metadata given. */
  size_t out_size;
  uint8_t* out = map_memfd(transform_out, &out_size);
  require(out_size == r.output_size, "output size differs from the result");
  kpack_host_t* h = NULL;
  kpack_host_info_t info;
  err = kpack_host_open_memory(out, out_size, &h);
  require(err == KPACK_SUCCESS, "the transformed ELF does not open");
  require(kpack_host_get_info(h, &info) == KPACK_SUCCESS, "host info");
  require(info.kind == KPACK_HOST_KPACKIFIED && info.has_kpack_ref,
          "the transformed ELF is not kpack-ified");
  require(info.wrapper_count == r.wrapper_count, "record count changed");
  for (size_t i = 0; i < info.wrapper_count; i++) {
    kpack_host_wrapper_t w;
    require(kpack_host_get_wrapper(h, i, &w) == KPACK_SUCCESS,
            "a transformed record does not read");
    require(w.reserved == i && w.search_path_count == 1,
            "a transformed record has the wrong index or paths");
    require(strcmp(w.kernel_name, KF_KERNEL_NAME) == 0,
            "a transformed record names the wrong kernel");
  }
  kpack_host_close(h);
  munmap(out, out_size ? out_size : 1);
  return info.wrapper_count;
}
