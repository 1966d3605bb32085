# SPDX-License-Identifier: MIT
"""Opening a 1 GB archive reads its header and table of contents only."""
import os
import shutil
import subprocess

import pytest

import kpack
from conftest import BUILD, kpack_tool

GIB = 1 << 30


@pytest.fixture(scope="session")
def gib_archive(tmp_path_factory):
    """A 1 GiB archive (one raw 1 GiB kernel) written by `kpack create
    --no-compress` from a sparse file, its zeros then turned into holes so
    it takes no disk. Kept in the build tree: writing it takes seconds."""
    cached = BUILD / "python" / "tests" / "1gib.kpack"
    if cached.exists():
        return cached
    tree = tmp_path_factory.mktemp("gib") / "tree"
    kernel = tree / "lib" / "big.so#0" / "gfx90a" / "kernel.hsaco"
    kernel.parent.mkdir(parents=True)
    with open(kernel, "wb") as f:
        f.truncate(GIB)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    kpack_tool("create", "-q", "--no-compress", "-o", tmp, tree)
    subprocess.run(["fallocate", "--dig-holes", str(tmp)], check=False)
    os.rename(tmp, cached)
    shutil.rmtree(tree)
    return cached


def io_counters():
    """(bytes read by read()/pread() calls, resident set size in bytes)."""
    with open("/proc/self/io") as f:
        io = dict(line.split(": ") for line in f.read().splitlines())
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return int(io["rchar"]), rss


def test_opening_a_gib_archive_reads_only_its_toc(gib_archive):
    assert os.path.getsize(gib_archive) > GIB
    read_before, rss_before = io_counters()
    with kpack.open(gib_archive) as a:
        records = list(a.kernels(code_objects=False))
        read_after, rss_after = io_counters()
    assert [(r.binary, r.arch, r.size) for r in records] == [
        ("lib/big.so#0", "gfx90a", GIB)]
    assert read_after - read_before < 64 * 1024
    assert rss_after - rss_before < 16 << 20
