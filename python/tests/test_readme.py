# SPDX-License-Identifier: MIT
"""The README's Python section works as written: its shell block, run in a
directory holding Debian's librocrand beside the checkout's python/ (as a
fresh Debian machine has it: /usr/bin first on PATH, the tool under test
next), makes a venv and installs the package; its Python block then runs
in that venv and prints what its comments say."""
import os
import re
import subprocess

from conftest import BIN, ROOT


def readme_section():
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## Python\n")
    end = text.index("\n## ", start + 1)
    return text[start + 1:end]


def blocks(section, kind):
    return re.findall(r"^```" + kind + r"\n(.*?)^```$", section,
                      re.MULTILINE | re.DOTALL)


def test_the_python_section_is_at_most_30_lines():
    assert len(readme_section().rstrip("\n").splitlines()) <= 30


def test_the_python_section_runs_as_written(tmp_path, librocrand):
    section = readme_section()
    (shell,) = blocks(section, "sh")
    (python,) = blocks(section, "python")
    (tmp_path / "librocrand.so.1.1").symlink_to(librocrand)
    (tmp_path / "python").symlink_to(ROOT / "python")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{BIN}:/usr/bin:/bin"
    subprocess.run(["bash", "-ec", shell], cwd=tmp_path, env=env, check=True,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c",
                          python], cwd=tmp_path, env=env, check=True,
                         text=True, stdout=subprocess.PIPE).stdout
    lines = out.splitlines()
    assert lines[0] == "('gfx90a:xnack-',) ('librocrand.so.1.1#0',)"
    assert lines[1].startswith("librocrand.so.1.1#0 gfx90a:xnack- ")
    archive = tmp_path / "out3" / ".kpack" / "rand_lib_gfx90a:xnack-.kpack"
    assert lines[2] == f"{archive} gfx90a:xnack- True"
    # The last comment of the block is what its last line prints.
    expected = python.rstrip("\n").splitlines()[-1].split("# ", 1)[1]
    assert lines[3] == expected
    assert str(tmp_path / "venv") in subprocess.run(
        [str(tmp_path / "venv" / "bin" / "python"), "-c",
         "import kpack; print(kpack.__file__)"], cwd=tmp_path, env=env,
        check=True, text=True, stdout=subprocess.PIPE).stdout
