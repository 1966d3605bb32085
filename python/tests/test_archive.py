# SPDX-License-Identifier: MIT
"""kpack.open() and Archive against archives the C tool wrote."""
import pathlib

import pytest

import kpack
from conftest import kpack_json, kpack_tool


@pytest.fixture(params=["zstd", "raw"])
def archive_path(request, rand_zstd, rand_raw):
    return rand_zstd if request.param == "zstd" else rand_raw


def test_every_kernel_reads_as_kpack_cat_writes_it(archive_path):
    with kpack.open(archive_path) as a:
        pairs = [(r.binary, r.arch) for r in a.kernels(code_objects=False)]
        assert len(pairs) == 7
        for binary, arch in pairs:
            expected = kpack_tool("cat", archive_path, binary, arch).stdout
            assert a.read(binary, arch) == expected


def test_records_are_kpack_list_json(archive_path):
    listed = kpack_json("list", "--json", archive_path)
    with kpack.open(archive_path) as a:
        records = list(a.kernels(code_objects=False))
    assert [(r.binary, r.arch, r.type, r.size, r.stored_size)
            for r in records] == [
        (e["binary"], e["arch"], e["type"], e["size"], e["stored_size"])
        for e in listed]
    assert all(r.code_object is None and r.kernels == () for r in records)


def test_kernels_are_kpack_list_kernels_json(rand_zstd):
    listed = kpack_json("list", "--kernels", "--json", rand_zstd)
    fields = [f for f in kpack.Kernel._fields]
    with kpack.open(rand_zstd) as a:
        rows = [(r.binary, r.arch, r.code_object.target, k)
                for r in a.kernels() for k in r.kernels]
    assert len(rows) == len(listed) > 100
    for (binary, arch, target, k), e in zip(rows, listed):
        assert (binary, arch, target) == (e["binary"], e["arch"], e["target"])
        assert list(k) == [e[f] for f in fields]


def test_arches_and_binaries_are_the_tocs(archive_path):
    (info,) = kpack_json("info", "--json", archive_path)
    with kpack.open(archive_path) as a:
        assert a.binaries == ("lib/librocrand.so.1#0",)
        assert list(a.arches) == info["gfx_arches"]
        assert a.binary_arches(a.binaries[0]) == tuple(sorted(a.arches))
        assert len(a) == 7
        assert a.compression == info["compression_scheme"]
        assert a.group_name == info["group_name"]
        assert a.gfx_arch_family == info["gfx_arch_family"]


def test_parse_code_object_reads_what_kernels_decoded(rand_zstd):
    with kpack.open(rand_zstd) as a:
        for r in a.kernels():
            co = kpack.parse_code_object(a.read(r.binary, r.arch))
            assert co == r.code_object
            assert co.target == r.arch and co.version >= 3


def test_open_takes_path_objects_and_bytes(rand_zstd):
    with kpack.open(pathlib.Path(rand_zstd)) as a:
        assert a.path == str(rand_zstd)
    with kpack.open(bytes(rand_zstd)) as a:
        assert len(a) == 7


def test_close_is_idempotent_and_later_calls_raise_value_error(rand_zstd):
    a = kpack.open(rand_zstd)
    binary = a.binaries[0]
    it = a.kernels()
    with a:
        pass
    assert a.closed
    a.close()
    for call in (lambda: a.read(binary, "gfx1030"), lambda: next(it),
                 lambda: a.binary_arches(binary), lambda: len(a)):
        with pytest.raises(ValueError, match="closed archive"):
            call()
    assert "closed" in repr(a)


def test_iteration_ends_and_stays_ended(rand_zstd):
    with kpack.open(rand_zstd) as a:
        it = a.kernels(code_objects=False)
        assert len(list(it)) == 7
        assert list(it) == []
