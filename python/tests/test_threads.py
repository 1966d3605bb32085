# SPDX-License-Identifier: MIT
"""Threads reading one archive: every result equal to a lone read, and the
GIL free while a read runs. How much faster two threads are is printed,
not asserted (the machine may have other work)."""
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import kpack
from conftest import kpack_tool

ROUNDS = 6


def read_all(a, pairs):
    return [a.read(b, arch) for b, arch in pairs]


def test_threads_reading_one_archive_get_what_one_thread_gets(rand_zstd):
    with kpack.open(rand_zstd) as a:
        pairs = [(r.binary, r.arch) for r in a.kernels(code_objects=False)]
        expected = read_all(a, pairs)
        start = threading.Barrier(8)

        def worker(i):
            start.wait()
            order = pairs[i % len(pairs):] + pairs[:i % len(pairs)]
            return [(p, a.read(*p)) for _ in range(ROUNDS) for p in order]

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(worker, range(8)))
    want = dict(zip(pairs, expected))
    for result in results:
        assert len(result) == ROUNDS * len(pairs)
        for pair, data in result:
            assert data == want[pair]


def test_reads_scale_with_threads(rand_zstd, capsys):
    with kpack.open(rand_zstd) as a:
        pairs = [(r.binary, r.arch) for r in a.kernels(code_objects=False)]
        work = pairs * ROUNDS

        def timed(threads):
            begin = time.perf_counter()
            with ThreadPoolExecutor(threads) as pool:
                total = sum(map(len, pool.map(lambda p: a.read(*p), work)))
            return time.perf_counter() - begin, total

        one, total_one = timed(1)
        two, total_two = timed(2)
    assert total_one == total_two > 0
    with capsys.disabled():
        sys.stdout.write(
            f"\n  threads: {len(work)} reads ({total_one / 2**20:.0f} MiB): "
            f"1 thread {one:.2f} s, 2 threads {two:.2f} s "
            f"({one / two:.2f}x; {os.cpu_count()} CPUs)\n")


@pytest.fixture(scope="module")
def big_archive(tmp_path_factory):
    """One 128 MiB kernel, zstd-compressed: a read takes tens of ms."""
    tree = tmp_path_factory.mktemp("big") / "tree"
    kernel = tree / "lib" / "big.so#0" / "gfx90a" / "kernel.hsaco"
    kernel.parent.mkdir(parents=True)
    block = os.urandom(1 << 20)
    with open(kernel, "wb") as f:
        for i in range(128):
            f.write(block[i:] + block[:i])
    out = tree.parent / "big.kpack"
    kpack_tool("create", "-q", "-o", out, tree)
    return out


def test_the_gil_is_free_while_a_read_runs(big_archive):
    """While one thread is inside read(), the main thread runs Python: it
    would not, past one switch interval, if read() held the GIL."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    try:
        with kpack.open(big_archive) as a:
            for _ in range(5):
                window = []
                started = threading.Event()

                def reader():
                    started.set()
                    begin = time.perf_counter()
                    size = len(a.read("lib/big.so#0", "gfx90a"))
                    window.extend((begin, time.perf_counter(), size))

                t = threading.Thread(target=reader)
                ticks = []
                t.start()
                started.wait()
                while t.is_alive():
                    ticks.append(time.perf_counter())
                t.join()
                begin, end, size = window
                assert size == 128 << 20
                # Past 5 switch intervals after the call began, before it
                # ended: only a thread that got the GIL back can tick there.
                inside = [x for x in ticks if begin + 0.005 < x < end]
                if end - begin > 0.02 and len(inside) > 10:
                    return
    finally:
        sys.setswitchinterval(old)
    pytest.fail(f"no Python ran while read() ran ({end - begin:.3f} s, "
                f"{len(inside)} ticks inside)")
