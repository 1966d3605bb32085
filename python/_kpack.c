/* SPDX-License-Identifier: MIT
 *
 * _kpack: the C half of the `kpack` Python package, a thin layer over
 * libkpack's public API (linked statically). kpack/__init__.py wraps what
 * this returns (tuples) in named types and supplies the exception classes.
 * Every call that reads or decompresses releases the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rocm_kpack/kpack_ext.h>

PyMODINIT_FUNC PyInit__kpack(void);

/* ---- Errors ------------------------------------------------------------ */

/* kpack/__init__.py's _make_error(code, file, errno, where, detail): returns
 * the exception to raise. Set once at import by _set_error_factory(). */
static PyObject* error_factory;

/* Raises the kpack.Error subclass of `code`. `file` names the file the
 * failure is about (may be NULL), `err` the errno saved after the call (0:
 * none), `where` the item inside it (binary and arch, a record; may be
 * NULL) and `detail` what is wrong in words (may be NULL or ""). Returns
 * NULL for the caller to return. */
static PyObject* raise_error(kpack_error_t code, const char* file, int err,
                             const char* where, const char* detail) {
  PyObject* exc = NULL;
  if (error_factory == NULL) {
    PyErr_Format(PyExc_RuntimeError, "%s: %s", file ? file : "kpack",
                 kpack_error_string(code));
    return NULL;
  }
  exc = PyObject_CallFunction(error_factory, "iO&iO&O&", (int)code,
                              PyUnicode_DecodeFSDefault, file ? file : "", err,
                              PyUnicode_DecodeFSDefault, where ? where : "",
                              PyUnicode_DecodeFSDefault, detail ? detail : "");
  if (exc != NULL) {
    PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
    Py_DECREF(exc);
  }
  return NULL;
}

static PyObject* set_error_factory(PyObject* self, PyObject* factory) {
  (void)self;
  if (!PyCallable_Check(factory)) {
    PyErr_SetString(PyExc_TypeError, "the error factory must be callable");
    return NULL;
  }
  Py_INCREF(factory);
  Py_XSETREF(error_factory, factory);
  Py_RETURN_NONE;
}

/* ---- Conversions ------------------------------------------------------- */

/* Names in archives are bytes; they round-trip through str with
 * surrogateescape, as file names do. */
static PyObject* name_to_str(const char* s) {
  return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "surrogateescape");
}

/* A str argument as a NUL-terminated name (bytes object in *out). */
static int str_to_name(PyObject* arg, void* out) {
  PyObject** bytes = out;
  if (arg == NULL) { /* cleanup call */
    Py_CLEAR(*bytes);
    return 1;
  }
  if (!PyUnicode_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "a name must be str, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return 0;
  }
  *bytes = PyUnicode_AsEncodedString(arg, "utf-8", "surrogateescape");
  if (*bytes == NULL)
    return 0;
  if (strlen(PyBytes_AS_STRING(*bytes)) != (size_t)PyBytes_GET_SIZE(*bytes)) {
    Py_CLEAR(*bytes);
    PyErr_SetString(PyExc_ValueError, "embedded NUL character in a name");
    return 0;
  }
  return Py_CLEANUP_SUPPORTED;
}

/* A count the metadata note may leave out: None when absent. */
static PyObject* optional_count(const kpack_co_kernel_t* k, uint32_t bit,
                                uint64_t value) {
  if ((k->present & bit) == 0)
    Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(value);
}

/* (name, symbol, vgpr_count, sgpr_count, agpr_count,
 *  group_segment_fixed_size, private_segment_fixed_size,
 *  kernarg_segment_size, wavefront_size, max_flat_workgroup_size,
 *  vgpr_spill_count, sgpr_spill_count) */
static PyObject* kernel_tuple(const kpack_co_kernel_t* k) {
  return Py_BuildValue(
      "(NNNNNNNNNNNN)", name_to_str(k->name),
      (k->present & KPACK_CO_SYMBOL) ? name_to_str(k->symbol)
                                     : Py_NewRef(Py_None),
      optional_count(k, KPACK_CO_VGPR_COUNT, k->vgpr_count),
      optional_count(k, KPACK_CO_SGPR_COUNT, k->sgpr_count),
      optional_count(k, KPACK_CO_AGPR_COUNT, k->agpr_count),
      optional_count(k, KPACK_CO_GROUP_SEGMENT_FIXED_SIZE,
                     k->group_segment_fixed_size),
      optional_count(k, KPACK_CO_PRIVATE_SEGMENT_FIXED_SIZE,
                     k->private_segment_fixed_size),
      optional_count(k, KPACK_CO_KERNARG_SEGMENT_SIZE, k->kernarg_segment_size),
      optional_count(k, KPACK_CO_WAVEFRONT_SIZE, k->wavefront_size),
      optional_count(k, KPACK_CO_MAX_FLAT_WORKGROUP_SIZE,
                     k->max_flat_workgroup_size),
      optional_count(k, KPACK_CO_VGPR_SPILL_COUNT, k->vgpr_spill_count),
      optional_count(k, KPACK_CO_SGPR_SPILL_COUNT, k->sgpr_spill_count));
}

/* (target, version, (kernel_tuple, ...)) of a parsed code object. */
static PyObject* code_object_tuple(const kpack_code_object_t* co) {
  kpack_code_object_info_t info;
  PyObject* kernels = NULL;
  kpack_code_object_get_info(co, &info);
  kernels = PyTuple_New((Py_ssize_t)info.kernel_count);
  if (kernels == NULL)
    return NULL;
  for (size_t i = 0; i < info.kernel_count; i++) {
    kpack_co_kernel_t k;
    kpack_code_object_get_kernel(co, i, &k);
    PyObject* t = kernel_tuple(&k);
    if (t == NULL) {
      Py_DECREF(kernels);
      return NULL;
    }
    PyTuple_SET_ITEM(kernels, (Py_ssize_t)i, t);
  }
  return Py_BuildValue("(NIN)", name_to_str(info.target), info.version,
                       kernels);
}

/* ---- Archive ----------------------------------------------------------- */

/* An open archive. `busy` counts the calls running with the GIL released;
 * close() while one runs only marks the archive closed, and the last such
 * call closes it. Both fields change only with the GIL held. */
typedef struct {
  PyObject ob_base;
  kpack_archive_t archive;
  PyObject* path; /* str, as given */
  int busy;
  int closed;
} ArchiveObject;

static PyTypeObject ArchiveType;
static PyTypeObject KernelIterType;

/* Takes the archive for a call; NULL with ValueError once closed. */
static kpack_archive_t archive_enter(ArchiveObject* self) {
  if (self->closed) {
    PyErr_SetString(PyExc_ValueError, "I/O operation on closed archive");
    return NULL;
  }
  self->busy++;
  return self->archive;
}

static void archive_leave(ArchiveObject* self) {
  if (--self->busy == 0 && self->closed && self->archive != NULL) {
    kpack_close(self->archive);
    self->archive = NULL;
  }
}

static const char* archive_path(ArchiveObject* self) {
  const char* p = self->archive ? kpack_get_path(self->archive) : NULL;
  return p ? p : "";
}

static PyObject* kp_open(PyObject* module, PyObject* arg) {
  PyObject* fspath = NULL;
  ArchiveObject* self = NULL;
  kpack_archive_t archive = NULL;
  kpack_error_t err;
  int saved_errno;
  (void)module;
  if (!PyUnicode_FSConverter(arg, &fspath))
    return NULL;
  const char* path = PyBytes_AS_STRING(fspath);
  Py_BEGIN_ALLOW_THREADS;
  err = kpack_open(path, &archive);
  saved_errno = errno;
  Py_END_ALLOW_THREADS;
  if (err != KPACK_SUCCESS) {
    char why[512] = "";
    /* errno tells a missing or unreadable file; the diagnosis the rest. */
    if (err != KPACK_ERROR_FILE_NOT_FOUND && err != KPACK_ERROR_IO_ERROR) {
      Py_BEGIN_ALLOW_THREADS;
      kpack_archive_diagnose(path, why, sizeof(why));
      Py_END_ALLOW_THREADS;
      saved_errno = 0;
    }
    raise_error(err, path, saved_errno, NULL, why);
    goto done;
  }
  self = PyObject_New(ArchiveObject, &ArchiveType);
  if (self == NULL) {
    kpack_close(archive);
    goto done;
  }
  self->archive = archive;
  self->busy = 0;
  self->closed = 0;
  self->path = PyUnicode_DecodeFSDefault(path);
  if (self->path == NULL)
    Py_CLEAR(self);
done:
  Py_XDECREF(fspath);
  return (PyObject*)self;
}

static void archive_dealloc(ArchiveObject* self) {
  /* No call can be running: each holds a reference. */
  kpack_close(self->archive);
  Py_XDECREF(self->path);
  PyObject_Free(self);
}

static PyObject* archive_close(ArchiveObject* self, PyObject* unused) {
  (void)unused;
  self->closed = 1;
  if (self->busy == 0 && self->archive != NULL) {
    kpack_close(self->archive);
    self->archive = NULL;
  }
  Py_RETURN_NONE;
}

/* A tuple of `count` names from get(archive, i, &name). */
static PyObject* name_tuple(ArchiveObject* self, size_t count,
                            kpack_error_t (*get)(kpack_archive_t, size_t,
                                                 const char**)) {
  PyObject* t = PyTuple_New((Py_ssize_t)count);
  for (size_t i = 0; t != NULL && i < count; i++) {
    const char* name = "";
    get(self->archive, i, &name);
    PyObject* s = name_to_str(name);
    if (s == NULL)
      Py_CLEAR(t);
    else
      PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
  }
  return t;
}

static PyObject* archive_arches(ArchiveObject* self, PyObject* unused) {
  size_t n = 0;
  (void)unused;
  if (archive_enter(self) == NULL)
    return NULL;
  kpack_get_architecture_count(self->archive, &n);
  PyObject* t = name_tuple(self, n, kpack_get_architecture);
  archive_leave(self);
  return t;
}

static PyObject* archive_binaries(ArchiveObject* self, PyObject* unused) {
  size_t n = 0;
  (void)unused;
  if (archive_enter(self) == NULL)
    return NULL;
  kpack_get_binary_count(self->archive, &n);
  PyObject* t = name_tuple(self, n, kpack_get_binary);
  archive_leave(self);
  return t;
}

/* (group_name, gfx_arch_family, compression scheme name, kernel count) */
static PyObject* archive_header(ArchiveObject* self, PyObject* unused) {
  const char *group = "", *family = "";
  kpack_compression_scheme_t scheme = KPACK_COMPRESSION_NOOP;
  size_t kernels = 0;
  (void)unused;
  if (archive_enter(self) == NULL)
    return NULL;
  kpack_get_group_name(self->archive, &group);
  kpack_get_gfx_arch_family(self->archive, &family);
  kpack_get_compression_scheme(self->archive, &scheme);
  kpack_get_kernel_count(self->archive, &kernels);
  const char* name = kpack_compression_scheme_name(scheme);
  PyObject* t = Py_BuildValue("(NNsn)", name_to_str(group), name_to_str(family),
                              name ? name : "", (Py_ssize_t)kernels);
  archive_leave(self);
  return t;
}

/* "binary arch", for messages. */
static void where_kernel(char* buf, size_t size, const char* binary,
                         const char* arch) {
  snprintf(buf, size, "%s %s", binary, arch);
}

static PyObject* archive_read(ArchiveObject* self, PyObject* args) {
  PyObject *binary = NULL, *arch = NULL, *data = NULL;
  kpack_kernel_info_t info;
  kpack_error_t err;
  size_t got = 0;
  int saved_errno = 0;
  if (!PyArg_ParseTuple(args, "O&O&:read", str_to_name, &binary, str_to_name,
                        &arch))
    goto done;
  if (archive_enter(self) == NULL)
    goto done;
  const char* b = PyBytes_AS_STRING(binary);
  const char* a = PyBytes_AS_STRING(arch);
  err = kpack_get_kernel_info(self->archive, b, a, &info);
  if (err == KPACK_SUCCESS && info.size > (uint64_t)PY_SSIZE_T_MAX)
    err = KPACK_ERROR_OUT_OF_MEMORY;
  if (err == KPACK_SUCCESS) {
    /* Decompressed straight into the bytes object, not yet shared. */
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)info.size);
    if (data == NULL) {
      archive_leave(self);
      goto done;
    }
    char* buffer = PyBytes_AS_STRING(data);
    kpack_archive_t archive = self->archive;
    Py_BEGIN_ALLOW_THREADS;
    err = kpack_read_kernel(archive, b, a, buffer, (size_t)info.size, &got);
    saved_errno = errno;
    Py_END_ALLOW_THREADS;
  }
  if (err != KPACK_SUCCESS) {
    char where[1024];
    Py_CLEAR(data);
    where_kernel(where, sizeof(where), b, a);
    raise_error(err, archive_path(self),
                err == KPACK_ERROR_IO_ERROR ? saved_errno : 0, where, NULL);
  }
  archive_leave(self);
done:
  Py_XDECREF(binary);
  Py_XDECREF(arch);
  return data;
}

static PyObject* archive_binary_arches(ArchiveObject* self, PyObject* args) {
  PyObject *binary = NULL, *result = NULL;
  size_t n = 0;
  if (!PyArg_ParseTuple(args, "O&:binary_arches", str_to_name, &binary))
    return NULL;
  if (archive_enter(self) == NULL)
    goto done;
  const char* b = PyBytes_AS_STRING(binary);
  kpack_error_t err = kpack_get_binary_arch_count(self->archive, b, &n);
  if (err != KPACK_SUCCESS) {
    raise_error(err, archive_path(self), 0, b, NULL);
  } else {
    result = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; result != NULL && i < n; i++) {
      const char* arch = "";
      kpack_get_binary_arch(self->archive, b, i, &arch);
      PyObject* s = name_to_str(arch);
      if (s == NULL)
        Py_CLEAR(result);
      else
        PyTuple_SET_ITEM(result, (Py_ssize_t)i, s);
    }
  }
  archive_leave(self);
done:
  Py_XDECREF(binary);
  return result;
}

static PyObject* archive_kernels(ArchiveObject* self, PyObject* args);

static PyMethodDef archive_methods[] = {
    {"close", (PyCFunction)archive_close, METH_NOARGS, NULL},
    {"arches", (PyCFunction)archive_arches, METH_NOARGS, NULL},
    {"binaries", (PyCFunction)archive_binaries, METH_NOARGS, NULL},
    {"header", (PyCFunction)archive_header, METH_NOARGS, NULL},
    {"read", (PyCFunction)archive_read, METH_VARARGS, NULL},
    {"binary_arches", (PyCFunction)archive_binary_arches, METH_VARARGS, NULL},
    {"kernels", (PyCFunction)archive_kernels, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject* archive_get_closed(ArchiveObject* self, void* unused) {
  (void)unused;
  return PyBool_FromLong(self->closed);
}

static PyObject* archive_get_path(ArchiveObject* self, void* unused) {
  (void)unused;
  return Py_NewRef(self->path);
}

static PyGetSetDef archive_getset[] = {
    {"closed", (getter)archive_get_closed, NULL, NULL, NULL},
    {"path", (getter)archive_get_path, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ArchiveType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kpack._kpack.Archive",
    .tp_basicsize = sizeof(ArchiveObject),
    .tp_dealloc = (destructor)archive_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An open kpack archive (see kpack.Archive).",
    .tp_methods = archive_methods,
    .tp_getset = archive_getset,
};

/* ---- Kernel records ---------------------------------------------------- */

/* Walks every kernel in the order of kpack_get_binary() and
 * kpack_get_binary_arch(); with `decode`, each code object's kernels are
 * read from the start of its bytes (kpack_kernel_code_object()). */
typedef struct {
  PyObject ob_base;
  ArchiveObject* archive;
  size_t binary, arch, binary_count;
  int decode;
} KernelIterObject;

static PyObject* archive_kernels(ArchiveObject* self, PyObject* args) {
  int decode = 1;
  size_t count = 0;
  if (!PyArg_ParseTuple(args, "|p:kernels", &decode))
    return NULL;
  if (archive_enter(self) == NULL)
    return NULL;
  kpack_get_binary_count(self->archive, &count);
  archive_leave(self);
  KernelIterObject* it = PyObject_New(KernelIterObject, &KernelIterType);
  if (it == NULL)
    return NULL;
  it->archive = (ArchiveObject*)Py_NewRef(self);
  it->binary = 0;
  it->arch = 0;
  it->binary_count = count;
  it->decode = decode;
  return (PyObject*)it;
}

static void kernel_iter_dealloc(KernelIterObject* it) {
  Py_XDECREF(it->archive);
  PyObject_Free(it);
}

/* (binary, arch, size, stored_size, type, metadata bytes or None,
 *  code_object_tuple or None) */
static PyObject* kernel_iter_next(KernelIterObject* it) {
  ArchiveObject* self = it->archive;
  kpack_kernel_entry_t e;
  kpack_code_object_t* co = NULL;
  PyObject* result = NULL;
  kpack_archive_t archive = archive_enter(self);
  if (archive == NULL)
    return NULL;
  for (;;) {
    size_t arches = 0;
    if (it->binary >= it->binary_count)
      goto done; /* exhausted: NULL without an exception */
    kpack_get_binary_arch_count_at(archive, it->binary, &arches);
    if (it->arch < arches)
      break;
    it->binary++;
    it->arch = 0;
  }
  kpack_get_kernel_entry(archive, it->binary, it->arch, &e);
  it->arch++;
  if (it->decode && strcmp(e.info.type, "hsaco") == 0) {
    kpack_error_t err;
    Py_BEGIN_ALLOW_THREADS;
    err = kpack_kernel_code_object(archive, e.binary, e.arch, &co, NULL);
    Py_END_ALLOW_THREADS;
    if (err != KPACK_SUCCESS) {
      char where[1024];
      where_kernel(where, sizeof(where), e.binary, e.arch);
      raise_error(err, archive_path(self), 0, where, NULL);
      goto done;
    }
  }
  PyObject* metadata =
      e.metadata != NULL
          ? PyBytes_FromStringAndSize(e.metadata, (Py_ssize_t)e.metadata_size)
          : Py_NewRef(Py_None);
  result = Py_BuildValue(
      "(NNKKNNN)", name_to_str(e.binary), name_to_str(e.arch),
      (unsigned long long)e.info.size, (unsigned long long)e.info.stored_size,
      name_to_str(e.info.type), metadata,
      co != NULL ? code_object_tuple(co) : Py_NewRef(Py_None));
done:
  kpack_code_object_free(co);
  archive_leave(self);
  return result;
}

static PyTypeObject KernelIterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kpack._kpack.KernelIterator",
    .tp_basicsize = sizeof(KernelIterObject),
    .tp_dealloc = (destructor)kernel_iter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)kernel_iter_next,
};

/* ---- Code objects ------------------------------------------------------ */

static PyObject* kp_parse_code_object(PyObject* module, PyObject* arg) {
  Py_buffer view;
  kpack_code_object_t* co = NULL;
  kpack_error_t err;
  (void)module;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS;
  err = kpack_code_object_parse(view.buf, (size_t)view.len, &co);
  Py_END_ALLOW_THREADS;
  PyBuffer_Release(&view);
  if (err != KPACK_SUCCESS)
    return raise_error(err, NULL, 0, "code object", NULL);
  PyObject* t = code_object_tuple(co);
  kpack_code_object_free(co);
  return t;
}

/* ---- Loading a binary's code objects ------------------------------------ */

/* One loaded code object, gathered with the GIL released. */
typedef struct {
  size_t record;
  uint32_t co_index;
  char* kernel; /* "kernel_name#co_index" */
  void* data;
  size_t size;
  char *archive, *arch, *target; /* from the loader's RESULT event */
} load_item;

typedef struct {
  load_item* items;
  size_t count;
  load_item* current; /* the record being searched, for the trace hook */
  kpack_error_t err;
  int saved_errno;
  char where[1024];
  char detail[1024];
} load_run;

static void load_trace(const kpack_trace_event_t* ev, void* user) {
  load_run* run = user;
  load_item* it = run->current;
  if (ev->kind != KPACK_TRACE_RESULT || ev->status != KPACK_SUCCESS ||
      it == NULL)
    return;
  free(it->archive);
  free(it->arch);
  free(it->target);
  it->archive = strdup(ev->path ? ev->path : "");
  it->arch = strdup(ev->arch ? ev->arch : "");
  it->target = strdup(ev->target ? ev->target : "");
}

static void load_run_free(load_run* run) {
  for (size_t i = 0; i < run->count; i++) {
    load_item* it = &run->items[i];
    free(it->kernel);
    kpack_free_code_object(it->data);
    free(it->archive);
    free(it->arch);
    free(it->target);
  }
  free(run->items);
}

/* What the HIP runtime does for each record of a kpack-ified binary: one
 * loader cache, kpack_load_code_object()'s search with the record's kernel
 * name, search paths and index (kpack_resolve_code_object(), the same
 * search over the fields the HIPK map holds). Stops at the first failure,
 * which run->err, where and detail describe. */
static void load_binary(const char* path, const char* const* arches,
                        size_t arch_count, load_run* run) {
  kpack_host_t* host = NULL;
  kpack_cache_t cache = NULL;
  kpack_host_info_t info;
  kpack_error_t err = kpack_host_open(path, &host);
  run->saved_errno = errno;
  if (err != KPACK_SUCCESS) {
    if (err != KPACK_ERROR_FILE_NOT_FOUND && err != KPACK_ERROR_IO_ERROR) {
      kpack_host_diagnose(path, run->detail, sizeof(run->detail));
      run->saved_errno = 0;
    }
    goto fail;
  }
  run->saved_errno = 0;
  kpack_host_get_info(host, &info);
  if (info.kind != KPACK_HOST_KPACKIFIED) {
    err = KPACK_ERROR_INVALID_FORMAT;
    snprintf(run->detail, sizeof(run->detail), "%s",
             info.kind == KPACK_HOST_FAT
                 ? "a fat binary: its device code is in .hip_fatbin, which "
                   "the HIP runtime loads without the kpack loader"
                 : "no HIP device code (no .hipFatBinSegment, no "
                   ".hip_fatbin)");
    goto fail;
  }
  run->items =
      calloc(info.wrapper_count ? info.wrapper_count : 1, sizeof(*run->items));
  err = run->items ? kpack_cache_create(&cache) : KPACK_ERROR_OUT_OF_MEMORY;
  if (err != KPACK_SUCCESS)
    goto fail;
  kpack_cache_set_trace(cache, load_trace, run);
  for (size_t i = 0; i < info.wrapper_count; i++) {
    kpack_host_wrapper_t w;
    kpack_host_get_wrapper(host, i, &w);
    snprintf(run->where, sizeof(run->where), "record %zu", i);
    err = w.status;
    if (err == KPACK_SUCCESS &&
        (w.magic != KPACK_HOST_HIPK_MAGIC || w.reserved > UINT32_MAX))
      err = KPACK_ERROR_INVALID_FORMAT;
    if (err != KPACK_SUCCESS) {
      snprintf(run->detail, sizeof(run->detail), "%s",
               w.status != KPACK_SUCCESS ? kpack_host_problem_string(w.problem)
               : w.magic != KPACK_HOST_HIPK_MAGIC
                   ? "a HIPF record: its device code is in .hip_fatbin"
                   : "the code object index does not fit 32 bits");
      goto fail;
    }
    load_item* it = &run->items[run->count++];
    it->record = i;
    it->co_index = (uint32_t)w.reserved;
    if (asprintf(&it->kernel, "%s#%u", w.kernel_name, it->co_index) < 0) {
      it->kernel = NULL;
      err = KPACK_ERROR_OUT_OF_MEMORY;
      goto fail;
    }
    snprintf(run->where, sizeof(run->where), "record %zu (%s)", i, it->kernel);
    run->current = it;
    err = kpack_resolve_code_object(cache, w.kernel_name, w.search_paths,
                                    w.search_path_count, path, it->co_index,
                                    arches, arch_count, &it->data, &it->size);
    run->current = NULL;
    if (err == KPACK_SUCCESS &&
        (it->archive == NULL || it->arch == NULL || it->target == NULL))
      err = KPACK_ERROR_OUT_OF_MEMORY;
    if (err != KPACK_SUCCESS)
      goto fail;
  }
  run->where[0] = '\0';
  kpack_cache_destroy(cache);
  kpack_host_close(host);
  return;
fail:
  run->err = err;
  kpack_cache_destroy(cache);
  kpack_host_close(host);
}

static PyObject* kp_load(PyObject* module, PyObject* args) {
  PyObject *fspath = NULL, *arch_arg = NULL, *arch_seq = NULL, *result = NULL;
  PyObject** arch_bytes = NULL;
  const char** arches = NULL;
  Py_ssize_t n = 0;
  load_run run = {0};
  (void)module;
  if (!PyArg_ParseTuple(args, "O&O:load", PyUnicode_FSConverter, &fspath,
                        &arch_arg))
    return NULL;
  if (PyUnicode_Check(arch_arg) || PyBytes_Check(arch_arg)) {
    PyErr_SetString(PyExc_TypeError,
                    "arches must be a sequence of str, not one str");
    goto done;
  }
  arch_seq = PySequence_Fast(arch_arg, "arches must be a sequence of str");
  if (arch_seq == NULL)
    goto done;
  n = PySequence_Fast_GET_SIZE(arch_seq);
  arch_bytes = PyMem_Calloc((size_t)n + 1, sizeof(*arch_bytes));
  arches = PyMem_Calloc((size_t)n + 1, sizeof(*arches));
  if (arch_bytes == NULL || arches == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    if (!str_to_name(PySequence_Fast_GET_ITEM(arch_seq, i), &arch_bytes[i]))
      goto done;
    arches[i] = PyBytes_AS_STRING(arch_bytes[i]);
  }
  const char* path = PyBytes_AS_STRING(fspath);
  if (n == 0) {
    raise_error(KPACK_ERROR_INVALID_ARGUMENT, path, 0, NULL,
                "no architecture given");
    goto done;
  }
  Py_BEGIN_ALLOW_THREADS;
  load_binary(path, arches, (size_t)n, &run);
  Py_END_ALLOW_THREADS;
  if (run.err != KPACK_SUCCESS) {
    raise_error(run.err, path, run.saved_errno, run.where, run.detail);
    goto done;
  }
  result = PyList_New((Py_ssize_t)run.count);
  for (size_t i = 0; result != NULL && i < run.count; i++) {
    load_item* it = &run.items[i];
    PyObject* t = Py_BuildValue("(nINNNNy#)", (Py_ssize_t)it->record,
                                (unsigned)it->co_index, name_to_str(it->kernel),
                                name_to_str(it->arch), name_to_str(it->target),
                                PyUnicode_DecodeFSDefault(it->archive),
                                (const char*)it->data, (Py_ssize_t)it->size);
    if (t == NULL)
      Py_CLEAR(result);
    else
      PyList_SET_ITEM(result, (Py_ssize_t)i, t);
  }
done:
  load_run_free(&run);
  for (Py_ssize_t i = 0; arch_bytes != NULL && i < n; i++)
    Py_XDECREF(arch_bytes[i]);
  PyMem_Free(arch_bytes);
  PyMem_Free(arches);
  Py_XDECREF(arch_seq);
  Py_XDECREF(fspath);
  return result;
}

/* ---- Module ------------------------------------------------------------ */

static PyObject* kp_error_name(PyObject* module, PyObject* arg) {
  (void)module;
  long code = PyLong_AsLong(arg);
  if (code == -1 && PyErr_Occurred())
    return NULL;
  return PyUnicode_FromString(kpack_error_string((kpack_error_t)code));
}

static PyMethodDef module_methods[] = {
    {"open", kp_open, METH_O, NULL},
    {"load", kp_load, METH_VARARGS, NULL},
    {"parse_code_object", kp_parse_code_object, METH_O, NULL},
    {"error_name", kp_error_name, METH_O, NULL},
    {"_set_error_factory", set_error_factory, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kpack._kpack",
    .m_doc = "libkpack, for the kpack package (import kpack instead).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__kpack(void) {
  if (PyType_Ready(&ArchiveType) < 0 || PyType_Ready(&KernelIterType) < 0)
    return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL)
    return NULL;
  if (PyModule_AddStringConstant(m, "VERSION", KPACK_VERSION_STRING) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
