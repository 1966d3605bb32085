# SPDX-License-Identifier: MIT
"""The package builds offline from Debian's packages, as the README says:
into a fresh venv, and for the system's python3 (installed here under a
scratch --root instead of /usr/local). The extension needs no
librocm_kpack: the library is linked in statically."""
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT

PIP = ["-m", "pip", "install", "-q", "--no-build-isolation", "--no-index",
       "--disable-pip-version-check"]
CHECK = ("import kpack, sys; "
         "assert kpack.__version__; "
         "print(kpack.__file__); print(kpack._kpack.__file__)")


# Without the PYTHONPATH the tests run with, where pip would find the
# package under test installed and remove it before installing its own.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run(*cmd, env=CLEAN_ENV, **kw):
    return subprocess.run([str(c) for c in cmd], check=True, text=True,
                          stdout=subprocess.PIPE, env=env, **kw)


def needed(shared_object):
    out = run("readelf", "-d", shared_object).stdout
    return sorted(line.split("[")[1].rstrip("]")
                  for line in out.splitlines() if "(NEEDED)" in line)


def test_pip_installs_into_a_fresh_venv_without_an_index(tmp_path):
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--system-site-packages", venv)
    python = venv / "bin" / "python"
    run(python, *PIP, ROOT / "python")
    files = run(python, "-c", CHECK, cwd=tmp_path).stdout.split()
    assert all(f.startswith(str(venv)) for f in files)
    extension = files[1]
    libs = needed(extension)
    assert "libzstd.so.1" in libs
    assert not [lib for lib in libs if "kpack" in lib or "msgpack" in lib]
    exported = run("nm", "-D", "--defined-only", extension).stdout.split()
    assert "PyInit__kpack" in exported
    assert not [name for name in exported if name.startswith("kpack_")]


def test_pip_installs_for_the_system_python(tmp_path):
    root = tmp_path / "root"
    run(sys.executable, *PIP, "--break-system-packages", "--root", root,
        ROOT / "python")
    sites = [d for d, _, names in os.walk(root) if "__init__.py" in names
             and d.endswith("/kpack")]
    assert len(sites) == 1 and "/usr/" in sites[0]
    env = dict(CLEAN_ENV, PYTHONPATH=os.path.dirname(sites[0]))
    files = run(sys.executable, "-c", CHECK, env=env, cwd=tmp_path).stdout
    assert files.split()[0].startswith(str(root))


def test_the_wheel_carries_the_typing_files(tmp_path):
    run(sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
        "--no-index", "--disable-pip-version-check", "--no-deps",
        "-w", tmp_path, ROOT / "python")
    (wheel,) = tmp_path.glob("kpack-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for member in ("kpack/__init__.py", "kpack/py.typed", "kpack/_kpack.pyi"):
        assert member in names
    assert any(n.startswith("kpack/_kpack.") and n.endswith(".so")
               for n in names)
