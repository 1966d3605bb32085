/* SPDX-License-Identifier: MIT
 *
 * Symbol visibility for libkpack. The library is built with
 * -fvisibility=hidden; only declarations marked KPACK_API are exported.
 */
#ifndef ROCM_KPACK_EXPORT_H
#define ROCM_KPACK_EXPORT_H

#if defined(_WIN32)
#if defined(KPACK_BUILDING_LIBRARY)
#define KPACK_API __declspec(dllexport)
#else
#define KPACK_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define KPACK_API __attribute__((visibility("default")))
#else
#define KPACK_API
#endif

#endif /* ROCM_KPACK_EXPORT_H */
