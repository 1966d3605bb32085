# SPDX-License-Identifier: MIT
"""Read kpack archives of GPU code objects, load a HIP binary's code objects
the way the HIP runtime does, and split HIP binaries, trees and wheels into
kpack-ified binaries and per-architecture archives.

A kpack archive maps *binary -> GPU architecture -> code object*, each code
object compressed on its own. :func:`open` reads an archive's table of
contents only; :meth:`Archive.read` decompresses one code object (releasing
the GIL, so threads read in parallel); :meth:`Archive.kernels` lists the
GPU kernels each code object holds. :func:`load` runs the kpack loader's
search for every record of a kpack-ified HIP binary, as the HIP runtime
does when it loads that binary.

:func:`plan` and :func:`split` are the producer (``kpack split``):
:func:`plan` lists what a split would write, :func:`split` writes it (a
wheel too: :func:`split_wheel`), both releasing the GIL. :func:`verify_binary`
checks that every record of split binaries loads, as ``kpack verify
--binary`` does.

Every failure of the library raises a subclass of :class:`Error` that
carries the libkpack status (``code`` and ``name``), the file concerned and,
for system errors, ``errno`` and its text.
"""

from __future__ import annotations

import os as _os
from typing import (Callable, Iterator, Literal, NamedTuple, Optional,
                    Sequence, Union, overload)

from . import _kpack

__all__ = [
    "Archive", "CodeObject", "Error", "Kernel", "LoadedCodeObject", "Record",
    "load", "open", "parse_code_object", "__version__",
    "plan", "split", "split_wheel", "verify_binary",
    "SplitPlan", "SplitFile", "SplitCodeObject", "SplitArchive",
    "SplitResult", "WheelSplit", "DeviceWheel",
    "Verification", "VerifiedBinary", "VerifiedRecord", "Load",
    "InvalidArgument", "FileNotFound", "InvalidFormat", "UnsupportedVersion",
    "KernelNotFound", "DecompressionFailed", "OutOfMemory", "Unimplemented",
    "IOFailure", "MsgpackParseFailed", "PathDiscoveryFailed",
    "InvalidMetadata", "ArchiveNotFound", "ArchNotFound", "Cancelled",
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
        # The library's own words when it gave some (less the file they
        # start with, said first already), else the system's, else the
        # status described.
        told = self.detail
        if told == _DESCRIPTIONS.get(self.code):
            told = None
        elif told and self.file and told.startswith(self.file + ": "):
            told = told[len(self.file) + 2:]
        why = told or self.strerror or self.detail
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


class Cancelled(Error):
    """KPACK_ERROR_CANCELLED (15): a split or a check stopped because its
    caller asked it to (a progress callback returned False)."""


_BY_CODE: dict[int, type[Error]] = {
    1: InvalidArgument, 2: FileNotFound, 3: InvalidFormat,
    4: UnsupportedVersion, 5: KernelNotFound, 6: DecompressionFailed,
    7: OutOfMemory, 8: Unimplemented, 9: IOFailure, 10: MsgpackParseFailed,
    11: PathDiscoveryFailed, 12: InvalidMetadata, 13: ArchiveNotFound,
    14: ArchNotFound, 15: Cancelled,
}

# What a status means when the library has no more specific words.
_DESCRIPTIONS = {
    5: "no such kernel",
    6: "the stored kernel is corrupt",
    8: "the kpack loader is disabled (ROCM_KPACK_DISABLE)",
    13: "no search path led to an archive that opened",
    14: "no archive declares a compatible architecture",
    15: "the caller cancelled the call",
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


# ---- The producer -----------------------------------------------------------


class SplitFile(NamedTuple):
    """One path of a split's inputs, in walk order (each directory before
    what it holds); with ``per_arch``, a directory again for each further
    output tree that holds something below it."""

    source: str  # the input path
    destination: str  # where it is written
    path: str  # below its tree's root ("" for the root)
    type: str  # "directory", "file", "hard_link" or "symlink"
    # For a file: "fat" (transformed), "kpackified", "debug_only",
    # "no_device_code" or "not_elf"; None otherwise.
    kind: str | None
    link_of: int | None  # a hard link: index of the file's first name
    tree: int  # index of the input it comes from
    output_tree: str | None  # per_arch: "generic", "gfx90a", a group's name
    why: str | None  # per_arch, but for directories: why it goes there


class SplitCodeObject(NamedTuple):
    """One code object the split packs."""

    key: str  # its key in the archive, e.g. "lib/libx.so#0"
    arch: str  # as the archive files it, e.g. "gfx90a:xnack-"
    file: int  # index of its fat binary in SplitPlan.files
    archive: int  # index of its archive in SplitPlan.archives
    size: int  # bytes


class SplitArchive(NamedTuple):
    """One archive the split writes (or deletes, left without keys)."""

    path: str  # OUT_ROOT[/TREE]/ARCHIVE_DIR/NAME
    name: str  # ARCHIVE_DIR/PREFIX_ARCH.kpack
    prefix: str  # its group_name
    arch: str
    output_tree: str | None  # per_arch: its tree
    keys_added: int  # code objects of this split
    keys_carried: int  # keys of other binaries kept from an earlier version
    keys_removed: int  # keys of earlier builds of the binaries split
    existed: bool  # an earlier version is there
    deleted: bool  # left without keys: removed


class SplitPlan(NamedTuple):
    """What a split would do (:func:`plan`); nothing is written."""

    files: tuple[SplitFile, ...]
    code_objects: tuple[SplitCodeObject, ...]
    archives: tuple[SplitArchive, ...]
    warnings: tuple[str, ...]  # the library's warnings and notes


class SplitResult(NamedTuple):
    """What :func:`split` did (``kpack split --json`` gives the same
    counts). ``dropped``: the arches ``arches`` left out, with how many code
    objects each had."""

    transformed: int  # fat binaries written kpack-ified
    kpackified: int  # binaries left alone: already kpack-ified
    debug_only: int  # ... and separate debug files
    copied: int  # files mirrored (not in place)
    hard_links: int
    symbolic_links: int
    archives: int  # archives written
    code_objects: int  # code objects packed
    removed: int  # keys of earlier builds removed
    deleted: int  # archives left empty, deleted
    by_content: int  # per_arch: files placed by their content
    by_rule: int  # ... by a rule
    recovered: int  # rewrites an interrupted run left, finished
    host_before: int  # bytes of the fat binaries
    host_after: int  # ... transformed
    code_bytes: int  # bytes of the code objects packed
    stored_bytes: int  # bytes of the archives written
    threads: int  # compression threads used
    dropped: tuple[tuple[str, int], ...]
    plan: SplitPlan
    warnings: tuple[str, ...]


class DeviceWheel(NamedTuple):
    """A device wheel :func:`split_wheel` wrote."""

    tree: str  # the processor or group, e.g. "gfx90a"
    extra: str  # the host wheel's extra that installs it, "device-gfx90a"
    wheel: str  # its path


class WheelSplit(NamedTuple):
    """The wheels :func:`split_wheel` wrote: the host wheel and the device
    wheels in byte-wise order of their trees."""

    host: str
    devices: tuple[DeviceWheel, ...]
    warnings: tuple[str, ...]


_Progress = Callable[[str, int, int], Optional[bool]]


def _inputs(inputs) -> list:
    if isinstance(inputs, (str, bytes, _os.PathLike)):
        return [inputs]
    return list(inputs)


def _plan(files, code_objects, archives, warnings) -> SplitPlan:
    return SplitPlan(tuple(SplitFile(*f) for f in files),
                     tuple(SplitCodeObject(*c) for c in code_objects),
                     tuple(SplitArchive(*a) for a in archives), warnings)


def plan(inputs: PathLike | Sequence[PathLike],
         output_dir: PathLike | None = None, *, in_place: bool = False,
         per_arch: bool = False, groups: Sequence[str] = (),
         rules: Sequence[PathLike] = (), shipped_rules: PathLike | None = None,
         arches: Sequence[str] = (), prefix: str | None = None,
         archive_dir: PathLike | None = None, threads: int = 0,
         level: int = 0, compress: bool = True) -> SplitPlan:
    """Plans the split of `inputs` (one path, or a sequence of directory
    trees and single files) as :func:`split` would carry it out, and writes
    nothing: walks the inputs, classifies every file, lists the code objects
    of every fat binary and the archives they go to (reading the archives
    already there). See :func:`split` for the arguments.

    Raises :class:`InvalidArgument` for options that cannot be used (the
    library's message in ``detail``, e.g. an arch that is no GPU target),
    :class:`FileNotFound` or :class:`IOFailure` for an input that cannot be
    read, :class:`InvalidFormat` for one that cannot be split (an arch that
    matches no code object, a fat binary that does not parse...)."""
    t = _kpack.split(
        _inputs(inputs), output_dir=output_dir, in_place=in_place,
        per_arch=per_arch, groups=groups, rules=rules,
        shipped_rules=shipped_rules, arches=arches, prefix=prefix,
        archive_dir=archive_dir, threads=threads, level=level,
        compress=compress, dry_run=True, execute=False, progress=None)
    return _plan(t[0], t[1], t[2], t[4])


@overload
def split(inputs: PathLike | Sequence[PathLike],
          output_dir: PathLike | None = ..., *, wheel: Literal[False] = ...,
          in_place: bool = ..., per_arch: bool = ...,
          groups: Sequence[str] = ..., rules: Sequence[PathLike] = ...,
          shipped_rules: PathLike | None = ..., arches: Sequence[str] = ...,
          prefix: str | None = ..., archive_dir: PathLike | None = ...,
          threads: int = ..., level: int = ..., compress: bool = ...,
          dry_run: bool = ..., progress: _Progress | None = ...,
          wheel_level: int = ...) -> SplitResult: ...


@overload
def split(inputs: PathLike, output_dir: PathLike, *, wheel: Literal[True],
          in_place: bool = ..., per_arch: bool = ...,
          groups: Sequence[str] = ..., rules: Sequence[PathLike] = ...,
          shipped_rules: PathLike | None = ..., arches: Sequence[str] = ...,
          prefix: str | None = ..., archive_dir: PathLike | None = ...,
          threads: int = ..., level: int = ..., compress: bool = ...,
          dry_run: bool = ..., progress: _Progress | None = ...,
          wheel_level: int = ...) -> WheelSplit: ...


def split(inputs, output_dir=None, *, wheel=False, in_place=False,
          per_arch=False, groups=(), rules=(), shipped_rules=None, arches=(),
          prefix=None, archive_dir=None, threads=0, level=0, compress=True,
          dry_run=False, progress=None, wheel_level=1):
    """Splits HIP binaries as ``kpack split`` does: every fat binary of
    `inputs` (one path, or a sequence of directory trees and single files)
    is written kpack-ified, its code objects into one archive per GPU
    architecture, and everything else is mirrored (docs/split.md).

    - `output_dir`: the directory the inputs are mirrored into; or
      `in_place` to rewrite the inputs themselves (no `output_dir`).
    - `per_arch`: write ``output_dir/generic`` and one tree per GPU
      processor; `groups` (``"NAME=gfx906,gfx908"`` each) put several
      processors in one tree; data files are placed by the rule files
      `rules`, then `shipped_rules` (``share/kpack/split-rules.conf`` of a
      kpack install, which ``kpack split`` reads; None: none).
    - `arches`: keep only the code objects an agent of one of these targets
      could be served (``"gfx90a"``, ``"gfx90a:xnack-"``...).
    - `prefix`: archive name prefix and group_name (default: the name of
      each tree's directory); `archive_dir`: where the archives go below
      each output root (default ``.kpack``).
    - `threads`: compression threads (0: one per CPU); `level`: zstd level
      1-22 (0: 3); ``compress=False`` stores code objects raw.
    - `dry_run`: plan, write nothing, and return the plan's counts.
    - `progress(phase, done, total)`: called as the work advances, `phase`
      one of ``"reading"``, ``"transforming"``, ``"packing"``,
      ``"writing"``; returning False cancels the split, which raises
      :class:`Cancelled`; an exception it raises cancels the split and is
      raised by it. Either way the output is left as it was.

    The GIL is released while the split runs (but for `progress`), so
    splits in several threads run in parallel. Splits that write archives
    into one directory (files of one directory in place, or one
    `output_dir`) take turns: a second one waits, with a note among its
    warnings, until the first has ended, calling `progress` again
    (``"reading"``, every file read) so that it can be cancelled, or
    interrupted with Ctrl-C, meanwhile. A failure leaves
    `output_dir` as it was; its exception carries the library's first error
    message (``detail``, ``file``, ``errno``). Returns a
    :class:`SplitResult`, its ``plan`` and the library's warnings included.

    With ``wheel=True``, `inputs` is one fat wheel and the call is
    :func:`split_wheel` (``in_place``, ``prefix``, ``archive_dir`` and
    ``dry_run`` are refused; ``per_arch`` is implied), returning a
    :class:`WheelSplit`."""
    if wheel:
        if in_place or prefix is not None or archive_dir is not None \
                or dry_run:
            raise InvalidArgument(
                1, None, None, None,
                "in_place, prefix, archive_dir and dry_run do not go with "
                "wheel=True (a wheel split names and places its archives "
                "itself)")
        if output_dir is None:
            raise InvalidArgument(1, None, None, None,
                                  "a wheel split needs output_dir")
        return split_wheel(inputs, output_dir, groups=groups, rules=rules,
                           shipped_rules=shipped_rules, arches=arches,
                           threads=threads, level=level, compress=compress,
                           wheel_level=wheel_level, progress=progress)
    t = _kpack.split(
        _inputs(inputs), output_dir=output_dir, in_place=in_place,
        per_arch=per_arch, groups=groups, rules=rules,
        shipped_rules=shipped_rules, arches=arches, prefix=prefix,
        archive_dir=archive_dir, threads=threads, level=level,
        compress=compress, dry_run=dry_run, execute=True, progress=progress)
    r = t[3]
    return SplitResult(*r[:18], r[18], _plan(t[0], t[1], t[2], t[4]), t[4])


def split_wheel(wheel: PathLike, output_dir: PathLike, *,
                groups: Sequence[str] = (), rules: Sequence[PathLike] = (),
                shipped_rules: PathLike | None = None,
                arches: Sequence[str] = (), threads: int = 0, level: int = 0,
                compress: bool = True, wheel_level: int = 1,
                progress: _Progress | None = None) -> WheelSplit:
    """Splits a fat wheel as ``kpack split --wheel`` does: its tree (but
    its .dist-info and .data) is split per arch as :func:`split` with
    ``per_arch=True`` splits a tree (`groups`, `rules`, `shipped_rules`,
    `arches`, `threads`, `level`, `compress` and `progress` as there), and
    `output_dir` (made when missing) receives a host wheel, with the
    input's name, version and tags, and one device wheel per processor or
    group, ``DIST_device_TREE-VERSION-TAGS.whl``, that the host wheel's
    extra ``device-TREE`` installs (docs/split.md, "Wheels"). The zips are
    deterministic; `wheel_level` is their deflate level (1-9, 0 stores).

    The wheels are moved into `output_dir` only when all are complete: a
    failure leaves it as it was. Raises :class:`FileNotFound` (no wheel),
    :class:`InvalidFormat` and the like for a wheel that is not valid (the
    words in ``detail``), or what the tree split raises."""
    t = _kpack.split_wheel(
        wheel, output_dir, groups=groups, rules=rules,
        shipped_rules=shipped_rules, arches=arches, threads=threads,
        level=level, compress=compress, wheel_level=wheel_level,
        progress=progress)
    return WheelSplit(t[0], tuple(DeviceWheel(*d) for d in t[1]), t[2])


# ---- Checking split binaries ------------------------------------------------


class Load(NamedTuple):
    """One record's load for one agent, by the loader's own search."""

    agent: str
    ok: bool
    status: str  # the loader's status, e.g. "KPACK_ERROR_ARCHIVE_NOT_FOUND"
    # "ok", "no-archive", "archive-unreadable", "not-declared",
    # "kernel-missing", "kernel-unreadable" or "error"
    reason: str
    message: str | None  # why it failed, in words; None on success
    archive: str | None  # the archive that served it, or the failure's
    size: int  # bytes of the code object, on success
    paths: tuple[str, ...]  # the paths a failure involves


class VerifiedRecord(NamedTuple):
    """One HIPK record of a kpack-ified binary and its loads."""

    index: int
    kernel: str | None  # its kernel_name; None when the record is unusable
    co_index: int  # its code object index
    # whose agents it was checked for: "agents" (those given), "recorded"
    # (the arches the split recorded), "archives" (the archives found)
    checked: str
    problem: str | None  # why it could not be checked
    loads: tuple[Load, ...]

    @property
    def ok(self) -> bool:
        return self.problem is None and all(ld.ok for ld in self.loads)


class VerifiedBinary(NamedTuple):
    """One binary :func:`verify_binary` looked at."""

    path: str
    # "kpackified" (checked), "fat" (device code inside: not split), "none"
    # (no HIP device code) or "unreadable" (does not open: see status)
    kind: str
    status: str  # "unreadable": why, e.g. "KPACK_ERROR_FILE_NOT_FOUND"
    problem: str | None  # why it could not be checked
    recorded_arches: tuple[str, ...]  # the arches the split recorded
    checked: str  # the agents of its last checked record (VerifiedRecord)
    records: tuple[VerifiedRecord, ...]
    loads: int  # loads checked
    failures: int  # failed loads, records not checked, binary not checked

    @property
    def ok(self) -> bool:
        """A kpack-ified binary whose every record loads."""
        return self.kind == "kpackified" and self.failures == 0


class Verification(list):
    """The binaries :func:`verify_binary` looked at (a list of
    :class:`VerifiedBinary`, in the order checked), and ``directories``:
    each directory given, with how many kpack-ified binaries it held."""

    directories: tuple[tuple[str, int], ...]

    @property
    def ok(self) -> bool:
        """Every binary is kpack-ified and loads, and every directory given
        held at least one (a tree never split checks nothing)."""
        return (all(b.ok for b in self)
                and all(n > 0 for _, n in self.directories))


def _verified(t) -> VerifiedBinary:
    records = tuple(
        VerifiedRecord(*r[:5], tuple(Load(*ld) for ld in r[5])) for r in t[6])
    return VerifiedBinary(*t[:6], records, t[7], t[8])


def verify_binary(paths: PathLike | Sequence[PathLike],
                  arches: Sequence[str] = ()) -> Verification:
    """Checks split binaries as ``kpack verify --binary`` does: for every
    HIPK record of each kpack-ified binary and every agent, the loader's own
    search (with the ``ROCM_KPACK_*`` variables of the environment) must
    return the record's code object. `paths`: one path or a sequence; each
    is a binary (reported whatever it is) or a directory, walked without
    following symbolic links, whose kpack-ified binaries are checked.
    `arches`: the agents, as the HIP runtime names a device
    (``"gfx90a:sramecc+:xnack-"``); none: the arches the split recorded in
    each binary.

    Returns a :class:`Verification`: what was found, failures included
    (see ``ok``). Raises only when the check cannot run:
    :class:`InvalidArgument` for an arch that is no target (the library's
    message in ``detail``), :class:`IOFailure` for a directory that cannot
    be walked. Releases the GIL while it checks."""
    binaries, directories = _kpack.verify_binaries(_inputs(paths), arches)
    result = Verification(_verified(t) for t in binaries)
    result.directories = tuple(directories)
    return result
