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

/* ---- The producer: arguments, messages, progress ------------------------ */

/* A sequence of str (names) or, with `paths`, of paths (str, bytes,
 * os.PathLike), as the NUL-terminated strings libkpack takes. */
typedef struct {
  PyObject** owners; /* bytes objects holding the strings */
  const char** v;
  size_t count;
} strv;

static void strv_clear(strv* s) {
  for (size_t i = 0; s->owners != NULL && i < s->count; i++)
    Py_XDECREF(s->owners[i]);
  PyMem_Free(s->owners);
  PyMem_Free(s->v);
  memset(s, 0, sizeof(*s));
}

static int strv_init(strv* s, PyObject* arg, int paths, const char* what) {
  PyObject* seq = NULL;
  memset(s, 0, sizeof(*s));
  /* One str alone would be taken letter by letter. */
  if (PyUnicode_Check(arg) || PyBytes_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "%s must be a sequence, not one %.100s", what,
                 Py_TYPE(arg)->tp_name);
    return 0;
  }
  seq = PySequence_Fast(arg, "");
  if (seq == NULL) {
    PyErr_Format(PyExc_TypeError, "%s must be a sequence, not %.100s", what,
                 Py_TYPE(arg)->tp_name);
    return 0;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  s->owners = PyMem_Calloc((size_t)n + 1, sizeof(*s->owners));
  s->v = PyMem_Calloc((size_t)n + 1, sizeof(*s->v));
  if (s->owners == NULL || s->v == NULL) {
    PyErr_NoMemory();
    goto fail;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    int ok = paths ? PyUnicode_FSConverter(item, &s->owners[i])
                   : str_to_name(item, &s->owners[i]);
    if (!ok)
      goto fail;
    s->count++;
    s->v[i] = PyBytes_AS_STRING(s->owners[i]);
  }
  Py_DECREF(seq);
  return 1;
fail:
  Py_DECREF(seq);
  strv_clear(s);
  return 0;
}

/* An optional argument: None gives NULL; else a path (`paths`) or a
 * name, as a bytes object in *out. */
static int optional_arg(PyObject* arg, int paths, PyObject** out) {
  *out = NULL;
  if (arg == Py_None)
    return 1;
  return paths ? PyUnicode_FSConverter(arg, out) : str_to_name(arg, out);
}

static const char* optional_chars(PyObject* bytes) {
  return bytes != NULL ? PyBytes_AS_STRING(bytes) : NULL;
}

/* A string of the library's, or None. */
static PyObject* optional_path(const char* s) {
  return s != NULL ? PyUnicode_DecodeFSDefault(s) : Py_NewRef(Py_None);
}

/* A message of a long call, copied: its strings live during the callback
 * only, which runs with the GIL released. */
typedef struct {
  kpack_severity_t severity;
  kpack_error_t status;
  int sys_errno;
  char* file; /* NULL when it names none */
  char* text;
} prod_message;

/* One producer call (a split, a wheel split, a check of split binaries):
 * the messages the library said, the caller's progress callback and what
 * a callback raised. Used by the calling thread alone; the Python objects
 * with the GIL held. */
typedef struct {
  prod_message* messages;
  size_t count, cap;
  PyObject* progress; /* callable, or NULL */
  int raised;         /* a callback raised: the exception is kept here */
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* exc;
#else
  PyObject *exc_type, *exc_value, *exc_tb;
#endif
} prod_run;

static void prod_message_fn(const kpack_message_t* m, void* user) {
  prod_run* run = user;
  if (run->count == run->cap) {
    size_t cap = run->cap ? run->cap * 2 : 8;
    prod_message* grown = realloc(run->messages, cap * sizeof(*grown));
    if (grown == NULL)
      return; /* dropped: the call's status still says what failed */
    run->messages = grown;
    run->cap = cap;
  }
  prod_message* c = &run->messages[run->count];
  c->severity = m->severity;
  c->status = m->status;
  c->sys_errno = m->sys_errno;
  c->file = m->file != NULL ? strdup(m->file) : NULL;
  c->text = strdup(m->text != NULL ? m->text : "");
  if (c->text == NULL || (m->file != NULL && c->file == NULL)) {
    free(c->file);
    free(c->text);
    return;
  }
  run->count++;
}

/* Keeps the exception set (GIL held) for the end of the call. */
static void prod_keep_exception(prod_run* run) {
  if (run->raised) { /* the first one wins */
    PyErr_Clear();
    return;
  }
  run->raised = 1;
#if PY_VERSION_HEX >= 0x030C0000
  run->exc = PyErr_GetRaisedException();
#else
  PyErr_Fetch(&run->exc_type, &run->exc_value, &run->exc_tb);
#endif
}

/* With the GIL held: whether the call goes on. A pending signal (Ctrl-C
 * on the main thread) stops it, its exception raised at the end. */
static int prod_go_on(prod_run* run) {
  if (run->raised)
    return 0;
  if (PyErr_CheckSignals() < 0) {
    prod_keep_exception(run);
    return 0;
  }
  return 1;
}

static const char* const phase_names[] = {"reading", "transforming", "packing",
                                          "writing"};

/* progress(phase, done, total): False (or any false value but None)
 * cancels; an exception cancels and is raised by the call. */
static bool prod_progress(kpack_split_phase_t phase, size_t done, size_t total,
                          void* user) {
  prod_run* run = user;
  PyGILState_STATE gil = PyGILState_Ensure();
  int go_on = prod_go_on(run);
  if (go_on && run->progress != NULL) {
    const char* name =
        (unsigned)phase < sizeof(phase_names) / sizeof(phase_names[0])
            ? phase_names[phase]
            : "working";
    PyObject* r = PyObject_CallFunction(run->progress, "sKK", name,
                                        (unsigned long long)done,
                                        (unsigned long long)total);
    go_on = r == NULL ? -1 : r == Py_None ? 1 : PyObject_IsTrue(r);
    Py_XDECREF(r);
    if (go_on < 0) {
      go_on = 0;
      prod_keep_exception(run);
    }
  }
  PyGILState_Release(gil);
  return go_on != 0;
}

/* The texts of the warnings and notes, in order. */
static PyObject* prod_warnings(const prod_run* run) {
  PyObject* list = PyList_New(0);
  for (size_t i = 0; list != NULL && i < run->count; i++) {
    const prod_message* m = &run->messages[i];
    if (m->severity != KPACK_SEVERITY_WARNING &&
        m->severity != KPACK_SEVERITY_NOTE)
      continue;
    PyObject* s = PyUnicode_DecodeFSDefault(m->text);
    if (s == NULL || PyList_Append(list, s) < 0)
      Py_CLEAR(list);
    Py_XDECREF(s);
  }
  if (list == NULL)
    return NULL;
  PyObject* t = PyList_AsTuple(list);
  Py_DECREF(list);
  return t;
}

/* Raises what ended a failed call (GIL held): what a callback raised;
 * else the status `err` with the first error's file, errno and text (for
 * CANCELLED, the message saying so, if any); else `file`, `sys_errno`
 * and `detail` (may be NULL). */
static PyObject* prod_raise(prod_run* run, kpack_error_t err, const char* file,
                            int sys_errno, const char* detail) {
  if (run->raised) {
    run->raised = 0;
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(run->exc);
    run->exc = NULL;
#else
    PyErr_Restore(run->exc_type, run->exc_value, run->exc_tb);
    run->exc_type = run->exc_value = run->exc_tb = NULL;
#endif
    return NULL;
  }
  for (size_t i = 0; i < run->count; i++) {
    const prod_message* m = &run->messages[i];
    if ((m->severity == KPACK_SEVERITY_ERROR ||
         m->severity == KPACK_SEVERITY_USAGE) &&
        (err != KPACK_ERROR_CANCELLED || m->status == err))
      return raise_error(err, m->file, m->sys_errno, NULL, m->text);
  }
  if (err == KPACK_ERROR_CANCELLED && (detail == NULL || *detail == '\0'))
    detail = "cancelled by the progress callback";
  return raise_error(err, file, sys_errno, NULL, detail);
}

static void prod_run_free(prod_run* run) {
  for (size_t i = 0; i < run->count; i++) {
    free(run->messages[i].file);
    free(run->messages[i].text);
  }
  free(run->messages);
#if PY_VERSION_HEX >= 0x030C0000
  Py_XDECREF(run->exc);
#else
  Py_XDECREF(run->exc_type);
  Py_XDECREF(run->exc_value);
  Py_XDECREF(run->exc_tb);
#endif
}

/* ---- Splitting --------------------------------------------------------- */

/* The options of kpack.split() and kpack.split_wheel(), converted; they
 * own every string the kpack_split_options_t points to. */
typedef struct {
  strv inputs, groups, rules, arches;
  PyObject *output_dir, *shipped_rules, *prefix, *archive_dir;
  kpack_split_options_t o;
} split_args;

static void split_args_clear(split_args* a) {
  strv_clear(&a->inputs);
  strv_clear(&a->groups);
  strv_clear(&a->rules);
  strv_clear(&a->arches);
  Py_CLEAR(a->output_dir);
  Py_CLEAR(a->shipped_rules);
  Py_CLEAR(a->prefix);
  Py_CLEAR(a->archive_dir);
}

/* Fills a->o from the arguments common to both calls; messages and
 * progress go to `run`. */
static int split_args_init(split_args* a, prod_run* run, PyObject* groups,
                           PyObject* rules, PyObject* shipped_rules,
                           PyObject* arches, int threads, int level,
                           int compress, PyObject* progress) {
  if (!strv_init(&a->groups, groups, 0, "groups") ||
      !strv_init(&a->rules, rules, 1, "rules") ||
      !strv_init(&a->arches, arches, 0, "arches") ||
      !optional_arg(shipped_rules, 1, &a->shipped_rules))
    return 0;
  if (progress != Py_None && !PyCallable_Check(progress)) {
    PyErr_SetString(PyExc_TypeError, "progress must be callable or None");
    return 0;
  }
  if (threads < 0) {
    raise_error(KPACK_ERROR_INVALID_ARGUMENT, NULL, 0, NULL,
                "threads must be 0 (one per CPU) or more");
    return 0;
  }
  run->progress = progress != Py_None ? progress : NULL;
  kpack_split_options_init(&a->o, sizeof(a->o));
  a->o.groups = a->groups.v;
  a->o.group_count = a->groups.count;
  a->o.rules_files = a->rules.v;
  a->o.rules_file_count = a->rules.count;
  a->o.shipped_rules = optional_chars(a->shipped_rules);
  a->o.arches = a->arches.v;
  a->o.arch_count = a->arches.count;
  a->o.threads = (unsigned)threads;
  a->o.zstd_level = level;
  a->o.no_compress = !compress;
  a->o.message = prod_message_fn;
  a->o.message_user = run;
  a->o.progress = prod_progress;
  a->o.progress_user = run;
  return 1;
}

static const char* const file_types[] = {"directory", "file", "hard_link",
                                         "symlink"};
static const char* const transform_kinds[] = {
    "not_elf", "no_device_code", "debug_only", "kpackified", "fat"};

#define ENUM_NAME(names, value)                                            \
  ((size_t)(value) < sizeof(names) / sizeof((names)[0]) ? (names)[(value)] \
                                                        : "unknown")

/* (source, destination, path, type, kind, link_of, tree, output_tree,
 *  why); kind only for files, link_of only for hard links. */
static PyObject* split_file_tuple(const kpack_split_file_t* f) {
  return Py_BuildValue(
      "(NNNsNNnNN)", PyUnicode_DecodeFSDefault(f->source),
      PyUnicode_DecodeFSDefault(f->destination),
      PyUnicode_DecodeFSDefault(f->path), ENUM_NAME(file_types, f->type),
      f->type == KPACK_SPLIT_FILE
          ? PyUnicode_FromString(ENUM_NAME(transform_kinds, f->kind))
          : Py_NewRef(Py_None),
      f->type == KPACK_SPLIT_HARD_LINK ? PyLong_FromSize_t(f->link_of)
                                       : Py_NewRef(Py_None),
      (Py_ssize_t)f->tree, optional_path(f->output_tree),
      optional_path(f->why));
}

/* (key, arch, file, archive, size) */
static PyObject* split_code_object_tuple(const kpack_split_code_object_t* c) {
  return Py_BuildValue("(NNnnK)", name_to_str(c->key), name_to_str(c->arch),
                       (Py_ssize_t)c->file, (Py_ssize_t)c->archive,
                       (unsigned long long)c->size);
}

/* (path, name, prefix, arch, output_tree, keys_added, keys_carried,
 *  keys_removed, existed, deleted) */
static PyObject* split_archive_tuple(const kpack_split_archive_t* a) {
  return Py_BuildValue("(NNNNNnnnNN)", PyUnicode_DecodeFSDefault(a->path),
                       PyUnicode_DecodeFSDefault(a->name),
                       name_to_str(a->prefix), name_to_str(a->arch),
                       optional_path(a->output_tree), (Py_ssize_t)a->keys_added,
                       (Py_ssize_t)a->keys_carried, (Py_ssize_t)a->keys_removed,
                       PyBool_FromLong(a->existed),
                       PyBool_FromLong(a->deleted));
}

/* (files, code_objects, archives): the plan's three lists. */
static PyObject* split_plan_tuple(const kpack_split_t* split) {
  kpack_split_counts_t n;
  PyObject *files = NULL, *cos = NULL, *archives = NULL;
  kpack_split_get_counts(split, &n);
  files = PyTuple_New((Py_ssize_t)n.files);
  cos = PyTuple_New((Py_ssize_t)n.code_objects);
  archives = PyTuple_New((Py_ssize_t)n.archives);
  if (files == NULL || cos == NULL || archives == NULL)
    goto fail;
  for (size_t i = 0; i < n.files; i++) {
    kpack_split_file_t f;
    kpack_split_get_file(split, i, &f);
    PyObject* t = split_file_tuple(&f);
    if (t == NULL)
      goto fail;
    PyTuple_SET_ITEM(files, (Py_ssize_t)i, t);
  }
  for (size_t i = 0; i < n.code_objects; i++) {
    kpack_split_code_object_t c;
    kpack_split_get_code_object(split, i, &c);
    PyObject* t = split_code_object_tuple(&c);
    if (t == NULL)
      goto fail;
    PyTuple_SET_ITEM(cos, (Py_ssize_t)i, t);
  }
  for (size_t i = 0; i < n.archives; i++) {
    kpack_split_archive_t a;
    kpack_split_get_archive(split, i, &a);
    PyObject* t = split_archive_tuple(&a);
    if (t == NULL)
      goto fail;
    PyTuple_SET_ITEM(archives, (Py_ssize_t)i, t);
  }
  return Py_BuildValue("(NNN)", files, cos, archives);
fail:
  Py_XDECREF(files);
  Py_XDECREF(cos);
  Py_XDECREF(archives);
  return NULL;
}

/* The counts of kpack_split_result_t in its order, then dropped as
 * ((arch, count), ...). */
static PyObject* split_result_tuple(const kpack_split_t* split) {
  kpack_split_result_t r;
  kpack_split_get_result(split, &r);
  PyObject* dropped = PyTuple_New((Py_ssize_t)r.dropped_count);
  for (size_t i = 0; dropped != NULL && i < r.dropped_count; i++) {
    PyObject* t = Py_BuildValue("(Nn)", name_to_str(r.dropped[i].arch),
                                (Py_ssize_t)r.dropped[i].count);
    if (t == NULL)
      Py_CLEAR(dropped);
    else
      PyTuple_SET_ITEM(dropped, (Py_ssize_t)i, t);
  }
  if (dropped == NULL)
    return NULL;
  return Py_BuildValue(
      "(nnnnnnnnnnnnnKKKKIN)", (Py_ssize_t)r.transformed,
      (Py_ssize_t)r.kpackified, (Py_ssize_t)r.debug_only, (Py_ssize_t)r.copied,
      (Py_ssize_t)r.hard_links, (Py_ssize_t)r.symbolic_links,
      (Py_ssize_t)r.archives, (Py_ssize_t)r.code_objects, (Py_ssize_t)r.removed,
      (Py_ssize_t)r.deleted, (Py_ssize_t)r.by_content, (Py_ssize_t)r.by_rule,
      (Py_ssize_t)r.recovered, (unsigned long long)r.host_before,
      (unsigned long long)r.host_after, (unsigned long long)r.code_bytes,
      (unsigned long long)r.stored_bytes, r.threads, dropped);
}

/* split(inputs, output_dir, in_place, per_arch, groups, rules,
 *       shipped_rules, arches, prefix, archive_dir, threads, level,
 *       compress, dry_run, execute, progress)
 * -> (files, code_objects, archives, result or None, warnings): the plan,
 * carried out when `execute`. The GIL is free but for the callback. */
static PyObject* kp_split(PyObject* module, PyObject* args, PyObject* kwargs) {
  static char* kwlist[] = {"inputs",        "output_dir", "in_place",
                           "per_arch",      "groups",     "rules",
                           "shipped_rules", "arches",     "prefix",
                           "archive_dir",   "threads",    "level",
                           "compress",      "dry_run",    "execute",
                           "progress",      NULL};
  PyObject *inputs, *output_dir, *groups, *rules, *shipped, *arches, *prefix,
      *archive_dir, *progress;
  int in_place, per_arch, threads, level, compress, dry_run, execute;
  split_args a = {0};
  prod_run run = {0};
  kpack_split_t* split = NULL;
  PyObject *plan = NULL, *result = NULL, *warnings = NULL, *out = NULL;
  kpack_error_t err;
  (void)module;
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, "OOppOOOOOOiipppO:split", kwlist, &inputs, &output_dir,
          &in_place, &per_arch, &groups, &rules, &shipped, &arches, &prefix,
          &archive_dir, &threads, &level, &compress, &dry_run, &execute,
          &progress))
    return NULL;
  if (!split_args_init(&a, &run, groups, rules, shipped, arches, threads, level,
                       compress, progress) ||
      !strv_init(&a.inputs, inputs, 1, "inputs") ||
      !optional_arg(output_dir, 1, &a.output_dir) ||
      !optional_arg(prefix, 0, &a.prefix) ||
      !optional_arg(archive_dir, 1, &a.archive_dir))
    goto done;
  a.o.output_dir = optional_chars(a.output_dir);
  a.o.in_place = in_place;
  a.o.per_arch = per_arch;
  a.o.prefix = optional_chars(a.prefix);
  a.o.archive_dir = optional_chars(a.archive_dir);
  a.o.dry_run = dry_run;
  Py_BEGIN_ALLOW_THREADS;
  err = kpack_split_plan(&a.o, a.inputs.v, a.inputs.count, &split);
  if (err == KPACK_SUCCESS && execute)
    err = kpack_split_execute(split);
  Py_END_ALLOW_THREADS;
  if (err != KPACK_SUCCESS) {
    prod_raise(&run, err, NULL, 0, NULL);
    goto done;
  }
  plan = split_plan_tuple(split);
  result = execute ? split_result_tuple(split) : Py_NewRef(Py_None);
  warnings = prod_warnings(&run);
  if (plan != NULL && result != NULL && warnings != NULL)
    out = Py_BuildValue("(OOOOO)", PyTuple_GET_ITEM(plan, 0),
                        PyTuple_GET_ITEM(plan, 1), PyTuple_GET_ITEM(plan, 2),
                        result, warnings);
done:
  /* Frees a failed execution's temporary files: no GIL needed. */
  Py_BEGIN_ALLOW_THREADS;
  kpack_split_free(split);
  Py_END_ALLOW_THREADS;
  Py_XDECREF(plan);
  Py_XDECREF(result);
  Py_XDECREF(warnings);
  split_args_clear(&a);
  prod_run_free(&run);
  return out;
}

/* A wheel's tree, split per arch as kpack.split() would split it with the
 * caller's arches, groups, rules, threads and level. */
static kpack_error_t wheel_split_tree(void* user, const char* input_dir,
                                      const char* output_dir,
                                      const char* prefix,
                                      const char* archive_dir) {
  const split_args* a = user;
  kpack_split_options_t o = a->o;
  kpack_split_t* split = NULL;
  o.per_arch = true;
  o.output_dir = output_dir;
  o.prefix = prefix;
  o.archive_dir = archive_dir;
  kpack_error_t err = kpack_split_plan(&o, &input_dir, 1, &split);
  if (err == KPACK_SUCCESS)
    err = kpack_split_execute(split);
  kpack_split_free(split);
  return err;
}

/* split_wheel(wheel, output_dir, groups, rules, shipped_rules, arches,
 *             threads, level, compress, wheel_level, progress)
 * -> (host, ((tree, extra, wheel), ...), warnings) */
static PyObject* kp_split_wheel(PyObject* module, PyObject* args,
                                PyObject* kwargs) {
  static char* kwlist[] = {"wheel",         "output_dir",  "groups",   "rules",
                           "shipped_rules", "arches",      "threads",  "level",
                           "compress",      "wheel_level", "progress", NULL};
  PyObject *wheel = NULL, *output_dir = NULL, *groups, *rules, *shipped,
           *arches, *progress, *out = NULL;
  int threads, level, compress, wheel_level, saved_errno = 0;
  split_args a = {0};
  prod_run run = {0};
  kpack_wheel_split_result_t* r = NULL;
  char why[1024] = "";
  kpack_error_t err;
  (void)module;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O&O&OOOOiipiO:split_wheel",
                                   kwlist, PyUnicode_FSConverter, &wheel,
                                   PyUnicode_FSConverter, &output_dir, &groups,
                                   &rules, &shipped, &arches, &threads, &level,
                                   &compress, &wheel_level, &progress))
    goto done;
  if (!split_args_init(&a, &run, groups, rules, shipped, arches, threads, level,
                       compress, progress))
    goto done;
  const char* w = PyBytes_AS_STRING(wheel);
  kpack_wheel_split_options_t wo = {
      .split_tree = wheel_split_tree, .user = &a, .level = wheel_level};
  Py_BEGIN_ALLOW_THREADS;
  err = kpack_wheel_split(w, PyBytes_AS_STRING(output_dir), &wo, &r, why,
                          sizeof(why));
  saved_errno = errno;
  Py_END_ALLOW_THREADS;
  if (err != KPACK_SUCCESS) {
    /* The tree split's own messages, when it failed, say more. */
    prod_raise(&run, err, w, err == KPACK_ERROR_IO_ERROR ? saved_errno : 0,
               why);
    goto done;
  }
  PyObject* devices = PyTuple_New((Py_ssize_t)r->device_count);
  for (size_t i = 0; devices != NULL && i < r->device_count; i++) {
    PyObject* t = Py_BuildValue("(NNN)", PyUnicode_DecodeFSDefault(r->trees[i]),
                                PyUnicode_DecodeFSDefault(r->extras[i]),
                                PyUnicode_DecodeFSDefault(r->devices[i]));
    if (t == NULL)
      Py_CLEAR(devices);
    else
      PyTuple_SET_ITEM(devices, (Py_ssize_t)i, t);
  }
  if (devices != NULL)
    out = Py_BuildValue("(NNN)", PyUnicode_DecodeFSDefault(r->host), devices,
                        prod_warnings(&run));
done:
  kpack_wheel_split_result_free(r);
  split_args_clear(&a);
  prod_run_free(&run);
  Py_XDECREF(wheel);
  Py_XDECREF(output_dir);
  return out;
}

/* ---- Checking split binaries ------------------------------------------- */

static const char* const verify_kinds[] = {"kpackified", "fat", "none",
                                           "unreadable"};
static const char* const verify_sources[] = {"agents", "recorded", "archives"};

typedef struct {
  prod_run run;
  PyObject* binaries;    /* list of binary tuples */
  PyObject* directories; /* list of (path, binaries) */
} verify_run;

static PyObject* path_tuple(const char* const* paths, size_t count) {
  PyObject* t = PyTuple_New((Py_ssize_t)count);
  for (size_t i = 0; t != NULL && i < count; i++) {
    PyObject* s = PyUnicode_DecodeFSDefault(paths[i]);
    if (s == NULL)
      Py_CLEAR(t);
    else
      PyTuple_SET_ITEM(t, (Py_ssize_t)i, s);
  }
  return t;
}

/* (agent, ok, status, reason, message, archive, size, paths) */
static PyObject* verify_load_tuple(const kpack_verify_load_t* l) {
  return Py_BuildValue(
      "(NNssNNKN)", name_to_str(l->agent),
      PyBool_FromLong(l->status == KPACK_SUCCESS),
      kpack_error_string(l->status), kpack_verify_reason_name(l->reason),
      optional_path(l->message), optional_path(l->archive),
      (unsigned long long)l->size, path_tuple(l->paths, l->path_count));
}

/* (index, kernel, co_index, checked, problem, loads) */
static PyObject* verify_record_tuple(const kpack_verify_record_t* rec) {
  PyObject* loads = PyTuple_New((Py_ssize_t)rec->load_count);
  for (size_t i = 0; loads != NULL && i < rec->load_count; i++) {
    PyObject* t = verify_load_tuple(&rec->loads[i]);
    if (t == NULL)
      Py_CLEAR(loads);
    else
      PyTuple_SET_ITEM(loads, (Py_ssize_t)i, t);
  }
  if (loads == NULL)
    return NULL;
  return Py_BuildValue(
      "(nNKsNN)", (Py_ssize_t)rec->index,
      rec->kernel != NULL ? name_to_str(rec->kernel) : Py_NewRef(Py_None),
      (unsigned long long)rec->co_index,
      ENUM_NAME(verify_sources, rec->checked), optional_path(rec->problem),
      loads);
}

/* (path, kind, status, problem, recorded_arches, checked, records, loads,
 *  failures) */
static PyObject* verify_binary_tuple(const kpack_verify_binary_t* b) {
  PyObject *arches = PyTuple_New((Py_ssize_t)b->recorded_arch_count),
           *records = PyTuple_New((Py_ssize_t)b->record_count);
  if (arches == NULL || records == NULL)
    goto fail;
  for (size_t i = 0; i < b->recorded_arch_count; i++) {
    PyObject* s = name_to_str(b->recorded_arches[i]);
    if (s == NULL)
      goto fail;
    PyTuple_SET_ITEM(arches, (Py_ssize_t)i, s);
  }
  for (size_t i = 0; i < b->record_count; i++) {
    PyObject* t = verify_record_tuple(&b->records[i]);
    if (t == NULL)
      goto fail;
    PyTuple_SET_ITEM(records, (Py_ssize_t)i, t);
  }
  return Py_BuildValue("(NssNNsNnn)", PyUnicode_DecodeFSDefault(b->path),
                       ENUM_NAME(verify_kinds, b->kind),
                       kpack_error_string(b->status), optional_path(b->problem),
                       arches, ENUM_NAME(verify_sources, b->checked), records,
                       (Py_ssize_t)b->loads, (Py_ssize_t)b->failures);
fail:
  Py_XDECREF(arches);
  Py_XDECREF(records);
  return NULL;
}

/* Each binary, as it is checked (GIL released meanwhile). */
static bool verify_binary_fn(const kpack_verify_binary_t* b, void* user) {
  verify_run* v = user;
  PyGILState_STATE gil = PyGILState_Ensure();
  int go_on = prod_go_on(&v->run);
  if (go_on) {
    PyObject* t = verify_binary_tuple(b);
    if (t == NULL || PyList_Append(v->binaries, t) < 0) {
      prod_keep_exception(&v->run);
      go_on = 0;
    }
    Py_XDECREF(t);
  }
  PyGILState_Release(gil);
  return go_on;
}

/* After each file a walk passes over: a chance for Ctrl-C. */
static bool verify_progress_fn(size_t binaries, size_t loads, const char* path,
                               void* user) {
  verify_run* v = user;
  (void)binaries;
  (void)loads;
  (void)path;
  PyGILState_STATE gil = PyGILState_Ensure();
  int go_on = prod_go_on(&v->run);
  PyGILState_Release(gil);
  return go_on;
}

static void verify_directory_fn(const char* path, size_t binaries, void* user) {
  verify_run* v = user;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* t = Py_BuildValue("(Nn)", PyUnicode_DecodeFSDefault(path),
                              (Py_ssize_t)binaries);
  if (t == NULL || PyList_Append(v->directories, t) < 0)
    prod_keep_exception(&v->run); /* raised at the end */
  Py_XDECREF(t);
  PyGILState_Release(gil);
}

/* verify_binaries(paths, agents) -> ([binary tuple, ...],
 * [(directory, binaries), ...]) */
static PyObject* kp_verify_binaries(PyObject* module, PyObject* args) {
  PyObject *paths_arg, *agents_arg, *out = NULL;
  strv paths = {0}, agents = {0};
  verify_run v;
  memset(&v, 0, sizeof(v));
  kpack_verify_options_t o;
  kpack_error_t err;
  (void)module;
  if (!PyArg_ParseTuple(args, "OO:verify_binaries", &paths_arg, &agents_arg))
    return NULL;
  if (!strv_init(&paths, paths_arg, 1, "paths") ||
      !strv_init(&agents, agents_arg, 0, "arches"))
    goto done;
  v.binaries = PyList_New(0);
  v.directories = PyList_New(0);
  if (v.binaries == NULL || v.directories == NULL)
    goto done;
  kpack_verify_options_init(&o, sizeof(o));
  o.agents = agents.v;
  o.agent_count = agents.count;
  o.binary = verify_binary_fn;
  o.progress = verify_progress_fn;
  o.directory = verify_directory_fn;
  o.user = &v;
  o.message = prod_message_fn;
  o.message_user = &v.run;
  Py_BEGIN_ALLOW_THREADS;
  err = kpack_verify_binaries(&o, paths.v, paths.count, NULL);
  Py_END_ALLOW_THREADS;
  if (err != KPACK_SUCCESS || v.run.raised)
    prod_raise(&v.run, err, NULL, 0, NULL);
  else
    out = Py_BuildValue("(OO)", v.binaries, v.directories);
done:
  Py_XDECREF(v.binaries);
  Py_XDECREF(v.directories);
  prod_run_free(&v.run);
  strv_clear(&paths);
  strv_clear(&agents);
  return out;
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
    {"split", (PyCFunction)(void (*)(void))kp_split,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"split_wheel", (PyCFunction)(void (*)(void))kp_split_wheel,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"verify_binaries", kp_verify_binaries, METH_VARARGS, NULL},
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
