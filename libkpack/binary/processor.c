/* SPDX-License-Identifier: MIT
 *
 * The AMDGCN processors libkpack knows, and the one judge of a GPU target
 * name (kpack_target_check()): every command that takes an architecture or
 * an agent asks it, so a typo is refused the same way everywhere instead of
 * matching nothing, or everything.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "binary/processor.h"
#include "rocm_kpack/kpack_code_object.h"
#include "rocm_kpack/kpack_target.h"

/* EF_AMDGPU_MACH values of the AMDGCN processors (LLVM's BinaryFormat/ELF.h
 * and AMDGPUUsage), with the features each one has. */
static const kp_processor processors[] = {
    {0x20, 0, "gfx600"},
    {0x21, 0, "gfx601"},
    {0x22, 0, "gfx700"},
    {0x23, 0, "gfx701"},
    {0x24, 0, "gfx702"},
    {0x25, 0, "gfx703"},
    {0x26, 0, "gfx704"},
    {0x28, KP_XNACK, "gfx801"},
    {0x29, 0, "gfx802"},
    {0x2a, 0, "gfx803"},
    {0x2b, KP_XNACK, "gfx810"},
    {0x2c, KP_XNACK, "gfx900"},
    {0x2d, KP_XNACK, "gfx902"},
    {0x2e, KP_XNACK, "gfx904"},
    {0x2f, KP_XNACK | KP_SRAMECC, "gfx906"},
    {0x30, KP_XNACK | KP_SRAMECC, "gfx908"},
    {0x31, KP_XNACK, "gfx909"},
    {0x32, KP_XNACK, "gfx90c"},
    {0x33, KP_XNACK, "gfx1010"},
    {0x34, KP_XNACK, "gfx1011"},
    {0x35, KP_XNACK, "gfx1012"},
    {0x36, 0, "gfx1030"},
    {0x37, 0, "gfx1031"},
    {0x38, 0, "gfx1032"},
    {0x39, 0, "gfx1033"},
    {0x3a, 0, "gfx602"},
    {0x3b, 0, "gfx705"},
    {0x3c, 0, "gfx805"},
    {0x3d, 0, "gfx1035"},
    {0x3e, 0, "gfx1034"},
    {0x3f, KP_XNACK | KP_SRAMECC, "gfx90a"},
    {0x40, KP_XNACK | KP_SRAMECC, "gfx940"},
    {0x41, 0, "gfx1100"},
    {0x42, KP_XNACK, "gfx1013"},
    {0x43, 0, "gfx1150"},
    {0x44, 0, "gfx1103"},
    {0x45, 0, "gfx1036"},
    {0x46, 0, "gfx1101"},
    {0x47, 0, "gfx1102"},
    {0x48, 0, "gfx1200"},
    {0x49, 0, "gfx1250"},
    {0x4a, 0, "gfx1151"},
    {0x4b, KP_XNACK | KP_SRAMECC, "gfx941"},
    {0x4c, KP_XNACK | KP_SRAMECC, "gfx942"},
    {0x4e, 0, "gfx1201"},
    {0x4f, KP_XNACK | KP_SRAMECC, "gfx950"},
    {0x51, KP_XNACK, "gfx9-generic"},
    {0x52, KP_XNACK, "gfx10-1-generic"},
    {0x53, 0, "gfx10-3-generic"},
    {0x54, 0, "gfx11-generic"},
    {0x55, 0, "gfx1152"},
    {0x58, 0, "gfx1153"},
    {0x59, 0, "gfx12-generic"},
    {0x5a, 0, "gfx1251"},
    {0x5f, KP_XNACK | KP_SRAMECC, "gfx9-4-generic"},
};

#define KP_PROCESSOR_COUNT (sizeof(processors) / sizeof(processors[0]))

const kp_processor* kp_processor_by_mach(uint32_t mach) {
  for (size_t i = 0; i < KP_PROCESSOR_COUNT; i++)
    if (processors[i].mach == mach)
      return &processors[i];
  return NULL;
}

const kp_processor* kp_processor_by_name(const char* name, size_t len) {
  for (size_t i = 0; i < KP_PROCESSOR_COUNT; i++)
    if (strlen(processors[i].name) == len &&
        memcmp(processors[i].name, name, len) == 0)
      return &processors[i];
  return NULL;
}

KPACK_API bool kpack_processor_is_known(const char* name, size_t len) {
  return name != NULL && kp_processor_by_name(name, len) != NULL;
}

/* ---- target names -------------------------------------------------------- */

static bool refuse(char* why, size_t size, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool refuse(char* why, size_t size, const char* fmt, ...) {
  if (why != NULL && size > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* `s` without the first of `prefixes` it starts with. */
static const char* skip_prefix(const char* s, const char* const* prefixes,
                               size_t count) {
  for (size_t i = 0; i < count; i++)
    if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0)
      return s + strlen(prefixes[i]);
  return s;
}

KPACK_API bool kpack_target_check(const char* target, char* why, size_t size) {
  static const char* const amdgcn[] = {"hipv4-amdgcn-amd-amdhsa--",
                                       "amdgcn-amd-amdhsa--"};
  static const char* const spirv[] = {"hipv4-spirv64-amd-amdhsa--",
                                      "spirv64-amd-amdhsa--"};
  static const struct {
    const char* name;
    unsigned bit;
  } features[] = {{"sramecc", KP_SRAMECC}, {"xnack", KP_XNACK}};
  if (why != NULL && size > 0)
    why[0] = '\0';
  if (target == NULL || target[0] == '\0')
    return refuse(why, size, "the name is empty");
  if (strchr(target, ',') != NULL)
    return refuse(why, size, "a list of targets where one is expected");
  if (strcmp(skip_prefix(target, spirv, 2), "amdgcnspirv") == 0)
    return true;
  const char* p = skip_prefix(target, amdgcn, 2);
  size_t len = strcspn(p, ":");
  const kp_processor* proc = kp_processor_by_name(p, len);
  if (len == 0)
    return refuse(why, size, "no processor before ':'");
  if (proc == NULL)
    return refuse(why, size,
                  "'%.*s' is not a GPU processor kpack knows (such as "
                  "gfx90a, gfx942, gfx1100 or gfx9-generic)",
                  (int)len, p);
  unsigned seen = 0;
  size_t next = 0; /* features[] is in the order a target ID names them */
  for (p += len; *p == ':';) {
    size_t n = strcspn(++p, ":");
    char sign = n > 0 ? p[n - 1] : '\0';
    size_t name_len = sign == '+' || sign == '-' ? n - 1 : n;
    size_t f = 0;
    while (f < 2 && (strlen(features[f].name) != name_len ||
                     strncmp(p, features[f].name, name_len) != 0))
      f++;
    if (n == 0)
      return refuse(why, size, "an empty feature after ':'");
    if (f == 2)
      return refuse(why, size,
                    "'%.*s' is not a target feature (the features are "
                    "sramecc and xnack, each followed by + or -)",
                    (int)n, p);
    if (name_len == n)
      return refuse(why, size, "'%.*s' needs a sign: %.*s+ or %.*s-", (int)n, p,
                    (int)n, p, (int)n, p);
    if (!(proc->features & features[f].bit))
      return refuse(why, size, "%s has no %s setting", proc->name,
                    features[f].name);
    if (seen & features[f].bit)
      return refuse(why, size, "%s is set twice", features[f].name);
    if (f < next)
      return refuse(why, size,
                    "sramecc comes before xnack, as in "
                    "%s:sramecc+:xnack-",
                    proc->name);
    seen |= features[f].bit;
    next = f + 1;
    p += n;
  }
  return true;
}
