# SPDX-License-Identifier: MIT
"""Every failure the package can report: its class, code, file and words."""
import errno
import os
import pickle
import shutil
import struct

import pytest

import kpack


def expect(exc_type, code, call):
    with pytest.raises(exc_type) as info:
        call()
    e = info.value
    assert isinstance(e, kpack.Error)
    assert e.code == code
    assert e.name == "KPACK_ERROR_" + {
        1: "INVALID_ARGUMENT", 2: "FILE_NOT_FOUND", 3: "INVALID_FORMAT",
        4: "UNSUPPORTED_VERSION", 5: "KERNEL_NOT_FOUND",
        6: "DECOMPRESSION_FAILED", 8: "NOT_IMPLEMENTED", 9: "IO_ERROR",
        10: "MSGPACK_PARSE_FAILED", 13: "ARCHIVE_NOT_FOUND",
        14: "ARCH_NOT_FOUND"}[code]
    assert e.name in str(e)
    return e


@pytest.fixture
def copy(tmp_path, rand_zstd):
    """A writable copy of the zstd archive."""
    path = tmp_path / "copy.kpack"
    shutil.copyfile(rand_zstd, path)
    return path


def patch(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


# ---- kpack.open -------------------------------------------------------------

def test_open_missing_file_is_file_not_found_with_errno(tmp_path):
    path = tmp_path / "none.kpack"
    e = expect(kpack.FileNotFound, 2, lambda: kpack.open(path))
    assert e.file == str(path) and e.errno == errno.ENOENT
    assert str(e) == f"{path}: KPACK_ERROR_FILE_NOT_FOUND: " \
        + os.strerror(errno.ENOENT)


def test_open_directory_is_io_failure_eisdir(tmp_path):
    e = expect(kpack.IOFailure, 9, lambda: kpack.open(tmp_path))
    assert e.errno == errno.EISDIR and e.strerror == os.strerror(errno.EISDIR)


def test_open_other_file_is_invalid_format_saying_why(tmp_path, librocrand):
    e = expect(kpack.InvalidFormat, 3, lambda: kpack.open(librocrand))
    assert e.errno is None and "magic" in e.detail


def test_open_short_file_is_invalid_format(tmp_path, copy):
    os.truncate(copy, 10)
    expect(kpack.InvalidFormat, 3, lambda: kpack.open(copy))


def test_open_version_2_is_unsupported_version(copy):
    patch(copy, 4, struct.pack("<I", 2))
    expect(kpack.UnsupportedVersion, 4, lambda: kpack.open(copy))


def test_open_toc_past_end_is_invalid_format_with_offset(copy):
    patch(copy, 8, struct.pack("<Q", os.path.getsize(copy) + 100))
    e = expect(kpack.InvalidFormat, 3, lambda: kpack.open(copy))
    assert "table of contents" in e.detail


def test_open_toc_that_is_no_msgpack_is_msgpack_parse_failed(copy):
    with open(copy, "rb") as f:
        toc_offset = struct.unpack("<Q", f.read(16)[8:16])[0]
    patch(copy, toc_offset, b"\xc1")  # a byte MessagePack reserves
    expect(kpack.MsgpackParseFailed, 10, lambda: kpack.open(copy))


# ---- Archive ----------------------------------------------------------------

def test_read_unknown_kernel_is_kernel_not_found_naming_it(rand_zstd):
    with kpack.open(rand_zstd) as a:
        e = expect(kpack.KernelNotFound, 5, lambda: a.read("nope#0", "gfx1030"))
        assert e.file == str(rand_zstd) and e.where == "nope#0 gfx1030"
        expect(kpack.KernelNotFound, 5,
               lambda: a.read(a.binaries[0], "gfx1100"))
        expect(kpack.KernelNotFound, 5, lambda: a.binary_arches("nope#0"))


def test_read_corrupt_frame_is_decompression_failed(copy):
    size = os.path.getsize(copy)
    with open(copy, "r+b") as f:
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xff]))
    failed = []
    with kpack.open(copy) as a:
        for r in a.kernels(code_objects=False):
            try:
                a.read(r.binary, r.arch)
            except kpack.DecompressionFailed as e:
                assert e.code == 6 and e.where == f"{r.binary} {r.arch}"
                failed.append(r.arch)
    assert len(failed) == 1


def test_read_after_the_file_shrank_is_io_failure(copy):
    with kpack.open(copy) as a:
        last = list(a.kernels(code_objects=False))[-1]
        os.truncate(copy, 4096)
        expect(kpack.IOFailure, 9, lambda: a.read(last.binary, last.arch))


def test_kernels_with_a_corrupt_code_object_raise_from_the_iteration(copy):
    with open(copy, "r+b") as f:
        f.seek(64 + 4 + 4 + 40)  # inside the first frame's first block
        f.write(b"\xff" * 16)
    with kpack.open(copy) as a:
        it = a.kernels()
        with pytest.raises(kpack.Error) as info:
            next(it)
        assert info.value.code in (3, 6)
        assert info.value.where == f"{a.binaries[0]} {a.arches[0]}"


def test_parse_code_object_of_other_bytes_is_invalid_format():
    e = expect(kpack.InvalidFormat, 3, lambda: kpack.parse_code_object(b"x" * 64))
    assert e.where == "code object"


def test_names_must_be_str_without_nul(rand_zstd):
    with kpack.open(rand_zstd) as a:
        with pytest.raises(TypeError):
            a.read(b"lib", "gfx1030")
        with pytest.raises(ValueError, match="NUL"):
            a.read("lib\0x", "gfx1030")
    with pytest.raises(TypeError):
        kpack.open(3.5)
    with pytest.raises(TypeError):
        kpack.parse_code_object("text")


# ---- kpack.load -------------------------------------------------------------

def test_load_missing_binary_is_file_not_found(tmp_path):
    e = expect(kpack.FileNotFound, 2,
               lambda: kpack.load(tmp_path / "x.so", ["gfx90a"]))
    assert e.errno == errno.ENOENT


def test_load_of_a_non_elf_file_is_invalid_format(rand_zstd):
    e = expect(kpack.InvalidFormat, 3, lambda: kpack.load(rand_zstd, ["gfx90a"]))
    assert e.detail


def test_load_of_a_fat_binary_is_invalid_format_saying_so(librocrand):
    e = expect(kpack.InvalidFormat, 3,
               lambda: kpack.load(librocrand, ["gfx90a"]))
    assert "fat binary" in e.detail


def test_load_of_a_binary_without_hip_code_is_invalid_format():
    e = expect(kpack.InvalidFormat, 3,
               lambda: kpack.load("/bin/sh", ["gfx90a"]))
    assert "no HIP device code" in e.detail


def test_load_without_its_archives_is_error_13(split_tree, tmp_path, clean_env):
    lonely = tmp_path / "lib.so"
    shutil.copyfile(split_tree / "librocrand.so.1.1", lonely)
    e = expect(kpack.ArchiveNotFound, 13, lambda: kpack.load(lonely, ["gfx90a"]))
    assert e.where == "record 0 (librocrand.so.1.1#0)"
    assert str(e).startswith(f"{lonely}: record 0 (librocrand.so.1.1#0): "
                             "KPACK_ERROR_ARCHIVE_NOT_FOUND")


def test_load_for_an_arch_no_archive_has_is_error_13(split_tree, clean_env):
    expect(kpack.ArchiveNotFound, 13,
           lambda: kpack.load(split_tree / "librocrand.so.1.1", ["gfx1100"]))


def test_load_from_an_archive_of_other_arches_is_error_14(split_tree, clean_env):
    clean_env.setenv("ROCM_KPACK_PATH",
                     str(split_tree / ".kpack" / "rand_lib_gfx1030.kpack"))
    expect(kpack.ArchNotFound, 14,
           lambda: kpack.load(split_tree / "librocrand.so.1.1", ["gfx90a"]))


def test_load_from_an_archive_without_the_kernel_is_kernel_not_found(
        split_tree, rand_zstd, clean_env):
    clean_env.setenv("ROCM_KPACK_PATH", str(rand_zstd))  # other TOC names
    expect(kpack.KernelNotFound, 5,
           lambda: kpack.load(split_tree / "librocrand.so.1.1", ["gfx90a:xnack-"]))


def test_load_disabled_is_not_implemented(split_tree, clean_env):
    clean_env.setenv("ROCM_KPACK_DISABLE", "1")
    expect(kpack.Unimplemented, 8,
           lambda: kpack.load(split_tree / "librocrand.so.1.1", ["gfx90a"]))


def test_load_needs_an_arch(split_tree):
    e = expect(kpack.InvalidArgument, 1,
               lambda: kpack.load(split_tree / "librocrand.so.1.1", []))
    assert isinstance(e, ValueError)
    with pytest.raises(TypeError):
        kpack.load(split_tree / "librocrand.so.1.1", "gfx90a")
    with pytest.raises(TypeError):
        kpack.load(split_tree / "librocrand.so.1.1", [90])


# ---- the exceptions themselves ---------------------------------------------

def test_errors_pickle_and_keep_their_fields(tmp_path):
    with pytest.raises(kpack.Error) as info:
        kpack.open(tmp_path / "none.kpack")
    e = pickle.loads(pickle.dumps(info.value))
    assert type(e) is kpack.FileNotFound
    assert (e.code, e.file, e.errno, str(e)) == (
        2, str(tmp_path / "none.kpack"), errno.ENOENT, str(info.value))


def test_every_status_has_its_class():
    for code in range(1, 15):
        cls = kpack._BY_CODE[code]
        assert issubclass(cls, kpack.Error) and cls is not kpack.Error
        assert cls(code).name == kpack._kpack.error_name(code)
    assert kpack.Error(99).name == "KPACK_ERROR_UNKNOWN"
