# Types of the C extension under kpack/__init__.py (use the kpack module).
import os
from typing import Callable, Iterator, Sequence

VERSION: str

_Kernel = tuple[str, str | None, int | None, int | None, int | None,
                int | None, int | None, int | None, int | None, int | None,
                int | None, int | None]
_CodeObject = tuple[str, int, tuple[_Kernel, ...]]
_Record = tuple[str, str, int, int, str, bytes | None, _CodeObject | None]
_Loaded = tuple[int, int, str, str, str, str, bytes]
_Path = str | bytes | os.PathLike[str] | os.PathLike[bytes]
_SplitFile = tuple[str, str, str, str, str | None, int | None, int,
                   str | None, str | None]
_SplitCodeObject = tuple[str, str, int, int, int]
_SplitArchive = tuple[str, str, str, str, str | None, int, int, int, bool,
                      bool]
_SplitResult = tuple[int, int, int, int, int, int, int, int, int, int, int,
                     int, int, int, int, int, int, int,
                     tuple[tuple[str, int], ...]]
_Progress = Callable[[str, int, int], bool | None]
_Load = tuple[str, bool, str, str, str | None, str | None, int,
              tuple[str, ...]]
_VerifiedRecord = tuple[int, str | None, int, str, str | None,
                        tuple[_Load, ...]]
_VerifiedBinary = tuple[str, str, str, str | None, tuple[str, ...], str,
                        tuple[_VerifiedRecord, ...], int, int]

class Archive:
    @property
    def path(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def arches(self) -> tuple[str, ...]: ...
    def binaries(self) -> tuple[str, ...]: ...
    def header(self) -> tuple[str, str, str, int]: ...
    def read(self, binary: str, arch: str, /) -> bytes: ...
    def binary_arches(self, binary: str, /) -> tuple[str, ...]: ...
    def kernels(self, code_objects: bool = ..., /) -> Iterator[_Record]: ...

def open(path: _Path, /) -> Archive: ...
def load(binary: _Path, arches: Sequence[str], /) -> list[_Loaded]: ...
def parse_code_object(data: bytes | bytearray | memoryview, /) -> _CodeObject: ...
def split(*, inputs: Sequence[_Path], output_dir: _Path | None,
          in_place: bool, per_arch: bool, groups: Sequence[str],
          rules: Sequence[_Path], shipped_rules: _Path | None,
          arches: Sequence[str], prefix: str | None,
          archive_dir: _Path | None, threads: int, level: int,
          compress: bool, dry_run: bool, execute: bool,
          progress: _Progress | None
          ) -> tuple[tuple[_SplitFile, ...], tuple[_SplitCodeObject, ...],
                     tuple[_SplitArchive, ...], _SplitResult | None,
                     tuple[str, ...]]: ...
def split_wheel(wheel: _Path, output_dir: _Path, *, groups: Sequence[str],
                rules: Sequence[_Path], shipped_rules: _Path | None,
                arches: Sequence[str], threads: int, level: int,
                compress: bool, wheel_level: int, progress: _Progress | None
                ) -> tuple[str, tuple[tuple[str, str, str], ...],
                           tuple[str, ...]]: ...
def verify_binaries(paths: Sequence[_Path], arches: Sequence[str], /
                    ) -> tuple[list[_VerifiedBinary],
                               list[tuple[str, int]]]: ...
def error_name(code: int, /) -> str: ...
def _set_error_factory(factory: Callable[[int, str, int, str, str], BaseException], /) -> None: ...
