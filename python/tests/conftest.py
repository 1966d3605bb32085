# SPDX-License-Identifier: MIT
#
# Fixtures of the kpack package's tests: archives and split binaries made by
# the C tool (build/bin/kpack) from Debian's librocrand1, which
# `contrib/demo.sh fetch` downloads into .cache/. `make check` runs these
# tests with the package installed into BUILD/python/site and sets
# KPACK_SOURCE_DIR and KPACK_TEST_BIN; run by hand, they default to this
# checkout and build/bin.
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("KPACK_SOURCE_DIR",
                           Path(__file__).resolve().parents[2]))
BIN = Path(os.environ.get("KPACK_TEST_BIN", ROOT / "build" / "bin"))
BUILD = Path(os.environ.get("KPACK_TEST_BUILD", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
KPACK = BIN / "kpack"


def kpack_tool(*args, check=True, **kw) -> subprocess.CompletedProcess:
    """Runs the C tool; stdout as bytes."""
    return subprocess.run([str(KPACK), *map(str, args)], check=check,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def kpack_json(*args):
    return json.loads(kpack_tool(*args).stdout)


@pytest.fixture(scope="session")
def librocrand() -> Path:
    """Debian's librocrand.so.1.1, a HIP fat binary (7 GPU targets)."""
    out = subprocess.run([str(ROOT / "contrib" / "demo.sh"), "fetch"],
                         check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip())


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kpack")


@pytest.fixture(scope="session")
def rand_zstd(work, librocrand) -> Path:
    """librocrand's code objects packed by `kpack create` (zstd)."""
    out = work / "rand.kpack"
    kpack_tool("create", "-q", "-o", out,
               "--fatbin", f"{librocrand}=lib/librocrand.so.1")
    return out


@pytest.fixture(scope="session")
def rand_raw(work, librocrand) -> Path:
    """The same, stored raw (scheme "none")."""
    out = work / "rand-raw.kpack"
    kpack_tool("create", "-q", "--no-compress", "-o", out,
               "--fatbin", f"{librocrand}=lib/librocrand.so.1")
    return out


@pytest.fixture(scope="session")
def split_tree(work, librocrand) -> Path:
    """librocrand split by `kpack split`: OUT/librocrand.so.1.1 kpack-ified,
    its code objects in OUT/.kpack/rand_lib_<arch>.kpack."""
    src = work / "split-in"
    src.mkdir()
    (src / "librocrand.so.1.1").write_bytes(librocrand.read_bytes())
    out = work / "split-out"
    kpack_tool("split", "-q", "-o", out, "--prefix", "rand_lib", src)
    return out


@pytest.fixture
def clean_env(monkeypatch):
    """No ROCM_KPACK_* variable from the caller's environment."""
    for name in list(os.environ):
        if name.startswith("ROCM_KPACK_"):
            monkeypatch.delenv(name)
    return monkeypatch
