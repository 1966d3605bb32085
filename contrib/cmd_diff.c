/* SPDX-License-Identifier: MIT
 *
 * `kpack diff`: what differs between two archives, or two directories of
 * them: kernels and declared arches added, removed or changed. Stored
 * bytes are compared first, so kernels whose frames are equal are never
 * decompressed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "code_object_view.h"
#include "host_view.h"
#include "json.h"

// clang-format off
static const char diff_manual[] =
    "NAME\n"
    "    kpack diff - compare two kpack archives, or two directories of them\n"
    "\n"
    "SYNOPSIS\n"
    "    kpack diff [--json] [-q] A B\n"
    "\n"
    "DESCRIPTION\n"
    "    Prints each kernel (binary and arch) that only A holds (-), that\n"
    "    only B holds (+) or that both hold with different bytes (~), with\n"
    "    its size and a content hash (64-bit FNV-1a of the decompressed\n"
    "    bytes), and each architecture one archive declares and the other\n"
    "    does not. A kernel whose stored bytes (its zstd frame or raw blob)\n"
    "    are the same in both archives is equal without being decompressed;\n"
    "    otherwise both are decompressed and compared, so archives written\n"
    "    with other compression levels, or by ROCm's writer, compare by\n"
    "    content. A kernel's TOC metadata map is compared too.\n"
    "\n"
    "    A and B may both be directories: the *.kpack files below each\n"
    "    (hidden directories such as .kpack/ included) are paired by their\n"
    "    path under it, and an archive only one side has is reported with\n"
    "    each of its kernels. A last line sums up what differs.\n"
    "\n"
    "OPTIONS\n"
    "    --json      print one JSON object instead: {differences: [{archive,\n"
    "                kind (\"kernel\" or \"declared_arch\"), change\n"
    "                (\"added\", \"removed\" or \"changed\"), binary, arch,\n"
    "                a, b}], added, removed, changed, same, equal,\n"
    "                complete}: a and b each {size, stored_size, hash} (null\n"
    "                on the side without the kernel; hash null when it was\n"
    "                not decompressed), archive the path under the\n"
    "                directories (null for two archives), the counts in\n"
    "                kernels, complete false when an archive could not be\n"
    "                read\n"
    "    -q, --quiet no output; the exit status says it all\n"
    "    -h, --help  print this manual\n"
    "\n"
    "EXAMPLES\n"
    "    kpack diff old/rand.kpack new/rand.kpack\n"
    "    kpack diff --json old/lib/.kpack new/lib/.kpack\n"
    "\n"
    "EXIT STATUS\n"
    "    0 the archives hold the same kernels and declare the same arches;\n"
    "    1 they differ; 2 an archive could not be read, or bad command line\n"
    "    (as diff(1) and cmp(1)).\n";
// clang-format on

static int diff_run(int argc, char** argv);

const cli_command cli_diff_command = {
    "diff", "compare two archives or two directories of archives", diff_manual,
    diff_run};

enum { DIFF_SAME = 0, DIFF_DIFFERENT = 1, DIFF_TROUBLE = 2 };

/* One side of a kernel comparison. */
typedef struct diff_side {
  kpack_archive_t archive;
  int fd; /* the archive file, for its stored bytes */
  const char* path;
} diff_side;

/* What one side shows of a kernel. */
typedef struct diff_kernel {
  uint64_t size, stored_size;
  uint64_t hash;
  bool hashed;
} diff_kernel;

typedef struct diff_state {
  bool json, quiet;
  cli_json out;
  cli_progress progress;
  size_t added, removed, changed, same, compared;
  size_t declared; /* declared arches only one side has */
} diff_state;

/* ---- kernels ------------------------------------------------------------- */

static uint64_t fnv1a(const void* data, size_t size) {
  const unsigned char* p = data;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* Decompresses a kernel into *data (kpack_free_kernel() it). */
static kpack_error_t read_kernel(const diff_side* s, const char* binary,
                                 const char* arch, void** data, size_t* size) {
  kpack_error_t err = kpack_get_kernel(s->archive, binary, arch, data, size);
  if (err != KPACK_SUCCESS)
    cli_error("%s: %s for %s: %s (%s)", s->path, binary, arch,
              kpack_error_string(err), cli_error_text(err));
  return err;
}

static kpack_error_t hash_kernel(const diff_side* s, const char* binary,
                                 const char* arch, diff_kernel* k) {
  void* data = NULL;
  size_t size;
  kpack_error_t err = read_kernel(s, binary, arch, &data, &size);
  if (err == KPACK_SUCCESS) {
    k->hash = fnv1a(data, size);
    k->hashed = true;
  }
  kpack_free_kernel(data);
  return err;
}

/* Whether the stored bytes of two kernels are the same, read in slices. */
static kpack_error_t stored_equal(const diff_side* a,
                                  const kpack_kernel_info_t* ia,
                                  const diff_side* b,
                                  const kpack_kernel_info_t* ib, bool* equal) {
  enum { SLICE = 64 * 1024 };
  static unsigned char buf_a[SLICE], buf_b[SLICE];
  *equal = false;
  if (ia->stored_size != ib->stored_size)
    return KPACK_SUCCESS;
  for (uint64_t done = 0; done < ia->stored_size;) {
    uint64_t left = ia->stored_size - done;
    size_t n = left < SLICE ? (size_t)left : SLICE;
    ssize_t ra = pread(a->fd, buf_a, n, (off_t)(ia->offset + done));
    ssize_t rb = pread(b->fd, buf_b, n, (off_t)(ib->offset + done));
    if (ra != (ssize_t)n || rb != (ssize_t)n) {
      const char* path = ra != (ssize_t)n ? a->path : b->path;
      int e = (ra < 0 || rb < 0) ? errno : 0;
      cli_error("%s: cannot read stored kernel bytes: %s", path,
                e != 0 ? strerror(e) : "file shorter than its TOC says");
      return KPACK_ERROR_IO_ERROR;
    }
    if (memcmp(buf_a, buf_b, n) != 0)
      return KPACK_SUCCESS;
    done += n;
  }
  *equal = true;
  return KPACK_SUCCESS;
}

/* Whether two kernels hold the same bytes: by their stored bytes when both
 * archives store them the same way, else decompressed (then hashed). */
static kpack_error_t same_content(const diff_side* a,
                                  const kpack_kernel_entry_t* ea,
                                  const diff_side* b,
                                  const kpack_kernel_entry_t* eb,
                                  diff_kernel* ka, diff_kernel* kb,
                                  bool* equal) {
  kpack_compression_scheme_t sa, sb;
  kpack_error_t err;
  void *da = NULL, *db = NULL;
  size_t na, nb;
  *equal = false;
  if (ea->info.size != eb->info.size) {
    if ((err = hash_kernel(a, ea->binary, ea->arch, ka)) == KPACK_SUCCESS)
      err = hash_kernel(b, eb->binary, eb->arch, kb);
    return err;
  }
  if ((err = kpack_get_compression_scheme(a->archive, &sa)) != KPACK_SUCCESS ||
      (err = kpack_get_compression_scheme(b->archive, &sb)) != KPACK_SUCCESS)
    return err;
  if (sa == sb) {
    if ((err = stored_equal(a, &ea->info, b, &eb->info, equal)) !=
            KPACK_SUCCESS ||
        *equal)
      return err;
  }
  if ((err = read_kernel(a, ea->binary, ea->arch, &da, &na)) != KPACK_SUCCESS ||
      (err = read_kernel(b, eb->binary, eb->arch, &db, &nb)) != KPACK_SUCCESS)
    goto done;
  *equal = na == nb && (na == 0 || memcmp(da, db, na) == 0);
  ka->hash = fnv1a(da, na);
  kb->hash = fnv1a(db, nb);
  ka->hashed = kb->hashed = true;
done:
  kpack_free_kernel(da);
  kpack_free_kernel(db);
  return err;
}

/* ---- reporting ----------------------------------------------------------- */

static void json_side(cli_json* w, const char* key, const diff_kernel* k) {
  cli_json_key(w, key);
  if (k == NULL) {
    cli_json_null(w);
    return;
  }
  cli_json_object(w, CLI_JSON_INLINE, false);
  cli_json_key_uint(w, "size", k->size);
  cli_json_key_uint(w, "stored_size", k->stored_size);
  cli_json_key(w, "hash");
  if (k->hashed) {
    char hex[17];
    snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)k->hash);
    cli_json_str(w, hex);
  } else {
    cli_json_null(w);
  }
  cli_json_end(w);
}

static const char* side_text(char buf[96], const diff_kernel* k) {
  if (k->hashed)
    snprintf(buf, 96, "%llu bytes, fnv1a %016llx", (unsigned long long)k->size,
             (unsigned long long)k->hash);
  else
    snprintf(buf, 96, "%llu bytes", (unsigned long long)k->size);
  return buf;
}

/* One difference: a kernel (ka and/or kb given) or a declared arch
 * (binary NULL). `archive` is the path under the directories, or NULL. */
static void report(diff_state* st, const char* archive, const char* binary,
                   const char* arch, const diff_kernel* ka,
                   const diff_kernel* kb) {
  const char* change = ka == NULL   ? "added"
                       : kb == NULL ? "removed"
                                    : "changed";
  if (binary == NULL)
    st->declared++;
  else {
    if (ka == NULL)
      st->added++;
    else if (kb == NULL)
      st->removed++;
    else
      st->changed++;
  }
  if (st->quiet)
    return;
  if (st->json) {
    cli_json* w = &st->out;
    cli_json_object(w, CLI_JSON_INLINE, false);
    cli_json_key_str(w, "archive", archive);
    cli_json_key_str(w, "kind", binary != NULL ? "kernel" : "declared_arch");
    cli_json_key_str(w, "change", change);
    cli_json_key_str(w, "binary", binary);
    cli_json_key_str(w, "arch", arch);
    if (binary != NULL) {
      json_side(w, "a", ka);
      json_side(w, "b", kb);
    }
    cli_json_end(w);
    return;
  }
  char prefix[4096] = "";
  if (archive != NULL)
    snprintf(prefix, sizeof(prefix), "%s: ", archive);
  char ta[96], tb[96];
  if (binary == NULL)
    printf("%c %sdeclared arch %s\n", ka == NULL ? '+' : '-', prefix, arch);
  else if (ka == NULL)
    printf("+ %s%s %s (%s)\n", prefix, binary, arch, side_text(tb, kb));
  else if (kb == NULL)
    printf("- %s%s %s (%s)\n", prefix, binary, arch, side_text(ta, ka));
  else
    printf("~ %s%s %s: %s -> %s\n", prefix, binary, arch, side_text(ta, ka),
           side_text(tb, kb));
}

/* ---- archives ------------------------------------------------------------ */

/* A side with no archive holds nothing: what the other holds is added or
 * removed. */
static void no_side(diff_side* s, const char* path) {
  s->path = path;
  s->fd = -1;
  s->archive = NULL;
}

static kpack_error_t open_side(const char* path, diff_side* s) {
  no_side(s, path);
  kpack_error_t err = kpack_open(path, &s->archive);
  if (err != KPACK_SUCCESS) {
    cli_input_error(path, err, errno);
    return err;
  }
  s->fd = open(path, O_RDONLY | O_CLOEXEC);
  if (s->fd < 0) {
    cli_input_error(path, KPACK_ERROR_IO_ERROR, errno);
    return KPACK_ERROR_IO_ERROR;
  }
  return KPACK_SUCCESS;
}

static void close_side(diff_side* s) {
  if (s->fd >= 0)
    close(s->fd);
  kpack_close(s->archive);
  s->archive = NULL;
  s->fd = -1;
}

/* A kernel only one side holds: reported with its size and hash. */
static kpack_error_t one_sided(diff_state* st, const char* archive,
                               const diff_side* s,
                               const kpack_kernel_entry_t* e, bool added) {
  diff_kernel k = {.size = e->info.size, .stored_size = e->info.stored_size};
  kpack_error_t err = hash_kernel(s, e->binary, e->arch, &k);
  if (err == KPACK_SUCCESS)
    report(st, archive, e->binary, e->arch, added ? NULL : &k,
           added ? &k : NULL);
  return err;
}

/* The declared arches (gfx_arches), both sorted by name, merged. */
static int compare_strings(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static kpack_error_t declared_arches(kpack_archive_t a, const char*** out,
                                     size_t* count) {
  *out = NULL;
  *count = 0;
  if (a == NULL)
    return KPACK_SUCCESS;
  kpack_error_t err = kpack_get_architecture_count(a, count);
  if (err != KPACK_SUCCESS || *count == 0)
    return err;
  *out = calloc(*count, sizeof(**out));
  if (*out == NULL)
    return KPACK_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < *count; i++)
    if ((err = kpack_get_architecture(a, i, &(*out)[i])) != KPACK_SUCCESS)
      return err;
  qsort(*out, *count, sizeof(**out), compare_strings);
  return KPACK_SUCCESS;
}

static kpack_error_t compare_declared(diff_state* st, const char* archive,
                                      const diff_side* a, const diff_side* b) {
  const char **la = NULL, **lb = NULL;
  size_t na = 0, nb = 0, i = 0, j = 0;
  static const diff_kernel marker;
  kpack_error_t err = declared_arches(a->archive, &la, &na);
  if (err == KPACK_SUCCESS)
    err = declared_arches(b->archive, &lb, &nb);
  while (err == KPACK_SUCCESS && (i < na || j < nb)) {
    int c = i == na ? 1 : j == nb ? -1 : strcmp(la[i], lb[j]);
    if (c < 0)
      report(st, archive, NULL, la[i++], &marker, NULL);
    else if (c > 0)
      report(st, archive, NULL, lb[j++], NULL, &marker);
    else
      i++, j++;
  }
  free(la);
  free(lb);
  return err;
}

static void show_progress(diff_state* st) {
  st->compared++;
  cli_progress_show(&st->progress, false, "kpack: diff: %zu kernels compared",
                    st->compared);
}

/* Both archives' kernels, binaries and then arches in byte-wise order (as
 * libkpack gives them), merged. */
static kpack_error_t compare_archives(diff_state* st, const char* archive,
                                      const diff_side* a, const diff_side* b) {
  size_t nba = 0, nbb = 0, ba = 0, bb = 0;
  kpack_error_t err = compare_declared(st, archive, a, b);
  if (err != KPACK_SUCCESS ||
      (a->archive != NULL &&
       (err = kpack_get_binary_count(a->archive, &nba)) != KPACK_SUCCESS) ||
      (b->archive != NULL &&
       (err = kpack_get_binary_count(b->archive, &nbb)) != KPACK_SUCCESS))
    return err;
  while (ba < nba || bb < nbb) {
    const char *name_a = NULL, *name_b = NULL;
    size_t naa = 0, nab = 0;
    if (ba < nba &&
        ((err = kpack_get_binary(a->archive, ba, &name_a)) != KPACK_SUCCESS ||
         (err = kpack_get_binary_arch_count_at(a->archive, ba, &naa)) !=
             KPACK_SUCCESS))
      return err;
    if (bb < nbb &&
        ((err = kpack_get_binary(b->archive, bb, &name_b)) != KPACK_SUCCESS ||
         (err = kpack_get_binary_arch_count_at(b->archive, bb, &nab)) !=
             KPACK_SUCCESS))
      return err;
    int c = name_a == NULL ? 1 : name_b == NULL ? -1 : strcmp(name_a, name_b);
    size_t i = 0, j = 0;
    if (c > 0)
      naa = 0; /* only B holds this binary */
    if (c < 0)
      nab = 0;
    while (i < naa || j < nab) {
      kpack_kernel_entry_t ea, eb;
      if (i < naa && (err = kpack_get_kernel_entry(a->archive, ba, i, &ea)) !=
                         KPACK_SUCCESS)
        return err;
      if (j < nab && (err = kpack_get_kernel_entry(b->archive, bb, j, &eb)) !=
                         KPACK_SUCCESS)
        return err;
      int d = i == naa ? 1 : j == nab ? -1 : strcmp(ea.arch, eb.arch);
      if (d < 0) {
        err = one_sided(st, archive, a, &ea, false);
        i++;
      } else if (d > 0) {
        err = one_sided(st, archive, b, &eb, true);
        j++;
      } else {
        diff_kernel ka = {.size = ea.info.size,
                          .stored_size = ea.info.stored_size};
        diff_kernel kb = {.size = eb.info.size,
                          .stored_size = eb.info.stored_size};
        bool equal;
        err = same_content(a, &ea, b, &eb, &ka, &kb, &equal);
        if (err == KPACK_SUCCESS && equal)
          equal = ea.metadata_size == eb.metadata_size &&
                  (ea.metadata_size == 0 ||
                   memcmp(ea.metadata, eb.metadata, ea.metadata_size) == 0);
        if (err == KPACK_SUCCESS && !equal)
          report(st, archive, ea.binary, ea.arch, &ka, &kb);
        else if (err == KPACK_SUCCESS)
          st->same++;
        i++, j++;
      }
      if (err != KPACK_SUCCESS)
        return err;
      show_progress(st);
      if (cli_interrupted())
        return KPACK_ERROR_IO_ERROR;
    }
    if (c <= 0)
      ba++;
    if (c >= 0)
      bb++;
  }
  return KPACK_SUCCESS;
}

/* Every kernel of an archive only one directory holds. */
static kpack_error_t archive_one_sided(diff_state* st, const char* archive,
                                       const char* path, bool added) {
  diff_side s, none;
  no_side(&none, path);
  kpack_error_t err = open_side(path, &s);
  if (err == KPACK_SUCCESS)
    err = added ? compare_archives(st, archive, &none, &s)
                : compare_archives(st, archive, &s, &none);
  close_side(&s);
  return err;
}

/* ---- directories --------------------------------------------------------- */

typedef struct diff_list {
  char** items; /* paths under the directory, sorted */
  size_t count, cap;
} diff_list;

static void list_free(diff_list* l) {
  for (size_t i = 0; i < l->count; i++)
    free(l->items[i]);
  free(l->items);
}

static bool is_archive_name(const char* name) {
  size_t n = strlen(name);
  return n > 6 && strcmp(name + n - 6, ".kpack") == 0;
}

/* Adds the *.kpack files below root/rel (rel "" for root itself). */
static bool list_archives(const char* root, const char* rel, diff_list* l) {
  char* dir_path = NULL;
  bool ok = false;
  DIR* dir = NULL;
  if (asprintf(&dir_path, "%s%s%s", root, *rel ? "/" : "", rel) < 0) {
    dir_path = NULL;
    goto done;
  }
  if ((dir = opendir(dir_path)) == NULL) {
    cli_input_error(dir_path, KPACK_ERROR_IO_ERROR, errno);
    goto done;
  }
  for (struct dirent* d; (d = readdir(dir)) != NULL;) {
    if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
      continue;
    char *sub = NULL, *full = NULL;
    struct stat st;
    if (asprintf(&sub, "%s%s%s", rel, *rel ? "/" : "", d->d_name) < 0)
      goto done;
    if (asprintf(&full, "%s/%s", root, sub) < 0) {
      free(sub);
      goto done;
    }
    bool keep = false, fine = true;
    if (stat(full, &st) != 0) {
      fine = true; /* a dangling link is no archive */
    } else if (S_ISDIR(st.st_mode)) {
      fine = list_archives(root, sub, l);
    } else if (S_ISREG(st.st_mode) && is_archive_name(d->d_name)) {
      char** grown =
          cli_grow(l->items, l->count, &l->cap, sizeof(*l->items), 16);
      if (grown == NULL)
        fine = false;
      else {
        l->items = grown;
        l->items[l->count++] = sub;
        keep = true;
      }
    }
    if (!keep)
      free(sub);
    free(full);
    if (!fine)
      goto done;
  }
  ok = true;
done:
  if (dir != NULL)
    closedir(dir);
  free(dir_path);
  return ok;
}

static kpack_error_t compare_pair(diff_state* st, const char* archive,
                                  const char* path_a, const char* path_b) {
  diff_side a, b;
  no_side(&b, path_b);
  kpack_error_t err = open_side(path_a, &a);
  if (err == KPACK_SUCCESS && (err = open_side(path_b, &b)) == KPACK_SUCCESS)
    err = compare_archives(st, archive, &a, &b);
  close_side(&a);
  close_side(&b);
  return err;
}

static kpack_error_t compare_dirs(diff_state* st, const char* dir_a,
                                  const char* dir_b) {
  diff_list la = {0}, lb = {0};
  kpack_error_t err = KPACK_ERROR_IO_ERROR;
  if (!list_archives(dir_a, "", &la) || !list_archives(dir_b, "", &lb))
    goto done;
  qsort(la.items, la.count, sizeof(*la.items), compare_strings);
  qsort(lb.items, lb.count, sizeof(*lb.items), compare_strings);
  err = KPACK_SUCCESS;
  for (size_t i = 0, j = 0;
       err == KPACK_SUCCESS && (i < la.count || j < lb.count);) {
    int c = i == la.count   ? 1
            : j == lb.count ? -1
                            : strcmp(la.items[i], lb.items[j]);
    const char* rel = c <= 0 ? la.items[i] : lb.items[j];
    char *pa = NULL, *pb = NULL;
    if ((c <= 0 && asprintf(&pa, "%s/%s", dir_a, rel) < 0) ||
        (c >= 0 && asprintf(&pb, "%s/%s", dir_b, rel) < 0)) {
      err = KPACK_ERROR_OUT_OF_MEMORY;
      pa = pb = NULL;
    } else if (c < 0) {
      err = archive_one_sided(st, rel, pa, false);
    } else if (c > 0) {
      err = archive_one_sided(st, rel, pb, true);
    } else {
      err = compare_pair(st, rel, pa, pb);
    }
    free(pa);
    free(pb);
    if (c <= 0)
      i++;
    if (c >= 0)
      j++;
  }
done:
  list_free(&la);
  list_free(&lb);
  return err;
}

/* ---- the command --------------------------------------------------------- */

static int diff_run(int argc, char** argv) {
  static const struct option options[] = {{"json", no_argument, NULL, 'J'},
                                          {"quiet", no_argument, NULL, 'q'},
                                          {"help", no_argument, NULL, 'h'},
                                          {NULL, 0, NULL, 0}};
  diff_state st = {0};
  int c;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "qh", options, NULL)) != -1) {
    if (c == 'h')
      return cli_print_manual(&cli_diff_command);
    if (c == 'J')
      st.json = true;
    else if (c == 'q')
      st.quiet = true;
    else
      return cli_usage_error(&cli_diff_command, "unknown option '%s'",
                             argv[optind - 1]);
  }
  if (argc - optind != 2)
    return cli_usage_error(&cli_diff_command, "expected A B, got %d argument%s",
                           argc - optind, argc - optind == 1 ? "" : "s");
  const char* path_a = argv[optind];
  const char* path_b = argv[optind + 1];
  struct stat sa, sb;
  if (stat(path_a, &sa) != 0 || stat(path_b, &sb) != 0) {
    const char* missing = stat(path_a, &sa) != 0 ? path_a : path_b;
    cli_input_error(missing, KPACK_ERROR_FILE_NOT_FOUND, errno);
    return DIFF_TROUBLE;
  }
  for (int i = 0; i < 2; i++) {
    const char* path = i == 0 ? path_a : path_b;
    if (cli_is_code_object(path)) {
      cli_error(
          "%s: an AMDGPU code object, not a kpack archive: compare two "
          "with cmp(1), or their kernels with kpack info",
          path);
      return DIFF_TROUBLE;
    }
    if (cli_is_host_binary(path)) {
      cli_error(
          "%s: a HIP host binary, not a kpack archive: pack the device "
          "code of each first (kpack create -o a.kpack --fatbin %s) and "
          "compare the archives",
          path, path);
      return DIFF_TROUBLE;
    }
  }
  if (S_ISDIR(sa.st_mode) != S_ISDIR(sb.st_mode)) {
    cli_error("%s and %s: cannot compare a directory with a file", path_a,
              path_b);
    return DIFF_TROUBLE;
  }
  cli_catch_signals();
  st.progress.enabled = !st.quiet && !st.json && isatty(STDERR_FILENO);
  if (st.json && !st.quiet) {
    cli_json_init(&st.out, stdout);
    cli_json_object(&st.out, 2, true);
    cli_json_key(&st.out, "differences");
    cli_json_array(&st.out, 4, true);
  }
  kpack_error_t err = S_ISDIR(sa.st_mode)
                          ? compare_dirs(&st, path_a, path_b)
                          : compare_pair(&st, NULL, path_a, path_b);
  cli_progress_end(&st.progress);
  bool different = st.added + st.removed + st.changed + st.declared > 0;
  if (st.json && !st.quiet) {
    cli_json_end(&st.out);
    cli_json_key_bool(&st.out, "equal", !different);
    cli_json_key_uint(&st.out, "added", st.added);
    cli_json_key_uint(&st.out, "removed", st.removed);
    cli_json_key_uint(&st.out, "changed", st.changed);
    cli_json_key_uint(&st.out, "same", st.same);
    cli_json_key_bool(&st.out, "complete", err == KPACK_SUCCESS);
    cli_json_finish(&st.out);
  } else if (!st.quiet && err == KPACK_SUCCESS) {
    printf("%s: %zu added, %zu removed, %zu changed, %zu the same\n",
           different ? "different" : "equal", st.added, st.removed, st.changed,
           st.same);
  }
  if (cli_interrupted())
    return CLI_INTERRUPTED;
  if (err != KPACK_SUCCESS)
    return DIFF_TROUBLE;
  return different ? DIFF_DIFFERENT : DIFF_SAME;
}
