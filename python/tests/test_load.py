# SPDX-License-Identifier: MIT
"""kpack.load(): the loader's search for a split binary's records, as the
HIP runtime runs it and as `kpack resolve --binary` reports it."""
import os

import pytest

import kpack
from conftest import kpack_json

ARCHES = ["gfx1030", "gfx803", "gfx900:xnack-", "gfx906:xnack-",
          "gfx908:xnack-", "gfx90a:xnack+", "gfx90a:xnack-"]


@pytest.mark.parametrize("arch", ARCHES)
def test_load_finds_each_arch_the_binary_was_split_for(
        split_tree, rand_zstd, arch, clean_env):
    (co,) = kpack.load(split_tree / "librocrand.so.1.1", [arch])
    assert (co.record, co.co_index, co.kernel) == (0, 0, "librocrand.so.1.1#0")
    assert co.arch == co.target == arch
    assert co.archive == str(split_tree / ".kpack" / f"rand_lib_{arch}.kpack")
    with kpack.open(rand_zstd) as a:  # the same bytes as the fat binary's
        assert co.data == a.read("lib/librocrand.so.1#0", arch)


def test_load_matches_kpack_resolve_for_an_agent_with_features(
        split_tree, clean_env):
    agent = "gfx90a:sramecc+:xnack-"
    binary = split_tree / "librocrand.so.1.1"
    resolved = kpack_json("resolve", "--binary", binary, "--arch", agent,
                          "--json")
    result = resolved["records"][0]["result"]
    (co,) = kpack.load(binary, [agent])
    assert (co.arch, co.target, co.archive, len(co.data)) == (
        result["arch"], result["target"], result["archive"], result["size"])
    assert co.target == "gfx90a:xnack-"


def test_load_takes_the_first_arch_an_archive_serves(split_tree, clean_env):
    (co,) = kpack.load(split_tree / "librocrand.so.1.1",
                       ["gfx1100", "gfx906:xnack-", "gfx1030"])
    assert co.arch == "gfx906:xnack-"


def test_load_through_a_symlinked_directory_finds_the_real_tree(
        split_tree, tmp_path, clean_env):
    os.symlink(split_tree, tmp_path / "view")
    (co,) = kpack.load(tmp_path / "view" / "librocrand.so.1.1", ["gfx1030"])
    assert co.archive == str(split_tree / ".kpack" / "rand_lib_gfx1030.kpack")


def test_load_honours_rocm_kpack_path(split_tree, tmp_path, clean_env):
    elsewhere = tmp_path / "archives"
    os.rename(split_tree / ".kpack", elsewhere)
    try:
        with pytest.raises(kpack.ArchiveNotFound):
            kpack.load(split_tree / "librocrand.so.1.1", ["gfx1030"])
        clean_env.setenv("ROCM_KPACK_PATH", str(elsewhere))
        (co,) = kpack.load(split_tree / "librocrand.so.1.1", ["gfx1030"])
        assert co.archive == str(elsewhere / "rand_lib_gfx1030.kpack")
    finally:
        os.rename(elsewhere, split_tree / ".kpack")
