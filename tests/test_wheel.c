/* SPDX-License-Identifier: MIT
 *
 * Wheels: SHA-256, the zip reader and writer, wheel file names, METADATA,
 * unpacking (Debian's own wheels from python3-pip-whl and
 * python3-setuptools-whl, and wheels Debian's setuptools builds) and
 * packing, whose output Debian's `python3 -m wheel unpack` (which checks
 * every RECORD hash) and pip (installing into a venv with no index) accept.
 * And the pipe that hashes and writes a large entry on a second thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/pipe.h"
#include "common/sha256.h"
#include "common/zip.h"
#include "producer/wheel.h"
#include "rocm_kpack/kpack_wheel.h"
#include "support.h"

#define PYTHON "/usr/bin/python3"
#define DEBIAN_WHEELS "/usr/share/python-wheels"

/* ---- helpers ------------------------------------------------------------- */

static void hex(const uint8_t* d, size_t n, char* out) {
  for (size_t i = 0; i < n; i++)
    sprintf(out + 2 * i, "%02x", d[i]);
}

/* Runs a shell command; its status, output in *out when not NULL. */
static int sh(const char* command, char** out) {
  char* argv[] = {"/bin/sh", "-c", (char*)command, NULL};
  char* err = NULL;
  int status = kt_run(argv, 600, out, &err);
  if (status != 0)
    print_message("%s: exit %d\n%s\n", command, status, err ? err : "");
  free(err);
  return status;
}

/* The one Debian wheel whose file name starts with `prefix`. */
static char* debian_wheel(const char* prefix) {
  char* out = NULL;
  char command[256];
  snprintf(command, sizeof(command), "ls " DEBIAN_WHEELS "/%s-*.whl", prefix);
  assert_int_equal(sh(command, &out), 0);
  out[strcspn(out, "\n")] = '\0';
  return out;
}

/* A directory tree to pack: a module, a data file, an executable. */
static char* sample_tree(const char* name) {
  char* root = kt_in_tmp(name);
  kt_rmtree(root);
  char* p = kt_tree_path(root, "kpdemo/__init__.py");
  kt_write_file(p, "VALUE = 42\n", 11);
  free(p);
  /* Both over KP_PIPE_MIN_SIZE: hashed and written on the pipe's thread,
   * one deflated and one stored. */
  p = kt_tree_path(root, "kpdemo/data/blob.bin");
  void* blob = kt_pattern(3000000, 7);
  kt_write_file(p, blob, 3000000);
  free(blob);
  free(p);
  p = kt_tree_path(root, "kpdemo/data/big.kpack");
  blob = kt_pattern(1500000, 8);
  kt_write_file(p, blob, 1500000);
  free(blob);
  free(p);
  p = kt_tree_path(root, "kpdemo/tool.sh");
  kt_write_file(p, "#!/bin/sh\necho hi\n", 18);
  assert_int_equal(chmod(p, 0755), 0);
  free(p);
  return root;
}

static kp_wheel_pack_options sample_options(void) {
  return (kp_wheel_pack_options){.project = "kp-demo",
                                 .version = "1.2.0",
                                 .tags = "py3-none-any",
                                 .root_is_purelib = true,
                                 .level = 6,
                                 .stored_suffix = ".kpack"};
}

/* sample_tree(name) packed with sample_options() into the fresh directory
 * `out_name`: the wheel's path; the tree and the directory in *tree and
 * *out, all three the caller's to free. */
static char* pack_sample(const char* name, const char* out_name, char** tree,
                         char** out) {
  *tree = sample_tree(name);
  *out = kt_in_tmp(out_name);
  kt_rmtree(*out);
  kt_mkdirs(*out);
  kp_wheel_pack_options o = sample_options();
  char* path;
  assert_int_equal(kp_wheel_pack(*tree, *out, &o, &path), KPACK_SUCCESS);
  return path;
}

/* A zip of the given entries (name, text) written by the project's
 * writer. */
static void write_zip(const char* path, const char* const* entries,
                      size_t count, int level) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  assert_true(fd >= 0);
  kp_zip_writer* w;
  assert_int_equal(kp_zip_writer_create(fd, &w), KPACK_SUCCESS);
  for (size_t i = 0; i < count; i++)
    assert_int_equal(
        kp_zip_writer_add(w, entries[2 * i], 0644, -1, entries[2 * i + 1],
                          strlen(entries[2 * i + 1]), level, NULL),
        KPACK_SUCCESS);
  assert_int_equal(kp_zip_writer_finish(w), KPACK_SUCCESS);
  kp_zip_writer_free(w);
  close(fd);
}

/* ---- the pipe ------------------------------------------------------------ */

/* What the pipe's functions saw: each function's bytes, the order of the
 * calls (a letter per call) and, to fail on, a call count. */
typedef struct pipe_log {
  uint8_t* bytes[2];
  size_t size[2];
  char calls[4096];
  size_t call_count;
  size_t fail_at; /* the call that fails (1-based), 0 none */
} pipe_log;

typedef struct pipe_user {
  pipe_log* log;
  int which;
} pipe_user;

static kpack_error_t pipe_take(void* user, const void* data, size_t size) {
  pipe_user* u = user;
  pipe_log* l = u->log;
  if (++l->call_count == l->fail_at)
    return KPACK_ERROR_IO_ERROR;
  assert_true(l->call_count < sizeof(l->calls));
  l->calls[l->call_count - 1] = (char)('a' + u->which);
  l->bytes[u->which] = realloc(l->bytes[u->which], l->size[u->which] + size);
  memcpy(l->bytes[u->which] + l->size[u->which], data, size);
  l->size[u->which] += size;
  return KPACK_SUCCESS;
}

static void test_pipe_runs_pieces_in_order_on_its_thread(void** state) {
  (void)state;
  pipe_log log = {0};
  pipe_user users[2] = {{&log, 0}, {&log, 1}};
  uint8_t* data = kt_pattern(4 << 20, 3);
  uint8_t* want[2] = {malloc(16 << 20), malloc(16 << 20)};
  size_t want_size[2] = {0, 0};
  char order[64];
  size_t runs = 0;
  kp_pipe* p = kp_pipe_start();
  assert_non_null(p);
  /* Pieces of either function, of sizes around the pipe's buffers. */
  static const size_t sizes[] = {1,     65536, 0,       300000, 262144,
                                 70000, 3,     1 << 20, 5,      500000};
  size_t at = 0;
  for (size_t i = 0; i < 40; i++) {
    int which = (i / 3) % 2; /* runs of three pieces of one function */
    size_t n = sizes[i % 10];
    assert_int_equal(kp_pipe_push(p, pipe_take, &users[which], data + at, n),
                     KPACK_SUCCESS);
    memcpy(want[which] + want_size[which], data + at, n);
    want_size[which] += n;
    if (n > 0 && (runs == 0 || order[runs - 1] != 'a' + which))
      order[runs++] = (char)('a' + which);
    at = (at + 4099) % (2 << 20);
  }
  assert_int_equal(kp_pipe_finish(p), KPACK_SUCCESS);
  for (int w = 0; w < 2; w++) {
    assert_int_equal(log.size[w], want_size[w]);
    assert_memory_equal(log.bytes[w], want[w], want_size[w]);
    free(want[w]);
    free(log.bytes[w]);
  }
  /* The calls, runs of one letter merged, go in the order pushed. */
  size_t merged = 0;
  for (size_t i = 0; i < log.call_count; i++)
    if (merged == 0 || order[merged - 1] != log.calls[i]) {
      assert_true(merged < runs);
      assert_int_equal(log.calls[i], order[merged]);
      merged++;
    }
  assert_int_equal(merged, runs);
  /* Without a pipe, the call happens at once. */
  pipe_log inline_log = {0};
  pipe_user u = {&inline_log, 1};
  assert_int_equal(kp_pipe_call(NULL, pipe_take, &u, data, 10), KPACK_SUCCESS);
  assert_int_equal(inline_log.size[1], 10);
  free(inline_log.bytes[1]);
  assert_int_equal(kp_pipe_finish(NULL), KPACK_SUCCESS);
  free(data);
}

static void test_pipe_stops_at_the_first_failure(void** state) {
  (void)state;
  pipe_log log = {.fail_at = 3};
  pipe_user u = {&log, 0};
  uint8_t* data = kt_pattern(256 << 10, 4);
  kp_pipe* p = kp_pipe_start();
  assert_non_null(p);
  /* A slot a push: the third fails, and a push after it says so. */
  kpack_error_t err = KPACK_SUCCESS;
  size_t pushes = 0;
  for (; pushes < 1000 && err == KPACK_SUCCESS; pushes++)
    err = kp_pipe_push(p, pipe_take, &u, data, 256 << 10);
  assert_int_equal(err, KPACK_ERROR_IO_ERROR);
  assert_true(pushes > 3 && pushes < 1000);
  assert_int_equal(kp_pipe_finish(p), KPACK_ERROR_IO_ERROR);
  assert_int_equal(log.call_count, 3); /* nothing ran after it */
  assert_int_equal(log.size[0], 2 * (256 << 10));
  free(log.bytes[0]);
  free(data);
}

/* ---- SHA-256 ------------------------------------------------------------- */

static void test_sha256_gives_the_fips_180_digests(void** state) {
  (void)state;
  static const struct {
    const char* text;
    const char* digest;
  } vectors[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
    uint8_t d[KP_SHA256_SIZE];
    char h[2 * KP_SHA256_SIZE + 1];
    kp_sha256(vectors[i].text, strlen(vectors[i].text), d);
    hex(d, sizeof(d), h);
    assert_string_equal(h, vectors[i].digest);
  }
  /* A million 'a', fed in uneven pieces. */
  kp_sha256_ctx ctx;
  char block[997];
  memset(block, 'a', sizeof(block));
  kp_sha256_init(&ctx);
  size_t left = 1000000;
  for (size_t n = 1; left > 0; n = n % 997 + 1) {
    size_t take = n < left ? n : left;
    kp_sha256_update(&ctx, block, take);
    left -= take;
  }
  uint8_t d[KP_SHA256_SIZE];
  char h[2 * KP_SHA256_SIZE + 1];
  kp_sha256_final(&ctx, d);
  hex(d, sizeof(d), h);
  assert_string_equal(
      h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* ---- zip ----------------------------------------------------------------- */

static void test_zip_round_trip_reads_what_was_written(void** state) {
  (void)state;
  char* path = kt_in_tmp("round.zip");
  const char* entries[] = {"a.txt",     "hello",
                           "dir/b.txt", "",
                           "dir/c.txt", "some more text, some more text"};
  for (int level = 0; level <= 9; level += 9) {
    write_zip(path, entries, 3, level);
    kp_zip* zip;
    assert_int_equal(kp_zip_open(path, &zip), KPACK_SUCCESS);
    assert_int_equal(kp_zip_count(zip), 3);
    for (size_t i = 0; i < 3; i++) {
      const kp_zip_entry* e = kp_zip_entry_at(zip, i);
      assert_string_equal(e->name, entries[2 * i]);
      assert_int_equal(e->mode, 0100644);
      assert_int_equal(e->method, level ? KP_ZIP_DEFLATED : KP_ZIP_STORED);
      char* data;
      size_t size;
      assert_int_equal(kp_zip_read_alloc(zip, i, 1 << 20, &data, &size),
                       KPACK_SUCCESS);
      assert_int_equal(size, strlen(entries[2 * i + 1]));
      assert_memory_equal(data, entries[2 * i + 1], size);
      free(data);
    }
    assert_int_equal(kp_zip_find(zip, "dir/c.txt"), 2);
    assert_int_equal(kp_zip_find(zip, "nope"), SIZE_MAX);
    kp_zip_close(zip);
    /* Python's zipfile reads it too. */
    char command[512];
    snprintf(command, sizeof(command), PYTHON " -m zipfile -t '%s'", path);
    assert_int_equal(sh(command, NULL), 0);
  }
  free(path);
}

static void test_zip_with_70000_entries_uses_zip64_records(void** state) {
  (void)state;
  char* path = kt_in_tmp("many.zip");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  kp_zip_writer* w;
  assert_int_equal(kp_zip_writer_create(fd, &w), KPACK_SUCCESS);
  for (unsigned i = 0; i < 70000; i++) {
    char name[32];
    snprintf(name, sizeof(name), "f/%05u", i);
    assert_int_equal(kp_zip_writer_add(w, name, 0644, -1, name, 7, 0, NULL),
                     KPACK_SUCCESS);
  }
  assert_int_equal(kp_zip_writer_finish(w), KPACK_SUCCESS);
  kp_zip_writer_free(w);
  close(fd);
  kp_zip* zip;
  assert_int_equal(kp_zip_open(path, &zip), KPACK_SUCCESS);
  assert_int_equal(kp_zip_count(zip), 70000);
  assert_string_equal(kp_zip_entry_at(zip, 69999)->name, "f/69999");
  kp_zip_close(zip);
  char command[512];
  snprintf(command, sizeof(command),
           PYTHON
           " -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]);"
           " assert len(z.namelist()) == 70000 and z.testzip() is None'"
           " '%s'",
           path);
  assert_int_equal(sh(command, NULL), 0);
  unlink(path);
  free(path);
}

static void test_zip_refuses_what_is_not_a_whole_zip(void** state) {
  (void)state;
  char* path = kt_in_tmp("cut.zip");
  const char* entries[] = {"a.txt", "hello hello hello hello hello"};
  write_zip(path, entries, 1, 6);
  size_t size;
  uint8_t* bytes = kt_read_file(path, &size);
  kp_zip* zip;
  /* Every truncation loses the end record. */
  for (size_t n = 0; n < size; n++) {
    assert_int_equal(kp_zip_open_memory(bytes, n, &zip),
                     KPACK_ERROR_INVALID_FORMAT);
    assert_null(zip);
  }
  assert_int_equal(kp_zip_open_memory(bytes, size, &zip), KPACK_SUCCESS);
  kp_zip_close(zip);
  /* A byte after the end record is not a comment it declares. */
  uint8_t* longer = malloc(size + 1);
  memcpy(longer, bytes, size);
  longer[size] = 0;
  assert_int_equal(kp_zip_open_memory(longer, size + 1, &zip),
                   KPACK_ERROR_INVALID_FORMAT);
  free(longer);
  free(bytes);
  assert_int_equal(kp_zip_open("/nonexistent/x.zip", &zip),
                   KPACK_ERROR_FILE_NOT_FOUND);
  assert_int_equal(kp_zip_open(kt_tmp, &zip), KPACK_ERROR_IO_ERROR);
  free(path);
}

/* Offset of the first central directory header in bytes[0, size). */
static size_t central_header(const uint8_t* bytes, size_t size) {
  for (size_t i = size - 22; i-- > 0;)
    if (memcmp(bytes + i, "PK\1\2", 4) == 0)
      return i;
  fail_msg("no central directory header");
  return 0;
}

static void test_zip_reports_corrupt_data_and_unknown_methods(void** state) {
  (void)state;
  char* path = kt_in_tmp("bad.zip");
  void* pattern = kt_pattern(100000, 3);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  kp_zip_writer* w;
  assert_int_equal(kp_zip_writer_create(fd, &w), KPACK_SUCCESS);
  assert_int_equal(
      kp_zip_writer_add(w, "data.bin", 0644, -1, pattern, 100000, 6, NULL),
      KPACK_SUCCESS);
  assert_int_equal(kp_zip_writer_finish(w), KPACK_SUCCESS);
  kp_zip_writer_free(w);
  close(fd);
  size_t size;
  uint8_t* bytes = kt_read_file(path, &size);
  kp_zip* zip;
  char* data;
  size_t n;
  /* A flipped byte in the deflate stream. */
  bytes[30 + 8 + 1000] ^= 0x55;
  assert_int_equal(kp_zip_open_memory(bytes, size, &zip), KPACK_SUCCESS);
  assert_int_equal(kp_zip_read_alloc(zip, 0, 1 << 20, &data, &n),
                   KPACK_ERROR_DECOMPRESSION_FAILED);
  kp_zip_close(zip);
  bytes[30 + 8 + 1000] ^= 0x55;
  /* A CRC that differs from the data's. */
  size_t central = central_header(bytes, size);
  bytes[central + 16] ^= 1;
  assert_int_equal(kp_zip_open_memory(bytes, size, &zip), KPACK_SUCCESS);
  assert_int_equal(kp_zip_read_alloc(zip, 0, 1 << 20, &data, &n),
                   KPACK_ERROR_DECOMPRESSION_FAILED);
  /* Bigger than the caller takes. */
  assert_int_equal(kp_zip_read_alloc(zip, 0, 1000, &data, &n),
                   KPACK_ERROR_INVALID_FORMAT);
  kp_zip_close(zip);
  bytes[central + 16] ^= 1;
  /* Method 12 (bzip2). */
  bytes[central + 10] = 12;
  assert_int_equal(kp_zip_open_memory(bytes, size, &zip),
                   KPACK_ERROR_UNSUPPORTED_VERSION);
  bytes[central + 10] = 8;
  /* Encrypted. */
  bytes[central + 8] |= 1;
  assert_int_equal(kp_zip_open_memory(bytes, size, &zip),
                   KPACK_ERROR_INVALID_FORMAT);
  bytes[central + 8] &= (uint8_t)~1;
  /* A local header offset past the central directory. */
  bytes[central + 45] = 0x7f;
  assert_int_equal(kp_zip_open_memory(bytes, size, &zip),
                   KPACK_ERROR_INVALID_FORMAT);
  free(bytes);
  free(pattern);
  free(path);
}

static void test_zip_refuses_two_entries_of_one_name(void** state) {
  (void)state;
  char* path = kt_in_tmp("dup.zip");
  const char* entries[] = {"a.txt", "one", "a.txt", "two"};
  write_zip(path, entries, 2, 0);
  kp_zip* zip;
  assert_int_equal(kp_zip_open(path, &zip), KPACK_ERROR_INVALID_FORMAT);
  free(path);
}

/* ---- names --------------------------------------------------------------- */

static void test_wheel_names_parse_into_their_parts(void** state) {
  (void)state;
  kp_wheel_name n;
  assert_int_equal(
      kp_wheel_name_parse("/x/kpack-0.1.0-cp311-cp311-linux_x86_64.whl", &n),
      KPACK_SUCCESS);
  assert_string_equal(n.distribution, "kpack");
  assert_string_equal(n.version, "0.1.0");
  assert_null(n.build);
  assert_string_equal(n.tags, "cp311-cp311-linux_x86_64");
  kp_wheel_name_free(&n);
  assert_int_equal(kp_wheel_name_parse("a_b-1.0-2x-py2.py3-none-any.whl", &n),
                   KPACK_SUCCESS);
  assert_string_equal(n.build, "2x");
  assert_string_equal(n.tags, "py2.py3-none-any");
  kp_wheel_name_free(&n);
  static const char* const bad[] = {
      "a-1.0-py3-none-any.zip",
      "a-1.0-py3-none.whl",
      "a-1.0-x-y-py3-none-any.whl",
      "a-1.0-x-py3-none-any.whl",
      "a--py3-none-any.whl",
      "a-1 0-py3-none-any.whl",
      ".whl",
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(kp_wheel_name_parse(bad[i], &n),
                     KPACK_ERROR_INVALID_FORMAT);
    assert_null(n.distribution);
  }
}

static void test_wheel_file_names_escape_project_and_version(void** state) {
  (void)state;
  char* s = kp_wheel_escape_name("Foo.Bar--baz_Qux");
  assert_string_equal(s, "foo_bar_baz_qux");
  free(s);
  char* name;
  assert_int_equal(kp_wheel_file_name("rocm-sdk-device-gfx90a", "7.1.0-rc1",
                                      NULL, "py3-none-linux_x86_64", &name),
                   KPACK_SUCCESS);
  assert_string_equal(name,
                      "rocm_sdk_device_gfx90a-7.1.0_rc1-py3-none-linux_x86_64"
                      ".whl");
  free(name);
  assert_int_equal(kp_wheel_file_name("torch", "2.9", "1",
                                      "cp312-cp312-linux_x86_64", &name),
                   KPACK_SUCCESS);
  assert_string_equal(name, "torch-2.9-1-cp312-cp312-linux_x86_64.whl");
  free(name);
  assert_int_equal(kp_wheel_file_name("-x", "1", NULL, "py3-none-any", &name),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kp_wheel_file_name("x", "1", NULL, "py3-none", &name),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kp_wheel_file_name("x", "1 2", NULL, "py3-none-any", &name),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kp_wheel_file_name("x", "1", "b1", "py3-none-any", &name),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(name);
}

/* ---- METADATA ------------------------------------------------------------ */

static const char sample_metadata[] =
    "Metadata-Version: 2.1\n"
    "Name: kp-demo\n"
    "Version: 1.0\n"
    "Summary: a demo\n"
    "License: MIT\n"
    "        with a second line\n"
    "Requires-Dist: numpy\n"
    "Provides-Extra: test\n"
    "Requires-Dist: pytest ; extra == \"test\"\n"
    "\n"
    "The description.\n\nKept byte for byte.\n";

static void test_metadata_formats_back_to_the_same_bytes(void** state) {
  (void)state;
  kp_metadata md;
  assert_int_equal(
      kp_metadata_parse(sample_metadata, strlen(sample_metadata), &md),
      KPACK_SUCCESS);
  assert_string_equal(kp_metadata_get(&md, "name"), "kp-demo");
  assert_string_equal(kp_metadata_get(&md, "License"),
                      "MIT\n        with a second line");
  char* text;
  size_t size;
  assert_int_equal(kp_metadata_format(&md, &text, &size), KPACK_SUCCESS);
  assert_string_equal(text, sample_metadata);
  free(text);
  kp_metadata_free(&md);
}

static void test_metadata_lines_join_their_kind(void** state) {
  (void)state;
  kp_metadata md;
  assert_int_equal(
      kp_metadata_parse(sample_metadata, strlen(sample_metadata), &md),
      KPACK_SUCCESS);
  assert_int_equal(kp_metadata_set(&md, "Version", "2.0"), KPACK_SUCCESS);
  assert_int_equal(kp_metadata_add_line(&md, "Provides-Extra: device-gfx90a"),
                   KPACK_SUCCESS);
  assert_int_equal(
      kp_metadata_add_line(&md,
                           "Requires-Dist: kp-demo-device-gfx90a==2.0; "
                           "extra == \"device-gfx90a\""),
      KPACK_SUCCESS);
  assert_int_equal(kp_metadata_add_line(&md, "Keywords: gpu"), KPACK_SUCCESS);
  char* text;
  size_t size;
  assert_int_equal(kp_metadata_format(&md, &text, &size), KPACK_SUCCESS);
  assert_string_equal(
      text,
      "Metadata-Version: 2.1\nName: kp-demo\nVersion: 2.0\n"
      "Summary: a demo\nLicense: MIT\n        with a second line\n"
      "Requires-Dist: numpy\nProvides-Extra: test\n"
      "Provides-Extra: device-gfx90a\n"
      "Requires-Dist: pytest ; extra == \"test\"\n"
      "Requires-Dist: kp-demo-device-gfx90a==2.0; extra == "
      "\"device-gfx90a\"\nKeywords: gpu\n"
      "\nThe description.\n\nKept byte for byte.\n");
  free(text);
  assert_int_equal(kp_metadata_add_line(&md, "no colon"),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kp_metadata_add_line(&md, "A: b\nC: d"),
                   KPACK_ERROR_INVALID_ARGUMENT);
  kp_metadata_free(&md);
}

static void test_malformed_metadata_is_invalid_metadata(void** state) {
  (void)state;
  static const char* const bad[] = {
      "Name: x\n",                       /* no Version */
      "Version: 1\n",                    /* no Name */
      "Name: x\nVersion: 1\nno colon\n", /* a line without ':' */
      " Name: x\nVersion: 1\n",          /* continues nothing */
      "Na me: x\nVersion: 1\n",          /* a space in a field name */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    kp_metadata md;
    assert_int_equal(kp_metadata_parse(bad[i], strlen(bad[i]), &md),
                     KPACK_ERROR_INVALID_METADATA);
    assert_int_equal(md.count, 0);
  }
  kp_metadata md;
  assert_int_equal(kp_metadata_parse("Name: x\0\nVersion: 1\n", 20, &md),
                   KPACK_ERROR_INVALID_METADATA);
}

/* ---- unpacking ----------------------------------------------------------- */

static void test_debian_wheels_unpack_as_pythons_zipfile_does(void** state) {
  (void)state;
  static const char* const names[] = {"pip", "setuptools"};
  for (size_t i = 0; i < 2; i++) {
    char* wheel_path = debian_wheel(names[i]);
    char* dir = kt_in_tmp("debian-unpacked");
    char* ref = kt_in_tmp("debian-reference");
    kt_rmtree(dir);
    kt_rmtree(ref);
    kp_wheel* w;
    assert_int_equal(kp_wheel_unpack(wheel_path, dir, &w), KPACK_SUCCESS);
    assert_string_equal(w->name.distribution, names[i]);
    assert_string_equal(w->name.tags, "py3-none-any");
    assert_string_equal(kp_metadata_get(&w->metadata, "Name"), names[i]);
    assert_true(w->root_is_purelib);
    assert_int_equal(w->tag_count, 1);
    assert_string_equal(w->tags[0], "py3-none-any");
    assert_true(w->file_count > 100);
    assert_non_null(strstr(w->dist_info, ".dist-info"));
    char command[1024];
    snprintf(command, sizeof(command),
             PYTHON " -m zipfile -e '%s' '%s' && diff -r '%s' '%s'", wheel_path,
             ref, ref, dir);
    assert_int_equal(sh(command, NULL), 0);
    kp_wheel_free(w);
    kt_rmtree(dir);
    kt_rmtree(ref);
    free(dir);
    free(ref);
    free(wheel_path);
  }
}

/* A wheel of the given entries; RECORD made right unless `record` gives
 * its text. */
static char* crafted_wheel(const char* name, const char* const* entries,
                           size_t count, const char* record) {
  char* path = kt_in_tmp(name);
  const char* all[32];
  char* rows = NULL;
  size_t rows_size = 0;
  FILE* f = open_memstream(&rows, &rows_size);
  for (size_t i = 0; i < count; i++) {
    all[2 * i] = entries[2 * i];
    all[2 * i + 1] = entries[2 * i + 1];
    uint8_t d[KP_SHA256_SIZE];
    kp_sha256(entries[2 * i + 1], strlen(entries[2 * i + 1]), d);
    /* base64url without padding, through Python's own encoder */
    char hexd[65];
    hex(d, sizeof(d), hexd);
    char command[256], *b64 = NULL;
    snprintf(command, sizeof(command),
             PYTHON
             " -c 'import base64,sys; print(base64.urlsafe_b64encode("
             "bytes.fromhex(sys.argv[1])).decode().rstrip(\"=\"))' %s",
             hexd);
    assert_int_equal(sh(command, &b64), 0);
    b64[strcspn(b64, "\n")] = '\0';
    fprintf(f, "%s,sha256=%s,%zu\n", entries[2 * i], b64,
            strlen(entries[2 * i + 1]));
    free(b64);
  }
  fprintf(f, "w-1.0.dist-info/RECORD,,\n");
  fclose(f);
  all[2 * count] = "w-1.0.dist-info/RECORD";
  all[2 * count + 1] = record ? record : rows;
  write_zip(path, all, count + 1, 6);
  free(rows);
  return path;
}

static const char* const good_entries[] = {
    "w/__init__.py",
    "x = 1\n",
    "w-1.0.dist-info/METADATA",
    "Metadata-Version: 2.1\nName: w\nVersion: 1.0\n",
    "w-1.0.dist-info/WHEEL",
    "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
};

static kpack_error_t unpack_status(const char* wheel_path) {
  char* dir = kt_in_tmp("crafted-out");
  kt_rmtree(dir);
  kp_wheel* w = NULL;
  kpack_error_t err = kp_wheel_unpack(wheel_path, dir, &w);
  if (err != KPACK_SUCCESS)
    assert_null(w);
  kp_wheel_free(w);
  kt_rmtree(dir);
  free(dir);
  return err;
}

static void test_unpack_checks_every_file_against_record(void** state) {
  (void)state;
  char* ok = crafted_wheel("w-1.0-py3-none-any.whl", good_entries, 3, NULL);
  assert_int_equal(unpack_status(ok), KPACK_SUCCESS);
  /* The same files, one of them changed after RECORD was made. */
  const char* changed[6];
  memcpy(changed, good_entries, sizeof(changed));
  changed[1] = "x = 2\n";
  char* rows = NULL;
  {
    size_t size;
    kp_zip* zip;
    assert_int_equal(kp_zip_open(ok, &zip), KPACK_SUCCESS);
    assert_int_equal(
        kp_zip_read_alloc(zip, kp_zip_find(zip, "w-1.0.dist-info/RECORD"),
                          1 << 20, &rows, &size),
        KPACK_SUCCESS);
    kp_zip_close(zip);
  }
  char* bad = crafted_wheel("w-1.0-py3-none-any.whl", changed, 3, rows);
  assert_int_equal(unpack_status(bad), KPACK_ERROR_INVALID_FORMAT);
  free(bad);
  /* A row missing, a row too many, a malformed row. */
  const char* const records[] = {
      "w-1.0.dist-info/RECORD,,\n",
      NULL, /* rows + a file the wheel lacks, below */
      "w/__init__.py,sha256=abc\n",
  };
  char* extra = NULL;
  assert_true(asprintf(&extra, "%sw/gone.py,sha256=x,1\n", rows) > 0);
  for (size_t i = 0; i < 3; i++) {
    char* w = crafted_wheel("w-1.0-py3-none-any.whl", good_entries, 3,
                            records[i] ? records[i] : extra);
    assert_int_equal(unpack_status(w), KPACK_ERROR_INVALID_METADATA);
    free(w);
  }
  free(extra);
  free(rows);
  free(ok);
}

/* A large file is hashed on the pipe's thread: a byte changed in it
 * after RECORD was made is still found. Python rewrites the wheel, the
 * file changed or (the control) not. */
static void test_unpack_checks_large_files_against_record(void** state) {
  (void)state;
  char *tree, *out;
  char* path = pack_sample("tree-large", "out-large", &tree, &out);
  static const char* const changed[] = {NULL, "kpdemo/data/blob.bin",
                                        "kpdemo/data/big.kpack"};
  for (size_t i = 0; i < 3; i++) {
    char* parent = kt_in_tmp("w-large");
    char* copy = kt_path(parent, "kp_demo-1.2.0-py3-none-any.whl");
    char* dir = kt_in_tmp("w-large-unpacked");
    kt_rmtree(dir);
    kt_mkdirs(parent);
    free(parent);
    char command[2048];
    snprintf(command, sizeof(command),
             PYTHON
             " -c 'import sys, zipfile\n"
             "src, dst, name = sys.argv[1:]\n"
             "with zipfile.ZipFile(src) as z, "
             "zipfile.ZipFile(dst, \"w\") as o:\n"
             "  for i in z.infolist():\n"
             "    d = z.read(i)\n"
             "    if i.filename == name:\n"
             "      d = d[:1200000] + bytes([d[1200000] ^ 1]) + "
             "d[1200001:]\n"
             "    o.writestr(i, d)\n' '%s' '%s' '%s'",
             path, copy, changed[i] != NULL ? changed[i] : "");
    assert_int_equal(sh(command, NULL), 0);
    kp_wheel* w = NULL;
    assert_int_equal(
        kp_wheel_unpack(copy, dir, &w),
        changed[i] != NULL ? KPACK_ERROR_INVALID_FORMAT : KPACK_SUCCESS);
    kp_wheel_free(w);
    kt_rmtree(dir);
    free(dir);
    free(copy);
  }
  kt_rmtree(out);
  free(path);
  free(out);
  free(tree);
}

static void test_unpack_refuses_names_that_leave_the_directory(void** state) {
  (void)state;
  static const char* const names[] = {"../evil.py", "/etc/evil", "w/./x.py",
                                      "w//x.py", "w/../../x"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    const char* entries[8];
    memcpy(entries, good_entries, 6 * sizeof(char*));
    entries[6] = names[i];
    entries[7] = "boom\n";
    char* w = crafted_wheel("w-1.0-py3-none-any.whl", entries, 4, NULL);
    assert_int_equal(unpack_status(w), KPACK_ERROR_INVALID_FORMAT);
    free(w);
  }
  char* evil = kt_in_tmp("evil.py");
  assert_int_equal(access(evil, F_OK), -1);
  free(evil);
}

static void test_unpack_needs_one_matching_dist_info(void** state) {
  (void)state;
  char* w = crafted_wheel("other-1.0-py3-none-any.whl", good_entries, 3, NULL);
  assert_int_equal(unpack_status(w), KPACK_ERROR_INVALID_FORMAT);
  free(w);
  w = crafted_wheel("w-2.0-py3-none-any.whl", good_entries, 3, NULL);
  assert_int_equal(unpack_status(w), KPACK_ERROR_INVALID_FORMAT);
  free(w);
  const char* no_wheel_file[4];
  memcpy(no_wheel_file, good_entries, sizeof(no_wheel_file));
  w = crafted_wheel("w-1.0-py3-none-any.whl", no_wheel_file, 2, NULL);
  assert_int_equal(unpack_status(w), KPACK_ERROR_INVALID_METADATA);
  free(w);
  const char* v2[6];
  memcpy(v2, good_entries, sizeof(v2));
  v2[5] = "Wheel-Version: 2.0\nRoot-Is-Purelib: true\n";
  w = crafted_wheel("w-1.0-py3-none-any.whl", v2, 3, NULL);
  assert_int_equal(unpack_status(w), KPACK_ERROR_UNSUPPORTED_VERSION);
  free(w);
}

static void test_unpack_wants_an_empty_directory(void** state) {
  (void)state;
  char* ok = crafted_wheel("w-1.0-py3-none-any.whl", good_entries, 3, NULL);
  char* dir = kt_in_tmp("full");
  kt_rmtree(dir);
  char* file = kt_tree_path(dir, "already");
  kt_write_file(file, "x", 1);
  kp_wheel* w;
  assert_int_equal(kp_wheel_unpack(ok, dir, &w), KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(w);
  assert_int_equal(
      kp_wheel_unpack("/nonexistent/w-1.0-py3-none-any.whl", dir, &w),
      KPACK_ERROR_FILE_NOT_FOUND);
  kt_rmtree(dir);
  free(file);
  free(dir);
  free(ok);
}

/* ---- packing ------------------------------------------------------------- */

static void test_packed_wheels_pass_wheel_unpack(void** state) {
  (void)state;
  char *tree, *out;
  char* path = pack_sample("tree", "out", &tree, &out);
  kt_assert_contains(path, "/kp_demo-1.2.0-py3-none-any.whl");
  char command[1024];
  snprintf(command, sizeof(command),
           "cd '%s' && " PYTHON
           " -m wheel unpack '%s' && "
           "grep -qx 'Tag: py3-none-any' "
           "kp_demo-1.2.0/kp_demo-1.2.0.dist-info/WHEEL && " PYTHON
           " -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
           "assert z.getinfo(\"kpdemo/tool.sh\").external_attr >> 16 == "
           "0o100755' '%s'",
           out, path, path);
  assert_int_equal(sh(command, NULL), 0);
  /* And it unpacks here too, RECORD checked. */
  char* again = kt_in_tmp("again");
  kt_rmtree(again);
  kp_wheel* w;
  assert_int_equal(kp_wheel_unpack(path, again, &w), KPACK_SUCCESS);
  assert_string_equal(w->dist_info, "kp_demo-1.2.0.dist-info");
  assert_string_equal(kp_metadata_get(&w->metadata, "Name"), "kp-demo");
  assert_int_equal(w->file_count, 7); /* 4 files, METADATA, WHEEL, RECORD */
  assert_string_equal(w->files[6].path, "kp_demo-1.2.0.dist-info/RECORD");
  /* The large files came back whole. */
  char* from = kt_tree_path(tree, "kpdemo/data/blob.bin");
  char* to = kt_tree_path(again, "kpdemo/data/blob.bin");
  assert_true(kt_same_file(from, to));
  free(from);
  free(to);
  from = kt_tree_path(tree, "kpdemo/data/big.kpack");
  to = kt_tree_path(again, "kpdemo/data/big.kpack");
  assert_true(kt_same_file(from, to));
  free(from);
  free(to);
  /* Stored as asked, deflated otherwise. */
  kp_zip* zip;
  assert_int_equal(kp_zip_open(path, &zip), KPACK_SUCCESS);
  assert_int_equal(
      kp_zip_entry_at(zip, kp_zip_find(zip, "kpdemo/data/big.kpack"))->method,
      KP_ZIP_STORED);
  assert_int_equal(
      kp_zip_entry_at(zip, kp_zip_find(zip, "kpdemo/data/blob.bin"))->method,
      KP_ZIP_DEFLATED);
  kp_zip_close(zip);
  kp_wheel_free(w);
  kt_rmtree(again);
  free(again);
  free(path);
  free(out);
  free(tree);
}

static void test_packing_twice_gives_the_same_bytes(void** state) {
  (void)state;
  char* tree = sample_tree("tree-twice");
  char* out1 = kt_in_tmp("out1");
  char* out2 = kt_in_tmp("out2");
  kt_mkdirs(out1);
  kt_mkdirs(out2);
  kp_wheel_pack_options o = sample_options();
  char *a, *b;
  assert_int_equal(kp_wheel_pack(tree, out1, &o, &a), KPACK_SUCCESS);
  /* Other times and other creation orders change nothing. */
  char command[512];
  snprintf(command, sizeof(command),
           "touch -d '2001-02-03 04:05:06' '%s/kpdemo/__init__.py' && "
           "cp -a '%s/kpdemo/data' '%s/d2' && rm -r '%s/kpdemo/data' && "
           "mv '%s/d2' '%s/kpdemo/data'",
           tree, tree, tree, tree, tree, tree);
  assert_int_equal(sh(command, NULL), 0);
  assert_int_equal(kp_wheel_pack(tree, out2, &o, &b), KPACK_SUCCESS);
  assert_true(kt_same_file(a, b));
  free(a);
  free(b);
  free(out1);
  free(out2);
  free(tree);
}

/* A host wheel whose extra pulls a device wheel, both packed here, then
 * installed by pip from the directory with no index. */
static void test_pip_installs_host_and_device_wheels_by_extra(void** state) {
  (void)state;
  char* tree = sample_tree("host");
  char* device = kt_in_tmp("device");
  kt_rmtree(device);
  char* p = kt_tree_path(device, "kpdemo/.kpack/kpdemo_gfx90a.kpack");
  kt_write_file(p, "device bytes", 12);
  free(p);
  char* out = kt_in_tmp("wheels");
  kt_rmtree(out);
  kt_mkdirs(out);
  static const char* const extra[] = {
      "Provides-Extra: device-gfx90a",
      "Requires-Dist: kp-demo-device-gfx90a==1.2.0; extra == "
      "\"device-gfx90a\""};
  kp_wheel_pack_options host = sample_options();
  host.extra_metadata = extra;
  host.extra_metadata_count = 2;
  kp_wheel_pack_options dev = sample_options();
  dev.project = "kp-demo-device-gfx90a";
  assert_int_equal(kp_wheel_pack(tree, out, &host, NULL), KPACK_SUCCESS);
  assert_int_equal(kp_wheel_pack(device, out, &dev, NULL), KPACK_SUCCESS);
  char* venv = kt_in_tmp("venv");
  kt_rmtree(venv);
  char command[2048];
  snprintf(command, sizeof(command),
           "unset PYTHONPATH; " PYTHON
           " -m venv '%s' && "
           "'%s/bin/python' -m pip install -q --no-index "
           "--disable-pip-version-check --find-links '%s' "
           "'kp-demo[device-gfx90a]' && "
           "'%s/bin/python' -m pip check && "
           "'%s/bin/python' -c 'import kpdemo, os; assert kpdemo.VALUE == 42; "
           "d = os.path.dirname(kpdemo.__file__); "
           "assert os.path.exists(os.path.join(d, \".kpack\", "
           "\"kpdemo_gfx90a.kpack\")); "
           "assert os.access(os.path.join(d, \"tool.sh\"), os.X_OK)'",
           venv, venv, out, venv, venv);
  assert_int_equal(sh(command, NULL), 0);
  kt_rmtree(venv);
  free(venv);
  free(out);
  free(device);
  free(tree);
}

/* Debian's setuptools wheel unpacked and packed again under its own name:
 * its dist-info files carry over, METADATA gets the extra lines, and
 * wheel unpack accepts the result. */
static void test_an_unpacked_wheel_packs_again(void** state) {
  (void)state;
  char* wheel_path = debian_wheel("setuptools");
  char* dir = kt_in_tmp("repack");
  char* out = kt_in_tmp("repacked");
  kt_rmtree(dir);
  kt_rmtree(out);
  kt_mkdirs(out);
  kp_wheel* w;
  assert_int_equal(kp_wheel_unpack(wheel_path, dir, &w), KPACK_SUCCESS);
  static const char* const extra[] = {"Provides-Extra: device-gfx942"};
  kp_wheel_pack_options o = {.project = kp_metadata_get(&w->metadata, "Name"),
                             .version = w->name.version,
                             .tags = w->name.tags,
                             .extra_metadata = extra,
                             .extra_metadata_count = 1,
                             .root_is_purelib = w->root_is_purelib,
                             .level = 6};
  char* path;
  assert_int_equal(kp_wheel_pack(dir, out, &o, &path), KPACK_SUCCESS);
  char command[1024];
  snprintf(command, sizeof(command),
           "cd '%s' && " PYTHON
           " -m wheel unpack -d u '%s' && "
           "grep -qx 'Provides-Extra: device-gfx942' u/*/*.dist-info/METADATA"
           " && test -f u/*/*.dist-info/entry_points.txt",
           out, path);
  assert_int_equal(sh(command, NULL), 0);
  kp_wheel_free(w);
  kt_rmtree(dir);
  kt_rmtree(out);
  free(path);
  free(dir);
  free(out);
  free(wheel_path);
}

/* A stand-in for the per-arch tree split: the generic tree and three
 * device trees with an archive each, two of them over KP_PIPE_MIN_SIZE;
 * with `user` set, a FIFO in one device tree, which no wheel can hold. */
static kpack_error_t fake_tree_split(void* user, const char* input_dir,
                                     const char* output_dir, const char* prefix,
                                     const char* archive_dir) {
  (void)input_dir;
  static const char* const trees[] = {"gfx1030", "gfx90a", "gfx942"};
  static const size_t sizes[] = {1500000, 1200000, 5000};
  char* p = kt_tree_path(output_dir, "generic/kpdemo/__init__.py");
  kt_write_file(p, "VALUE = 42\n", 11);
  free(p);
  for (size_t i = 0; i < 3; i++) {
    char* rel = NULL;
    assert_true(asprintf(&rel, "%s/%s/%s_%s.kpack", trees[i], archive_dir,
                         prefix, trees[i]) > 0);
    p = kt_tree_path(output_dir, rel);
    void* bytes = kt_pattern(sizes[i], (uint32_t)i + 20);
    kt_write_file(p, bytes, sizes[i]);
    free(bytes);
    free(p);
    free(rel);
  }
  if (user != NULL) {
    p = kt_tree_path(output_dir, "gfx90a/fifo");
    assert_int_equal(mkfifo(p, 0644), 0);
    free(p);
  }
  return KPACK_SUCCESS;
}

/* The wheels of a split are packed two at a time: every one is whole and
 * checks against its RECORD, two runs give the same bytes, and a wheel that
 * cannot be packed fails the run, named, leaving nothing. */
static void test_wheel_split_packs_wheels_side_by_side(void** state) {
  (void)state;
  char *tree, *wheels;
  char* fat = pack_sample("fat-tree", "fat-wheels", &tree, &wheels);
  kpack_wheel_split_options_t split = {.split_tree = fake_tree_split,
                                       .level = 1};
  char* outs[2] = {kt_in_tmp("split-1"), kt_in_tmp("split-2")};
  char why[512];
  for (int r = 0; r < 2; r++) {
    kt_rmtree(outs[r]);
    kpack_wheel_split_result_t* result;
    assert_int_equal(
        kpack_wheel_split(fat, outs[r], &split, &result, why, sizeof(why)),
        KPACK_SUCCESS);
    assert_int_equal(result->device_count, 3);
    assert_string_equal(result->trees[1], "gfx90a");
    for (size_t i = 0; i <= result->device_count; i++) {
      const char* path = i == 0 ? result->host : result->devices[i - 1];
      assert_true(strncmp(path, outs[r], strlen(outs[r])) == 0);
      char* dir = kt_in_tmp("split-unpacked");
      kt_rmtree(dir);
      kp_wheel* w;
      assert_int_equal(kp_wheel_unpack(path, dir, &w), KPACK_SUCCESS);
      kp_wheel_free(w);
      if (r == 1) {
        char* first = kt_path(outs[0], strrchr(path, '/') + 1);
        assert_true(kt_same_file(first, path));
        free(first);
      }
      kt_rmtree(dir);
      free(dir);
    }
    kpack_wheel_split_result_free(result);
  }
  /* One wheel fails: the run says which, and its output directory goes. */
  char* failed = kt_in_tmp("split-failed");
  kt_rmtree(failed);
  split.user = &split;
  kpack_wheel_split_result_t* result = NULL;
  assert_int_equal(
      kpack_wheel_split(fat, failed, &split, &result, why, sizeof(why)),
      KPACK_ERROR_INVALID_ARGUMENT);
  assert_null(result);
  kt_assert_contains(why, "cannot pack kp-demo-device-gfx90a 1.2.0 as a wheel");
  struct stat st;
  assert_int_equal(stat(failed, &st), -1);
  free(failed);
  for (int r = 0; r < 2; r++) {
    kt_rmtree(outs[r]);
    free(outs[r]);
  }
  free(fat);
  kt_rmtree(wheels);
  free(wheels);
  free(tree);
}

/* A wheel split into a directory holding an earlier run's wheels that
 * fails while it moves the new wheels there (a directory in the way of
 * the last one) leaves every earlier wheel as it was: none of the new
 * host wheel beside the old device wheels. */
static void test_wheel_split_failing_to_publish_keeps_the_earlier_wheels(
    void** state) {
  (void)state;
  char *tree, *wheels;
  char* fat = pack_sample("publish-tree", "publish-wheels", &tree, &wheels);
  kpack_wheel_split_options_t split = {.split_tree = fake_tree_split,
                                       .level = 1};
  char* out = kt_in_tmp("publish-out");
  kt_rmtree(out);
  char why[512];
  kpack_wheel_split_result_t* result;
  assert_int_equal(
      kpack_wheel_split(fat, out, &split, &result, why, sizeof(why)),
      KPACK_SUCCESS);
  /* An earlier build's host wheel, and a directory where the last device
   * wheel goes. */
  kt_write_file(result->host, "earlier host wheel", 18);
  const char* last = result->devices[result->device_count - 1];
  assert_int_equal(unlink(last), 0);
  char* blocker = kt_path(last, "keep");
  kt_mkdirs(last);
  kt_write_file(blocker, "keep", 4);
  char* before = kt_tree_state(out, true);
  kpack_wheel_split_result_t* again = NULL;
  assert_int_equal(
      kpack_wheel_split(fat, out, &split, &again, why, sizeof(why)),
      KPACK_ERROR_IO_ERROR);
  assert_null(again);
  kt_assert_contains(why, last);
  char* after = kt_tree_state(out, true);
  assert_string_equal(after, before);
  free(after);
  free(before);
  free(blocker);
  kpack_wheel_split_result_free(result);
  kt_rmtree(out);
  free(out);
  free(fat);
  kt_rmtree(wheels);
  free(wheels);
  free(tree);
}

static void test_pack_refuses_what_cannot_be_a_wheel(void** state) {
  (void)state;
  char* tree = sample_tree("tree-bad");
  char* out = kt_in_tmp("out-bad");
  kt_mkdirs(out);
  kp_wheel_pack_options o = sample_options();
  o.tags = "py3-none";
  assert_int_equal(kp_wheel_pack(tree, out, &o, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  o = sample_options();
  static const char* const bad_line[] = {"no colon here"};
  o.extra_metadata = bad_line;
  o.extra_metadata_count = 1;
  assert_int_equal(kp_wheel_pack(tree, out, &o, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  o = sample_options();
  char* fifo = kt_path(tree, "kpdemo/pipe");
  assert_int_equal(mkfifo(fifo, 0644), 0);
  assert_int_equal(kp_wheel_pack(tree, out, &o, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  unlink(fifo);
  char* a = kt_tree_path(tree, "a.dist-info/x");
  char* b = kt_tree_path(tree, "b.dist-info/y");
  kt_write_file(a, "", 0);
  kt_write_file(b, "", 0);
  assert_int_equal(kp_wheel_pack(tree, out, &o, NULL),
                   KPACK_ERROR_INVALID_ARGUMENT);
  assert_int_equal(kp_wheel_pack("/nonexistent", out, &o, NULL),
                   KPACK_ERROR_FILE_NOT_FOUND);
  /* Nothing is left behind in out. */
  char* listing = NULL;
  char command[512];
  snprintf(command, sizeof(command), "ls -A '%s'", out);
  assert_int_equal(sh(command, &listing), 0);
  assert_string_equal(listing, "");
  free(listing);
  free(a);
  free(b);
  free(fifo);
  free(out);
  free(tree);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pipe_runs_pieces_in_order_on_its_thread),
      cmocka_unit_test(test_pipe_stops_at_the_first_failure),
      cmocka_unit_test(test_sha256_gives_the_fips_180_digests),
      cmocka_unit_test(test_zip_round_trip_reads_what_was_written),
      cmocka_unit_test(test_zip_with_70000_entries_uses_zip64_records),
      cmocka_unit_test(test_zip_refuses_what_is_not_a_whole_zip),
      cmocka_unit_test(test_zip_reports_corrupt_data_and_unknown_methods),
      cmocka_unit_test(test_zip_refuses_two_entries_of_one_name),
      cmocka_unit_test(test_wheel_names_parse_into_their_parts),
      cmocka_unit_test(test_wheel_file_names_escape_project_and_version),
      cmocka_unit_test(test_metadata_formats_back_to_the_same_bytes),
      cmocka_unit_test(test_metadata_lines_join_their_kind),
      cmocka_unit_test(test_malformed_metadata_is_invalid_metadata),
      cmocka_unit_test(test_debian_wheels_unpack_as_pythons_zipfile_does),
      cmocka_unit_test(test_unpack_checks_every_file_against_record),
      cmocka_unit_test(test_unpack_checks_large_files_against_record),
      cmocka_unit_test(test_unpack_refuses_names_that_leave_the_directory),
      cmocka_unit_test(test_unpack_needs_one_matching_dist_info),
      cmocka_unit_test(test_unpack_wants_an_empty_directory),
      cmocka_unit_test(test_packed_wheels_pass_wheel_unpack),
      cmocka_unit_test(test_packing_twice_gives_the_same_bytes),
      cmocka_unit_test(test_pip_installs_host_and_device_wheels_by_extra),
      cmocka_unit_test(test_an_unpacked_wheel_packs_again),
      cmocka_unit_test(test_wheel_split_packs_wheels_side_by_side),
      cmocka_unit_test(
          test_wheel_split_failing_to_publish_keeps_the_earlier_wheels),
      cmocka_unit_test(test_pack_refuses_what_cannot_be_a_wheel),
  };
  return cmocka_run_group_tests(tests, kt_tmp_setup, kt_tmp_teardown);
}
