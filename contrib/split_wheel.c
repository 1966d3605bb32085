/* SPDX-License-Identifier: MIT
 *
 * `kpack split --wheel FAT.whl -o OUTDIR`: libkpack's kpack_wheel_split()
 * with the tree split of this program as its per-arch split. The tree
 * split is reached through one function only, the command's own entry
 * point given a command line (`split --per-arch -o DIR --prefix P
 * --archive-dir D ... INPUT`), so that the wheel split runs exactly the
 * code a tree split runs.
 */
#include "split_wheel.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "json.h"
#include "rocm_kpack/kpack_wheel.h"

#define SW_MAX_PASSED 64 /* options handed on to the tree split */

typedef struct sw_state {
  int (*tree_split)(int argc, char** argv);
  const char* passed[SW_MAX_PASSED]; /* --arch, --group, -j, ... */
  size_t passed_count;
  bool verbose;
  int status; /* the tree split's exit status */
} sw_state;

bool sw_wants_wheel(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      return false;
    if (strcmp(argv[i], "--wheel") == 0 || strncmp(argv[i], "--wheel=", 8) == 0)
      return true;
  }
  return false;
}

static kpack_error_t sw_split_tree(void* user, const char* input_dir,
                                   const char* output_dir, const char* prefix,
                                   const char* archive_dir) {
  sw_state* s = user;
  const char* argv[SW_MAX_PASSED + 16];
  int argc = 0;
  argv[argc++] = "split";
  argv[argc++] = "--per-arch";
  argv[argc++] = "-q";
  if (s->verbose)
    argv[argc++] = "-v";
  argv[argc++] = "-o";
  argv[argc++] = output_dir;
  argv[argc++] = "--prefix";
  argv[argc++] = prefix;
  argv[argc++] = "--archive-dir";
  argv[argc++] = archive_dir;
  for (size_t i = 0; i < s->passed_count; i++)
    argv[argc++] = s->passed[i];
  argv[argc++] = "--";
  argv[argc++] = input_dir;
  argv[argc] = NULL;
  optind = 0; /* a fresh getopt scan of the new command line */
  s->status = s->tree_split(argc, (char**)argv);
  if (s->status == CLI_OK)
    return KPACK_SUCCESS;
  return s->status == CLI_USAGE ? KPACK_ERROR_INVALID_ARGUMENT
                                : KPACK_ERROR_IO_ERROR;
}

static bool sw_pass(sw_state* s, const char* option, const char* value) {
  if (s->passed_count + 2 > SW_MAX_PASSED)
    return false;
  s->passed[s->passed_count++] = option;
  if (value != NULL)
    s->passed[s->passed_count++] = value;
  return true;
}

int sw_run(int argc, char** argv, int (*tree_split)(int argc, char** argv)) {
  enum {
    OPT_WHEEL = 256,
    OPT_ARCH,
    OPT_NO_COMPRESS,
    OPT_PER_ARCH,
    OPT_GROUP,
    OPT_RULES,
    OPT_JSON,
    OPT_REFUSED
  };
  static const struct option options[] = {
      {"wheel", required_argument, NULL, OPT_WHEEL},
      {"output", required_argument, NULL, 'o'},
      {"jobs", required_argument, NULL, 'j'},
      {"arch", required_argument, NULL, OPT_ARCH},
      {"level", required_argument, NULL, 'l'},
      {"no-compress", no_argument, NULL, OPT_NO_COMPRESS},
      {"per-arch", no_argument, NULL, OPT_PER_ARCH},
      {"group", required_argument, NULL, OPT_GROUP},
      {"rules", required_argument, NULL, OPT_RULES},
      {"json", no_argument, NULL, OPT_JSON},
      {"verbose", no_argument, NULL, 'v'},
      {"quiet", no_argument, NULL, 'q'},
      {"help", no_argument, NULL, 'h'},
      {"in-place", no_argument, NULL, OPT_REFUSED},
      {"prefix", required_argument, NULL, OPT_REFUSED},
      {"archive-dir", required_argument, NULL, OPT_REFUSED},
      {"dry-run", no_argument, NULL, OPT_REFUSED},
      {NULL, 0, NULL, 0}};
  const cli_command* cmd = &cli_split_command;
  sw_state s = {.tree_split = tree_split};
  const char *wheel = NULL, *outdir = NULL;
  bool quiet = false, json = false;
  int c, index = 0;
  double start = cli_seconds();

  optind = 0;
  while ((c = getopt_long(argc, argv, "o:j:l:vqh", options, &index)) != -1) {
    bool ok = true;
    switch (c) {
      case OPT_WHEEL:
        if (wheel != NULL)
          return cli_usage_error(cmd, "one --wheel at a time");
        wheel = optarg;
        break;
      case 'o':
        outdir = optarg;
        break;
      case 'j':
        ok = sw_pass(&s, "-j", optarg);
        break;
      case 'l':
        ok = sw_pass(&s, "-l", optarg);
        break;
      case OPT_ARCH:
        ok = sw_pass(&s, "--arch", optarg);
        break;
      case OPT_GROUP:
        ok = sw_pass(&s, "--group", optarg);
        break;
      case OPT_RULES:
        ok = sw_pass(&s, "--rules", optarg);
        break;
      case OPT_NO_COMPRESS:
        ok = sw_pass(&s, "--no-compress", NULL);
        break;
      case OPT_PER_ARCH:
        break; /* what a wheel split does anyway */
      case 'v':
        s.verbose = true;
        break;
      case 'q':
        quiet = true;
        break;
      case OPT_JSON:
        json = true;
        break;
      case 'h':
        return cli_print_manual(cmd);
      case OPT_REFUSED:
        return cli_usage_error(
            cmd,
            "--%s does not go with --wheel (a wheel split names and "
            "places its archives itself)",
            options[index].name);
      default:
        return cli_option_error(cmd, argv, "o:j:l:vqh");
    }
    if (!ok)
      return cli_usage_error(cmd, "too many options for a wheel split");
  }
  if (outdir == NULL)
    return cli_usage_error(cmd, "--wheel needs -o OUTDIR, where the wheels go");
  if (optind < argc)
    return cli_usage_error(cmd,
                           "--wheel takes no other input ('%s'): split one "
                           "wheel at a time",
                           argv[optind]);

  cli_catch_signals();
  /* Deflate level 1: 2% larger than level 6 on HIP host binaries, three
   * times faster. */
  kpack_wheel_split_options_t o = {
      .split_tree = sw_split_tree, .user = &s, .level = 1};
  kpack_wheel_split_result_t* r = NULL;
  char why[1024];
  kpack_error_t err =
      kpack_wheel_split(wheel, outdir, &o, &r, why, sizeof(why));
  if (err != KPACK_SUCCESS) {
    /* The tree split has said why already, with its own status. */
    if (s.status != CLI_OK)
      return s.status;
    cli_error("split: %s", why);
    return cli_interrupted() ? CLI_INTERRUPTED : CLI_FAIL;
  }
  double seconds = cli_seconds() - start;
  if (json) {
    printf("{\"host\": ");
    cli_json_string(stdout, r->host);
    printf(", \"devices\": [");
    for (size_t i = 0; i < r->device_count; i++) {
      printf("%s{\"tree\": ", i > 0 ? ", " : "");
      cli_json_string(stdout, r->trees[i]);
      printf(", \"extra\": ");
      cli_json_string(stdout, r->extras[i]);
      printf(", \"wheel\": ");
      cli_json_string(stdout, r->devices[i]);
      printf("}");
    }
    printf("], \"seconds\": %.3f}\n", seconds);
  } else if (!quiet) {
    char size[32];
    struct stat st;
    printf("host    %s (%s)\n", r->host,
           cli_human_size(size,
                          stat(r->host, &st) == 0 ? (uint64_t)st.st_size : 0));
    for (size_t i = 0; i < r->device_count; i++)
      printf(
          "device  %s (%s, extra %s)\n", r->devices[i],
          cli_human_size(
              size, stat(r->devices[i], &st) == 0 ? (uint64_t)st.st_size : 0),
          r->extras[i]);
    printf("%zu device wheel%s in %.1f s\n", r->device_count,
           r->device_count == 1 ? "" : "s", seconds);
  }
  kpack_wheel_split_result_free(r);
  return CLI_OK;
}
