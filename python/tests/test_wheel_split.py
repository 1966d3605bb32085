# SPDX-License-Identifier: MIT
"""`kpack split --wheel`: a fat wheel made of real HIP binaries (Debian's
librocrand and an extension module built by hipcc for two GPUs) split into
a host wheel and device wheels, which pip installs from a directory with
no index, and which the loader then finds where the host binaries look."""
import base64
import json
import csv
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import KPACK, kpack_tool

DIST = "ratpkg"
VERSION = "1.0"
TAGS = "{0}-{0}-linux_x86_64".format(
    "cp%d%d" % sys.version_info[:2])
FAT_NAME = f"{DIST}-{VERSION}-{TAGS}.whl"
MODULE = "gpumod" + sysconfig.get_config_var("EXT_SUFFIX")
# librocrand's arches, and the module's (gfx90a:xnack- and gfx1030).
TREES = ["gfx1030", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a"]

GPU_MODULE = r"""
#include <Python.h>
#include <hip/hip_runtime.h>

__global__ void add_one(int* p) { p[threadIdx.x] += 1; }

static PyObject* answer(PyObject* self, PyObject* args) {
  (void)self;
  (void)args;
  return PyLong_FromLong(42);
}

static PyMethodDef methods[] = {
    {"answer", answer, METH_NOARGS, "42"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "gpumod", NULL, -1,
                                    methods};
PyMODINIT_FUNC PyInit_gpumod(void) { return PyModule_Create(&module); }
"""


def run(*cmd, check=True, **kw):
    return subprocess.run([str(c) for c in cmd], check=check, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def record_hash(data: bytes) -> str:
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def write_wheel(path: Path, files: dict, root_is_purelib=False):
    """A wheel holding `files` ({name: bytes}), with a RECORD of its own:
    how a build backend would write the fat wheel."""
    dist_info = f"{DIST}-{VERSION}.dist-info"
    files = dict(files)
    files[f"{dist_info}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n"
        "Summary: HIP code in a wheel\nRequires-Python: >=3.9\n\n"
        "A fat wheel.\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: kpack-tests\n"
        f"Root-Is-Purelib: {'true' if root_is_purelib else 'false'}\n"
        f"Tag: {TAGS}\n").encode()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in files.items():
        writer.writerow([name, record_hash(data), len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    files[f"{dist_info}/RECORD"] = record.getvalue().encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name.endswith(".so") or ".so." in
                                  name else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)


@pytest.fixture(scope="session")
def gpu_module(tmp_path_factory) -> Path:
    """A Python extension module with device code for gfx90a:xnack- and
    gfx1030, built by hipcc."""
    work = tmp_path_factory.mktemp("hipcc")
    src = work / "gpumod.hip"
    src.write_text(GPU_MODULE)
    out = work / MODULE
    include = sysconfig.get_paths()["include"]
    run("hipcc", "--offload-arch=gfx90a:xnack-", "--offload-arch=gfx1030",
        "-fPIC", "-shared", f"-I{include}", src, "-o", out)
    return out


@pytest.fixture(scope="session")
def fat_wheel(tmp_path_factory, librocrand, gpu_module) -> Path:
    path = tmp_path_factory.mktemp("fat") / FAT_NAME
    write_wheel(path, {
        f"{DIST}/__init__.py": b"from . import gpumod\n",
        f"{DIST}/{MODULE}": gpu_module.read_bytes(),
        f"{DIST}/lib/librocrand.so.1": librocrand.read_bytes(),
    })
    return path


@pytest.fixture(scope="session")
def split_wheels(tmp_path_factory, fat_wheel) -> Path:
    out = tmp_path_factory.mktemp("wheels") / "out"
    kpack_tool("split", "-q", "--wheel", fat_wheel, "-o", out)
    return out


def device_name(tree):
    return f"{DIST}_device_{tree}-{VERSION}-{TAGS}.whl"


def read_metadata(wheel: Path, dist_info: str):
    with zipfile.ZipFile(wheel) as z:
        text = z.read(f"{dist_info}/METADATA").decode()
    head = text.split("\n\n", 1)[0]
    return [tuple(line.split(": ", 1)) for line in head.splitlines()]


def test_split_writes_a_host_wheel_and_one_device_wheel_per_processor(
        split_wheels):
    names = sorted(p.name for p in split_wheels.iterdir())
    assert names == sorted([FAT_NAME] + [device_name(t) for t in TREES])
    with zipfile.ZipFile(split_wheels / device_name("gfx90a")) as z:
        assert sorted(z.namelist()) == sorted([
            f"_kpack/{DIST}/{DIST}_gfx90a:xnack+.kpack",
            f"_kpack/{DIST}/{DIST}_gfx90a:xnack-.kpack",
            f"{DIST}_device_gfx90a-{VERSION}.dist-info/METADATA",
            f"{DIST}_device_gfx90a-{VERSION}.dist-info/WHEEL",
            f"{DIST}_device_gfx90a-{VERSION}.dist-info/RECORD"])
    with zipfile.ZipFile(split_wheels / FAT_NAME) as z:
        names = z.namelist()
    assert not [n for n in names if n.endswith(".kpack")]
    assert names[-1] == f"{DIST}-{VERSION}.dist-info/RECORD"


def test_host_metadata_names_each_device_wheel_in_an_extra(split_wheels):
    fields = read_metadata(split_wheels / FAT_NAME,
                           f"{DIST}-{VERSION}.dist-info")
    assert ("Name", DIST) in fields and ("Version", VERSION) in fields
    assert ("Summary", "HIP code in a wheel") in fields
    extras = [v for k, v in fields if k == "Provides-Extra"]
    assert extras == [f"device-{t}" for t in TREES] + ["device-all"]
    requires = [v for k, v in fields if k == "Requires-Dist"]
    for tree in TREES:
        line = (f'{DIST}-device-{tree}=={VERSION}; '
                f'extra == "device-{tree}"')
        assert line in requires
    dev = read_metadata(split_wheels / device_name("gfx1030"),
                        f"{DIST}_device_gfx1030-{VERSION}.dist-info")
    assert ("Name", f"{DIST}-device-gfx1030") in dev
    assert ("Version", VERSION) in dev


def test_every_wheel_keeps_the_input_tags(split_wheels):
    for wheel in split_wheels.iterdir():
        with zipfile.ZipFile(wheel) as z:
            (name,) = [n for n in z.namelist() if n.endswith(".dist-info/WHEEL")]
            text = z.read(name).decode()
        assert f"Tag: {TAGS}\n" in text
        assert "Root-Is-Purelib: false\n" in text


def test_wheel_unpack_verifies_every_record_hash(split_wheels, tmp_path):
    for wheel in sorted(split_wheels.iterdir()):
        dest = tmp_path / wheel.name
        run(sys.executable, "-m", "wheel", "unpack", "-d", dest, wheel)
        with zipfile.ZipFile(wheel) as z:
            (record,) = [n for n in z.namelist() if n.endswith("/RECORD")]
            rows = list(csv.reader(io.StringIO(z.read(record).decode())))
            for name, digest, size in rows:
                if name == record:
                    continue
                data = z.read(name)
                assert (digest, int(size)) == (record_hash(data), len(data))
            assert len(rows) == len(z.namelist())


def test_two_splits_write_the_same_bytes(fat_wheel, split_wheels, tmp_path):
    again = tmp_path / "again"
    kpack_tool("split", "-q", "--wheel", fat_wheel, "-o", again)
    for wheel in split_wheels.iterdir():
        assert (again / wheel.name).read_bytes() == wheel.read_bytes()


def test_the_host_binaries_are_those_a_tree_split_writes(
        fat_wheel, split_wheels, tmp_path):
    tree = tmp_path / "tree"
    with zipfile.ZipFile(fat_wheel) as z:
        z.extractall(tree)
    shutil.rmtree(tree / f"{DIST}-{VERSION}.dist-info")
    out = tmp_path / "out"
    kpack_tool("split", "-q", "--per-arch", "-o", out, "--prefix", DIST,
               "--archive-dir", f"_kpack/{DIST}", tree)
    with zipfile.ZipFile(split_wheels / FAT_NAME) as z:
        for rel in (f"{DIST}/lib/librocrand.so.1", f"{DIST}/{MODULE}"):
            assert z.read(rel) == (out / "generic" / rel).read_bytes()
    for t in TREES:
        with zipfile.ZipFile(split_wheels / device_name(t)) as z:
            for name in z.namelist():
                if name.endswith(".kpack"):
                    assert z.read(name) == (out / t / name).read_bytes()


@pytest.fixture(scope="session")
def venv_site(tmp_path_factory, split_wheels):
    """A fresh venv with the host wheel and the gfx90a device wheel,
    installed by pip from the split's directory alone."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run(sys.executable, "-m", "venv", venv, env=env)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "-q", "--no-index",
        "--disable-pip-version-check", "--find-links", split_wheels,
        f"{DIST}[device-gfx90a]", env=env)
    site = run(python, "-c",
               "import sysconfig; print(sysconfig.get_paths()['platlib'])",
               env=env).stdout.strip()
    return python, Path(site), env


def test_pip_installs_the_host_and_the_device_wheel_of_the_extra(venv_site):
    python, site, env = venv_site
    assert "No broken requirements" in run(python, "-m", "pip", "check",
                                           env=env).stdout
    listed = run(python, "-m", "pip", "list", "--format=freeze",
                 "--disable-pip-version-check", env=env).stdout.split()
    ours = sorted(x for x in listed if x.startswith(DIST))
    assert ours == [f"{DIST}-device-gfx90a=={VERSION}", f"{DIST}=={VERSION}"]
    assert sorted(p.name for p in (site / "_kpack" / DIST).iterdir()) == [
        f"{DIST}_gfx90a:xnack+.kpack", f"{DIST}_gfx90a:xnack-.kpack"]


def test_verify_passes_for_the_installed_gpu(venv_site):
    _, site, _ = venv_site
    done = run(KPACK, "verify", "--binary", "--arch", "gfx90a:xnack-", site,
               check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": OK,") == 2


def test_verify_names_the_archive_of_the_missing_device_wheel(venv_site):
    _, site, _ = venv_site
    done = run(KPACK, "verify", "--binary", "--arch", "gfx1030", site,
               check=False)
    assert done.returncode == 1
    missing = site / "_kpack" / DIST / f"{DIST}_gfx1030.kpack"
    text = done.stdout + done.stderr
    assert "KPACK_ERROR_ARCHIVE_NOT_FOUND" in text
    assert f"looked for {missing}" in text


def test_the_split_extension_module_imports(venv_site, tmp_path):
    python, _, env = venv_site
    out = run(python, "-c", f"import {DIST}.gpumod as m; print(m.answer())",
              env=env, cwd=tmp_path).stdout
    assert out.strip() == "42"


def test_a_failed_split_leaves_the_output_directory_as_it_was(
        fat_wheel, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / FAT_NAME).write_bytes(b"an older wheel")
    broken = tmp_path / FAT_NAME
    data = bytearray(fat_wheel.read_bytes())
    with zipfile.ZipFile(fat_wheel) as z:
        info = z.getinfo(f"{DIST}/__init__.py")
    # One byte of a stored file name's data changed: CRC and RECORD differ.
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + info.compress_size // 2] ^= 0xFF
    broken.write_bytes(bytes(data))
    done = kpack_tool("split", "-q", "--wheel", broken, "-o", out,
                      check=False)
    assert done.returncode == 1
    assert str(broken).encode() in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [FAT_NAME]
    assert (out / FAT_NAME).read_bytes() == b"an older wheel"


@pytest.mark.parametrize("args,words", [
    (["--wheel", "W.whl"], b"-o OUTDIR"),
    (["--wheel", "W.whl", "-o", "o", "--in-place"], b"--in-place"),
    (["--wheel", "W.whl", "-o", "o", "--prefix", "p"], b"--prefix"),
    (["--wheel", "W.whl", "-o", "o", "tree"], b"no other input"),
])
def test_bad_wheel_command_lines_are_usage_errors(tmp_path, args, words):
    done = kpack_tool("split", *args, check=False, cwd=tmp_path)
    assert done.returncode == 2
    assert words in done.stderr


@pytest.mark.parametrize("content,words", [
    (None, b"No such file"),
    (b"not a zip", b"not a valid wheel (not a zip archive"),
])
def test_what_is_not_a_wheel_is_refused(tmp_path, content, words):
    wheel = tmp_path / FAT_NAME
    if content is not None:
        wheel.write_bytes(content)
    done = kpack_tool("split", "--wheel", wheel, "-o", tmp_path / "out",
                      check=False)
    assert done.returncode == 1
    assert words in done.stderr and str(wheel).encode() in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_group_makes_one_device_wheel_and_arch_keeps_only_its_code(
        fat_wheel, tmp_path):
    out = tmp_path / "out"
    done = kpack_tool("split", "--wheel", fat_wheel, "-o", out, "--json",
                      "--group", "MI_2xx=gfx90a,gfx908", "--arch", "gfx90a",
                      "--arch", "gfx908")
    summary = json.loads(done.stdout)
    assert summary["host"] == str(out / FAT_NAME)
    assert [(d["tree"], d["extra"]) for d in summary["devices"]] == [
        ("MI_2xx", "device-mi-2xx")]
    device = out / f"{DIST}_device_mi_2xx-{VERSION}-{TAGS}.whl"
    assert summary["devices"][0]["wheel"] == str(device)
    with zipfile.ZipFile(device) as z:
        archives = sorted(n for n in z.namelist() if n.endswith(".kpack"))
    assert archives == [f"_kpack/{DIST}/{DIST}_{a}.kpack" for a in
                        ("gfx908:xnack-", "gfx90a:xnack+", "gfx90a:xnack-")]
    fields = read_metadata(out / FAT_NAME, f"{DIST}-{VERSION}.dist-info")
    assert [v for k, v in fields if k == "Provides-Extra"] == [
        "device-mi-2xx", "device-all"]
    assert (f'{DIST}-device-MI_2xx=={VERSION}; extra == "device-mi-2xx"'
            in [v for k, v in fields if k == "Requires-Dist"])
