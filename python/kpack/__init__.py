# SPDX-License-Identifier: MIT
"""Read kpack archives of GPU code objects, and load a HIP binary's code
objects the way the HIP runtime does.

A kpack archive maps *binary -> GPU architecture -> code object*, each code
object compressed on its own. :func:`open` reads an archive's table of
contents only; :meth:`Archive.read` decompresses one code object (releasing
the GIL, so threads read in parallel); :meth:`Archive.kernels` lists the
GPU kernels each code object holds. :func:`load` runs the kpack loader's
search for every record of a kpack-ified HIP binary, as the HIP runtime
does when it loads that binary.

Every failure of the library raises a subclass of :class:`Error` that
carries the libkpack status (``code`` and ``name``), the file concerned and,
for system errors, ``errno`` and its text.
"""

from __future__ import annotations

import os as _os
from typing import Iterator, NamedTuple, Sequence, Union

from . import _kpack

__all__ = [
    "Archive", "CodeObject", "Error", "Kernel", "LoadedCodeObject", "Record",
    "load", "open", "parse_code_object", "__version__",
    "InvalidArgument", "FileNotFound", "InvalidFormat", "UnsupportedVersion",
    "KernelNotFound", "DecompressionFailed", "OutOfMemory", "Unimplemented",
    "IOFailure", "MsgpackParseFailed", "PathDiscoveryFailed",
    "InvalidMetadata", "ArchiveNotFound", "ArchNotFound",
]

__version__: str = _kpack.VERSION

PathLike = Union[str, bytes, "_os.PathLike[str]", "_os.PathLike[bytes]"]

# ---- Errors -----------------------------------------------------------------


class Error(Exception):
    """A libkpack call failed.

    Attributes:
        code: the libkpack status number (``kpack_error_t``), e.g. 13.
        name: its name, e.g. ``"KPACK_ERROR_ARCHIVE_NOT_FOUND"``.
        file: the file the failure is about, or None.
        errno: the system's error number for a file that could not be
            opened or read, else None.
        strerror: that error number in words, else None.
        where: what inside the file: ``"BINARY ARCH"`` for a kernel,
            ``"record N (KERNEL#N)"`` for a binary's record; or None.
        detail: what is wrong, in words, when the library can say more than
            the status does (e.g. where an archive is truncated); or None.
    """

    code: int
    name: str
    file: str | None
    errno: int | None
    strerror: str | None
    where: str | None
    detail: str | None

    def __init__(self, code: int, file: str | None = None,
                 errno: int | None = None, where: str | None = None,
                 detail: str | None = None) -> None:
        self.code = code
        self.name = _kpack.error_name(code)
        self.file = file or None
        self.errno = errno or None
        self.strerror = _os.strerror(errno) if errno else None
        self.where = where or None
        self.detail = detail or _DESCRIPTIONS.get(code)
        super().__init__(code, self.file, self.errno, self.where, self.detail)

    def __str__(self) -> str:
        parts = [p for p in (self.file, self.where, self.name) if p]
        why = self.strerror or self.detail
        return ": ".join(parts + ([why] if why else []))

    def __reduce__(self):  # picklable across processes
        return (type(self),
                (self.code, self.file, self.errno, self.where, self.detail))


class InvalidArgument(Error, ValueError):
    """KPACK_ERROR_INVALID_ARGUMENT (1): an argument the call cannot take."""


class FileNotFound(Error):
    """KPACK_ERROR_FILE_NOT_FOUND (2): no file at the path given."""


class InvalidFormat(Error):
    """KPACK_ERROR_INVALID_FORMAT (3): not a kpack archive (or not the HIP
    binary or code object expected), or one whose structure is broken."""


class UnsupportedVersion(Error):
    """KPACK_ERROR_UNSUPPORTED_VERSION (4): an archive version or
    compression scheme this library does not know."""


class KernelNotFound(Error):
    """KPACK_ERROR_KERNEL_NOT_FOUND (5): no kernel for that binary and arch
    (from :func:`load`: archives declared the arch but none held it)."""


class DecompressionFailed(Error):
    """KPACK_ERROR_DECOMPRESSION_FAILED (6): a corrupt frame, or a size that
    differs from the table of contents."""


class OutOfMemory(Error, MemoryError):
    """KPACK_ERROR_OUT_OF_MEMORY (7): an allocation failed."""


class Unimplemented(Error):
    """KPACK_ERROR_NOT_IMPLEMENTED (8): the loader is disabled
    (``ROCM_KPACK_DISABLE``)."""


class IOFailure(Error):
    """KPACK_ERROR_IO_ERROR (9): a file could not be opened or read (a
    directory, no permission, a file that shrank); see ``errno``."""


class MsgpackParseFailed(Error):
    """KPACK_ERROR_MSGPACK_PARSE_FAILED (10): a table of contents or
    metadata note that is not well-formed MessagePack."""


class PathDiscoveryFailed(Error):
    """KPACK_ERROR_PATH_DISCOVERY_FAILED (11)."""


class InvalidMetadata(Error):
    """KPACK_ERROR_INVALID_METADATA (12): HIPK metadata or a code object's
    metadata note of the wrong shape."""


class ArchiveNotFound(Error):
    """KPACK_ERROR_ARCHIVE_NOT_FOUND (13): no search path of the binary led
    to an archive that opened (often: the device package for this GPU is
    not installed)."""


class ArchNotFound(Error):
    """KPACK_ERROR_ARCH_NOT_FOUND (14): archives were found, but none
    declares an architecture compatible with the ones asked for."""


_BY_CODE: dict[int, type[Error]] = {
    1: InvalidArgument, 2: FileNotFound, 3: InvalidFormat,
    4: UnsupportedVersion, 5: KernelNotFound, 6: DecompressionFailed,
    7: OutOfMemory, 8: Unimplemented, 9: IOFailure, 10: MsgpackParseFailed,
    11: PathDiscoveryFailed, 12: InvalidMetadata, 13: ArchiveNotFound,
    14: ArchNotFound,
}

# What a status means when the library has no more specific words.
_DESCRIPTIONS = {
    5: "no such kernel",
    6: "the stored kernel is corrupt",
    8: "the kpack loader is disabled (ROCM_KPACK_DISABLE)",
    13: "no search path led to an archive that opened",
    14: "no archive declares a compatible architecture",
}


def _make_error(code: int, file: str, errno: int, where: str,
                detail: str) -> Error:
    return _BY_CODE.get(code, Error)(code, file, errno, where, detail)


_kpack._set_error_factory(_make_error)

# ---- Records ----------------------------------------------------------------


class Kernel(NamedTuple):
    """One GPU kernel of a code object's metadata note, as ``kpack list
    --kernels`` shows it. A field the note leaves out is None."""

    name: str
    symbol: str | None
    vgpr_count: int | None
    sgpr_count: int | None
    agpr_count: int | None
    group_segment_fixed_size: int | None  # LDS bytes
    private_segment_fixed_size: int | None  # scratch bytes per work-item
    kernarg_segment_size: int | None
    wavefront_size: int | None
    max_flat_workgroup_size: int | None
    vgpr_spill_count: int | None
    sgpr_spill_count: int | None


class CodeObject(NamedTuple):
    """What an AMDGPU code object says of itself."""

    target: str  # target ID, e.g. "gfx90a:xnack-"
    version: int  # code object version (0: not an AMDGPU HSA code object)
    kernels: tuple[Kernel, ...]


class Record(NamedTuple):
    """One kernel entry of an archive: a binary's code object for one arch."""

    binary: str
    arch: str
    size: int  # decompressed bytes
    stored_size: int  # bytes it takes in the archive
    type: str  # entry type, "hsaco" for code objects
    metadata: bytes | None  # the entry's TOC metadata map (MessagePack)
    code_object: CodeObject | None  # None: not decoded, or not "hsaco"

    @property
    def kernels(self) -> tuple[Kernel, ...]:
        """The GPU kernels of the code object (empty when not decoded)."""
        return self.code_object.kernels if self.code_object else ()


def _code_object(t) -> CodeObject:
    return CodeObject(t[0], t[1], tuple(Kernel(*k) for k in t[2]))


class LoadedCodeObject(NamedTuple):
    """A code object :func:`load` found for one record of a binary."""

    record: int  # index of the record in .hipFatBinSegment
    co_index: int  # the code object index the runtime passes to the loader
    kernel: str  # the TOC key looked up, "KERNEL_NAME#CO_INDEX"
    arch: str  # the requested arch it was found for
    target: str  # the compatible target that matched, e.g. "gfx90a"
    archive: str  # the archive it came from
    data: bytes  # the code object


# ---- Archives ---------------------------------------------------------------


class Archive:
    """An open kpack archive; see :func:`open`.

    Use it as a context manager, or call :meth:`close`. The table of
    contents is read once at open and never changes, so any number of
    threads may call :meth:`read` and :meth:`kernels` at the same time.
    Closing while other threads read takes effect when their reads end.
    """

    def __init__(self, handle) -> None:
        self._h = handle
        self._arches: tuple[str, ...] | None = None
        self._binaries: tuple[str, ...] | None = None

    @property
    def path(self) -> str:
        """The path the archive was opened from."""
        return self._h.path

    @property
    def closed(self) -> bool:
        return self._h.closed

    @property
    def arches(self) -> tuple[str, ...]:
        """The architectures the archive declares, in its order."""
        if self._arches is None:
            self._arches = self._h.arches()
        return self._arches

    @property
    def binaries(self) -> tuple[str, ...]:
        """The binaries that have a kernel, sorted byte-wise."""
        if self._binaries is None:
            self._binaries = self._h.binaries()
        return self._binaries

    @property
    def group_name(self) -> str:
        return self._h.header()[0]

    @property
    def gfx_arch_family(self) -> str:
        return self._h.header()[1]

    @property
    def compression(self) -> str:
        """``"none"`` or ``"zstd-per-kernel"``."""
        return self._h.header()[2]

    def __len__(self) -> int:
        """The number of kernels (binary, arch pairs)."""
        return self._h.header()[3]

    def binary_arches(self, binary: str) -> tuple[str, ...]:
        """The arches that hold a kernel for `binary`, sorted byte-wise.
        Raises :class:`KernelNotFound` for an unknown binary."""
        return self._h.binary_arches(binary)

    def kernels(self, *, code_objects: bool = True) -> Iterator[Record]:
        """Every kernel entry, binaries in byte-wise order and each binary's
        arches in byte-wise order. With `code_objects` (the default) each
        ``"hsaco"`` entry's code object is decoded as far as its metadata
        note (the start of its bytes, not the whole kernel) and its GPU
        kernels listed; a code object that cannot be read raises
        :class:`Error` from the iteration."""
        for t in self._h.kernels(code_objects):
            yield Record(*t[:6], _code_object(t[6]) if t[6] else None)

    def read(self, binary: str, arch: str) -> bytes:
        """The code object of `binary` for `arch`, decompressed. Releases
        the GIL while it reads and decompresses, so reads from several
        threads run in parallel. Raises :class:`KernelNotFound`,
        :class:`DecompressionFailed` or :class:`IOFailure`."""
        return self._h.read(binary, arch)

    def close(self) -> None:
        """Closes the archive; later calls raise ValueError. Idempotent."""
        self._h.close()

    def __enter__(self) -> "Archive":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<kpack.Archive {self.path!r} ({state})>"


def open(path: PathLike) -> Archive:  # noqa: A001 (as io.open, for files)
    """Opens the archive at `path`: reads its header and table of contents
    (and the frame table of a zstd archive), nothing of its kernels.

    Raises :class:`FileNotFound`, :class:`IOFailure` (a directory, no
    permission: see ``errno``), :class:`InvalidFormat`,
    :class:`UnsupportedVersion` or :class:`MsgpackParseFailed`, whose
    ``detail`` says what is wrong and where."""
    return Archive(_kpack.open(path))


def parse_code_object(data: bytes | bytearray | memoryview) -> CodeObject:
    """Reads an AMDGPU code object (e.g. what :meth:`Archive.read`
    returns): its target, version and GPU kernels. Raises
    :class:`InvalidFormat` for bytes that are not one,
    :class:`MsgpackParseFailed` or :class:`InvalidMetadata` for a broken
    metadata note."""
    return _code_object(_kpack.parse_code_object(data))


def load(binary: PathLike, arches: Sequence[str]) -> list[LoadedCodeObject]:
    """Loads every code object of a kpack-ified HIP binary, as the HIP
    runtime does for a device whose ISA names are `arches` (most preferred
    first, e.g. ``["gfx90a:sramecc+:xnack-"]``): for each HIPK record of
    the binary's ``.hipFatBinSegment``, the kpack loader's search
    (``kpack_load_code_object``) with the record's kernel name, search
    paths and code object index, all through one loader cache. Search
    paths are resolved against the binary's directory as given, and the
    ``ROCM_KPACK_*`` environment variables apply (read at each call).

    Returns one :class:`LoadedCodeObject` per record, in record order.
    Raises, for the first record that fails, the loader's error:
    :class:`ArchiveNotFound` (13), :class:`ArchNotFound` (14),
    :class:`KernelNotFound`, :class:`Unimplemented` (disabled), with
    ``where`` naming the record; for the binary itself
    :class:`FileNotFound`, :class:`IOFailure`, or :class:`InvalidFormat`
    (not an ELF file, a fat binary whose code is inside it, no HIP code);
    :class:`InvalidArgument` for an empty `arches`."""
    return [LoadedCodeObject(*t) for t in _kpack.load(binary, arches)]
