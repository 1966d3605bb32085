# SPDX-License-Identifier: MIT
"""Threads reading one archive: every result equal to a lone read. How much
faster two threads are is printed, not asserted."""
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import kpack

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
