# SPDX-License-Identifier: MIT
"""kpack.plan(), kpack.split(), kpack.split_wheel() and
kpack.verify_binary(): libkpack's producer through the binding, on a tree
holding Debian's librocrand, checked against what the kpack tool plans,
writes and verifies for the same input."""
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import kpack
from conftest import BUILD, KPACK, kpack_json, kpack_tool
from test_wheel_split import DIST, FAT_NAME, write_wheel

PHASES = ["reading", "transforming", "packing", "writing"]
SHIPPED_RULES = BUILD / "share" / "kpack" / "split-rules.conf"


def snapshot(root: Path):
    """Every path below `root` with its mode and content (a link's
    target); None when `root` does not exist."""
    if not os.path.lexists(root):
        return None
    found = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(top) / name
            st = path.lstat()
            if path.is_symlink():
                found[str(path.relative_to(root))] = ("link",
                                                      os.readlink(path))
            elif path.is_dir():
                found[str(path.relative_to(root))] = ("dir", st.st_mode)
            else:
                found[str(path.relative_to(root))] = (st.st_mode,
                                                      path.read_bytes())
    return found


@pytest.fixture(scope="module")
def rand_in(tmp_path_factory, librocrand) -> Path:
    """A tree: librocrand (a fat binary), a link to it and a text file."""
    tree = tmp_path_factory.mktemp("producer") / "rand"
    tree.mkdir()
    (tree / "librocrand.so.1.1").write_bytes(librocrand.read_bytes())
    (tree / "librocrand.so.1").symlink_to("librocrand.so.1.1")
    (tree / "README.txt").write_text("librocrand, split by kpack\n")
    return tree


def test_plan_lists_what_the_tool_writes_and_writes_nothing(tmp_path,
                                                           rand_in):
    before = snapshot(rand_in)
    out = tmp_path / "out"
    plan = kpack.plan(rand_in, out, prefix="rand_lib")
    assert snapshot(rand_in) == before and not out.exists()
    assert {f.path: (f.type, f.kind) for f in plan.files} == {
        "": ("directory", None), "README.txt": ("file", "not_elf"),
        "librocrand.so.1": ("symlink", None),
        "librocrand.so.1.1": ("file", "fat")}
    (fat,) = [i for i, f in enumerate(plan.files) if f.kind == "fat"]
    assert plan.files[fat].destination == str(out / "librocrand.so.1.1")
    tool = tmp_path / "tool"
    kpack_tool("split", "-q", "-o", tool, "--prefix", "rand_lib", rand_in)
    written = sorted(p.name for p in (tool / ".kpack").iterdir())
    assert sorted(Path(a.name).name for a in plan.archives) == written
    assert len(plan.code_objects) == len(written) == 7
    for i, a in enumerate(plan.archives):
        assert a.path == str(out / a.name) and a.prefix == "rand_lib"
        assert a.name == f".kpack/rand_lib_{a.arch}.kpack"
        assert (a.keys_added, a.keys_carried, a.keys_removed) == (1, 0, 0)
        assert not a.existed and not a.deleted
    for c in plan.code_objects:
        assert (c.key, c.file) == ("librocrand.so.1.1#0", fat)
        archive = plan.archives[c.archive]
        assert archive.arch == c.arch
        with kpack.open(tool / archive.name) as a:
            assert len(a.read(c.key, c.arch)) == c.size


def test_a_per_arch_plan_is_the_tools_dry_run(tmp_path, rand_in):
    group = "MI_2xx=gfx90a,gfx908"
    plan = kpack.plan([rand_in], tmp_path / "out", per_arch=True,
                      groups=[group], shipped_rules=SHIPPED_RULES)
    rows = kpack_json("split", "--per-arch", "--dry-run", "--json", "-o",
                      tmp_path / "out", "--group", group, rand_in)
    kinds = {"file": "file", "symlink": "symlink", "hard_link": "hardlink"}
    ours = [{"path": f.path, "kind": kinds[f.type], "tree": f.output_tree,
             "why": f.why} for f in plan.files if f.type != "directory"]
    ours += [{"path": a.name, "kind": "archive", "tree": a.output_tree,
              "why": f"code objects for {a.arch}"} for a in plan.archives]
    assert ours == rows
    assert {a.output_tree for a in plan.archives} == {
        "gfx1030", "gfx803", "gfx900", "gfx906", "MI_2xx"}
    assert not (tmp_path / "out").exists()


def test_split_writes_what_the_tool_writes_and_both_verifies_accept_it(
        tmp_path, rand_in):
    out, tool = tmp_path / "out", tmp_path / "tool"
    result = kpack.split(rand_in, out, prefix="rand_lib")
    kpack_tool("split", "-q", "-o", tool, "--prefix", "rand_lib", rand_in)
    assert snapshot(out) == snapshot(tool)
    done = kpack_tool("verify", "--binary", out, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    checked = kpack.verify_binary(out)
    assert checked.ok and checked.directories == ((str(out), 1),)
    (binary,) = checked
    assert binary.ok and binary.kind == "kpackified"
    assert binary.path == str(out / "librocrand.so.1.1")
    arches = {a.arch for a in result.plan.archives}
    assert set(binary.recorded_arches) == arches
    (record,) = binary.records
    assert record.ok and record.kernel == "librocrand.so.1.1"
    assert record.checked == "recorded" and binary.loads == 7
    assert {(ld.agent, ld.archive) for ld in record.loads} == {
        (a.arch, a.path) for a in result.plan.archives}
    sizes = {c.arch: c.size for c in result.plan.code_objects}
    assert all(ld.size == sizes[ld.agent] and ld.reason == "ok"
               for ld in record.loads)


def test_the_result_counts_are_the_plans_and_the_tools(tmp_path, rand_in):
    arches = ["gfx90a", "gfx1030"]
    plan = kpack.plan(rand_in, tmp_path / "out", arches=arches)
    result = kpack.split(rand_in, tmp_path / "out", arches=arches)
    assert result.plan == plan
    assert result.code_objects == len(plan.code_objects) == 3
    assert result.archives == len(plan.archives) == 3
    assert result.transformed == 1 and result.symbolic_links == 1
    summary = kpack_json("split", "--json", "-o", tmp_path / "tool",
                         "--arch", ",".join(arches), rand_in)
    for key, value in summary.items():
        if key not in ("seconds", "threads", "dropped"):
            assert getattr(result, key) == value, key
    assert dict(result.dropped) == summary["dropped"] == {
        "gfx803": 1, "gfx900:xnack-": 1, "gfx906:xnack-": 1,
        "gfx908:xnack-": 1}


def test_an_arch_that_is_no_target_raises_the_librarys_words(tmp_path,
                                                              rand_in):
    out = tmp_path / "out"
    for call in (kpack.plan, kpack.split):
        with pytest.raises(kpack.InvalidArgument) as e:
            call(rand_in, out, arches=["gfx9999"])
        assert e.value.code == 1
        assert e.value.detail.startswith("--arch 'gfx9999': not a GPU target")
    tool = kpack_tool("split", "-o", out, "--arch", "gfx9999", rand_in,
                      check=False)
    assert tool.returncode == 2
    assert f"kpack split: {e.value.detail}\n".encode() in tool.stderr
    assert not out.exists()


def test_an_arch_that_keeps_nothing_is_an_input_that_cannot_be_split(
        tmp_path, rand_in):
    with pytest.raises(kpack.InvalidFormat) as e:
        kpack.split(rand_in, tmp_path / "out", arches=["gfx1100"])
    tool = kpack_tool("split", "-o", tmp_path / "out", "--arch", "gfx1100",
                      rand_in, check=False)
    assert tool.returncode == 1
    assert tool.stderr.decode() == f"kpack: {e.value.detail}\n"
    assert not (tmp_path / "out").exists()


def test_options_that_contradict_each_other_are_invalid_arguments(
        tmp_path, rand_in):
    with pytest.raises(kpack.InvalidArgument):
        kpack.split(rand_in)  # no output
    with pytest.raises(kpack.InvalidArgument):
        kpack.split(rand_in, tmp_path / "out", groups=["g=gfx90a"])
    with pytest.raises(kpack.InvalidArgument, match="gfx90a is named"):
        kpack.plan(rand_in, tmp_path / "out", per_arch=True,
                   groups=["a=gfx90a", "b=gfx90a"])
    with pytest.raises(TypeError):
        kpack.plan(rand_in, tmp_path / "out", arches="gfx90a")
    assert not (tmp_path / "out").exists()


def test_progress_reports_each_phase_to_its_end(tmp_path, rand_in):
    calls = []
    kpack.split(rand_in, tmp_path / "out",
                progress=lambda *a: calls.append(a))
    assert [p for p in PHASES if any(c[0] == p for c in calls)] == PHASES
    assert [c[0] for c in calls] == sorted((c[0] for c in calls),
                                           key=PHASES.index)
    for phase in PHASES:
        done = [(d, t) for p, d, t in calls if p == phase]
        assert [d for d, _ in done] == sorted({d for d, _ in done})
        assert done[-1][0] == done[-1][1] and done[0][0] >= 1
    assert sum(1 for c in calls if c[0] == "packing") == 7


@pytest.mark.parametrize("phase", PHASES)
def test_a_progress_callback_returning_false_cancels_and_leaves_the_output(
        tmp_path, rand_in, phase):
    out = tmp_path / "out"
    out.mkdir()
    (out / "README.txt").write_text("an older file\n")
    (out / "librocrand.so.1.1").write_bytes(b"an older binary")
    before = snapshot(out)
    seen = []

    def progress(name, done, total):
        seen.append(name)
        return name != phase

    with pytest.raises(kpack.Cancelled) as e:
        kpack.split(rand_in, out, prefix="rand_lib", progress=progress)
    assert e.value.code == 15 and e.value.name == "KPACK_ERROR_CANCELLED"
    assert seen[-1] == phase and seen.count(phase) == 1
    assert snapshot(out) == before


def test_an_exception_in_the_progress_callback_is_raised_by_the_split(
        tmp_path, rand_in):
    calls = []

    def progress(name, done, total):
        calls.append(name)
        if name == "packing":
            raise ValueError("stop at the first code object")

    with pytest.raises(ValueError, match="stop at the first") as e:
        kpack.split(rand_in, tmp_path / "out", progress=progress)
    assert not isinstance(e.value, kpack.Error)
    assert calls.count("packing") == 1 and calls[-1] == "packing"
    assert not (tmp_path / "out").exists()


def test_dry_run_plans_and_writes_nothing(tmp_path, rand_in):
    before = snapshot(rand_in)
    result = kpack.split(rand_in, tmp_path / "out", per_arch=True,
                         dry_run=True)
    assert not (tmp_path / "out").exists() and snapshot(rand_in) == before
    assert result.plan == kpack.plan(rand_in, tmp_path / "out",
                                     per_arch=True)
    assert len(result.plan.code_objects) == 7


def test_split_in_place_rewrites_the_tree(tmp_path, rand_in):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "librocrand.so.1.1").write_bytes(
        (rand_in / "librocrand.so.1.1").read_bytes())
    result = kpack.split(tree, in_place=True, prefix="rand_lib", threads=1)
    assert result.transformed == 1 and result.copied == 0
    assert len(list((tree / ".kpack").iterdir())) == 7
    assert kpack.verify_binary(tree).ok
    again = kpack.split(tree, in_place=True, prefix="rand_lib")
    assert (again.transformed, again.kpackified, again.archives) == (0, 1, 0)


def test_split_in_place_beside_a_running_split_is_refused(tmp_path,
                                                         rand_in):
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "librocrand.so.1.1").write_bytes(
        (rand_in / "librocrand.so.1.1").read_bytes())
    # The C tool, held (SIGSTOP) with its first temporary file written.
    first = subprocess.Popen(
        [str(KPACK), "split", "--in-place", "--prefix", "rand_lib", "-j1",
         str(tree)], env={**os.environ, "KPACK_SPLIT_STOP_AFTER": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _, status = os.waitpid(first.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        before = snapshot(tree)
        with pytest.raises(kpack.IOFailure) as e:
            kpack.split(tree, in_place=True, prefix="rand_lib")
        assert e.value.code == 9 and e.value.errno == errno.EWOULDBLOCK
        assert e.value.file == str(tree)
        assert "another kpack split --in-place is writing in this tree" in \
            str(e.value)
        assert snapshot(tree) == before
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait() == 0
    assert kpack.verify_binary(tree).ok


def test_split_waiting_for_a_shared_archive_directory_can_be_cancelled(
        tmp_path, rand_in):
    # Two libraries of one directory share its archives: a split of the
    # second waits for the C tool's split of the first, held (SIGSTOP) with
    # its first temporary file written. The progress callback, asked again
    # while it waits, cancels it: nothing changed. Let go, the tool ends,
    # and a split of the second then keeps the first's kernels.
    lib = tmp_path / "build"
    lib.mkdir()
    rand = (rand_in / "librocrand.so.1.1").read_bytes()
    (lib / "liba.so").write_bytes(rand)
    (lib / "libb.so").write_bytes(rand)
    first = subprocess.Popen(
        [str(KPACK), "split", "--in-place", "-j1", str(lib / "liba.so")],
        env={**os.environ, "KPACK_SPLIT_STOP_AFTER": "1"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _, status = os.waitpid(first.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(status)
        before = snapshot(lib)
        finished = []

        def progress(phase, done, total):
            if phase == "reading" and done == total:
                finished.append(done)
            return len(finished) < 2  # the second: while it waits

        outcome = []

        def second():
            try:
                kpack.split(lib / "libb.so", in_place=True, progress=progress)
                outcome.append(None)
            except kpack.Error as e:
                outcome.append(e)

        waiting = threading.Thread(target=second)
        waiting.start()
        waiting.join(300)  # a wait no callback can end would hang here
        assert outcome, "the split went on waiting after its callback said no"
        assert isinstance(outcome[0], kpack.Cancelled)
        assert snapshot(lib) == before
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert first.wait() == 0
    kpack.split(lib / "libb.so", in_place=True)
    with kpack.open(lib / ".kpack" / "build_gfx1030.kpack") as archive:
        assert sorted(archive.binaries) == ["liba.so#0", "libb.so#0"]
    assert kpack.verify_binary(lib).ok


def test_verify_binary_reports_a_load_whose_archive_is_gone(tmp_path,
                                                            rand_in):
    out = tmp_path / "out"
    kpack.split(rand_in, out, prefix="rand_lib")
    removed = out / ".kpack" / "rand_lib_gfx1030.kpack"
    removed.unlink()
    checked = kpack.verify_binary([out])
    assert not checked.ok
    (binary,) = checked
    assert not binary.ok and binary.failures == 1 and binary.loads == 7
    failed = [ld for r in binary.records for ld in r.loads if not ld.ok]
    assert [(ld.agent, ld.reason, ld.status, ld.archive)
            for ld in failed] == [("gfx1030", "no-archive",
                                   "KPACK_ERROR_ARCHIVE_NOT_FOUND", None)]
    assert str(removed) in failed[0].paths
    assert f"looked for {removed}" in failed[0].message
    tool = kpack_tool("verify", "--binary", out, check=False)
    assert tool.returncode == 1
    assert failed[0].message.encode() in tool.stdout


def test_verify_binary_checks_the_agents_given(tmp_path, rand_in):
    out = tmp_path / "out"
    kpack.split(rand_in, out)
    (binary,) = kpack.verify_binary(out / "librocrand.so.1.1",
                                    ["gfx90a:sramecc+:xnack-"])
    (record,) = binary.records
    assert binary.ok and record.checked == binary.checked == "agents"
    (load,) = record.loads
    assert load.agent == "gfx90a:sramecc+:xnack-"
    assert load.archive == str(out / ".kpack" / "rand_gfx90a:xnack-.kpack")
    with pytest.raises(kpack.InvalidArgument) as e:
        kpack.verify_binary(out, ["gfx9x"])
    assert e.value.detail.startswith("--arch 'gfx9x': not a GPU target")


def test_verify_binary_reports_what_is_not_split(tmp_path, rand_in):
    missing = tmp_path / "missing"
    checked = kpack.verify_binary(
        [rand_in, rand_in / "librocrand.so.1.1", missing])
    assert [(b.path, b.kind, b.status, b.ok) for b in checked] == [
        (str(rand_in / "librocrand.so.1.1"), "fat", "KPACK_SUCCESS", False),
        (str(missing), "unreadable", "KPACK_ERROR_FILE_NOT_FOUND", False)]
    assert checked.directories == ((str(rand_in), 0),)
    assert not checked.ok
    assert kpack_tool("verify", "--binary", rand_in, check=False
                      ).returncode == 1


# ---- wheels -----------------------------------------------------------------

@pytest.fixture(scope="module")
def fat_wheel(tmp_path_factory, librocrand) -> Path:
    path = tmp_path_factory.mktemp("producer-wheel") / FAT_NAME
    write_wheel(path, {
        f"{DIST}/__init__.py": b"",
        f"{DIST}/lib/librocrand.so.1": librocrand.read_bytes(),
    })
    return path


def same_files(a: Path, b: Path):
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    return names


def test_split_wheel_writes_the_wheels_kpack_split_wheel_writes(tmp_path,
                                                                fat_wheel):
    tool, ours = tmp_path / "tool", tmp_path / "ours"
    kpack_tool("split", "-q", "--wheel", fat_wheel, "-o", tool)
    split = kpack.split_wheel(fat_wheel, ours)
    names = same_files(tool, ours)
    trees = ["gfx1030", "gfx803", "gfx900", "gfx906", "gfx908", "gfx90a"]
    assert split.host == str(ours / FAT_NAME)
    assert [d.tree for d in split.devices] == trees
    assert [d.extra for d in split.devices] == [f"device-{t}" for t in trees]
    assert sorted([Path(split.host).name] +
                  [Path(d.wheel).name for d in split.devices]) == names


def test_split_with_wheel_true_takes_groups_and_arches(tmp_path, fat_wheel):
    group, arches = "MI_2xx=gfx90a,gfx908", ["gfx90a", "gfx908"]
    tool, ours = tmp_path / "tool", tmp_path / "ours"
    kpack_tool("split", "-q", "--wheel", fat_wheel, "-o", tool, "--group",
               group, "--arch", ",".join(arches))
    split = kpack.split(fat_wheel, ours, wheel=True, groups=[group],
                        arches=arches)
    same_files(tool, ours)
    assert isinstance(split, kpack.WheelSplit)
    (device,) = split.devices
    assert device[:2] == ("MI_2xx", "device-mi-2xx")
    for bad in ({"prefix": "p"}, {"dry_run": True}, {"in_place": True}):
        with pytest.raises(kpack.InvalidArgument):
            kpack.split(fat_wheel, tmp_path / "x", wheel=True, **bad)
    assert not (tmp_path / "x").exists()


def test_split_wheel_refuses_what_is_not_a_wheel(tmp_path):
    wheel = tmp_path / FAT_NAME
    wheel.write_bytes(b"not a zip")
    with pytest.raises(kpack.InvalidFormat) as e:
        kpack.split_wheel(wheel, tmp_path / "out")
    assert e.value.file == str(wheel) and "not a zip" in e.value.detail
    with pytest.raises(kpack.FileNotFound):
        kpack.split_wheel(tmp_path / "none.whl", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_failed_tree_split_inside_a_wheel_raises_its_message(tmp_path,
                                                               fat_wheel):
    with pytest.raises(kpack.InvalidFormat) as e:
        kpack.split_wheel(fat_wheel, tmp_path / "out", arches=["gfx1100"])
    assert "gfx1100 matches no code object" in e.value.detail
    with pytest.raises(kpack.Cancelled):
        kpack.split_wheel(fat_wheel, tmp_path / "out",
                          progress=lambda p, d, t: p != "packing")
    assert not (tmp_path / "out").exists()


# ---- threads ----------------------------------------------------------------

def test_two_splits_in_two_threads_run_at_once(tmp_path, rand_in):
    """Both succeed and write the same, and the main thread runs Python
    while they do: it would not, past a few switch intervals, if a split
    held the GIL."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.001)
    results, windows, errors = {}, {}, []
    start = threading.Barrier(3)

    def worker(i):
        start.wait()
        begin = time.perf_counter()
        try:
            results[i] = kpack.split(rand_in, tmp_path / f"out{i}",
                                     prefix="rand_lib", threads=1)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
        windows[i] = (begin, time.perf_counter())

    try:
        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(2)]
        for t in threads:
            t.start()
        start.wait()
        ticks = []
        while any(t.is_alive() for t in threads):
            ticks.append(time.perf_counter())
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    assert results[0].code_objects == results[1].code_objects == 7
    assert snapshot(tmp_path / "out0") == snapshot(tmp_path / "out1")
    assert kpack.verify_binary([tmp_path / "out0", tmp_path / "out1"]).ok
    begin = max(w[0] for w in windows.values())
    end = min(w[1] for w in windows.values())
    inside = [x for x in ticks if begin + 0.005 < x < end]
    assert end - begin > 0.02, "the two splits did not overlap"
    assert len(inside) > 10, f"{len(inside)} ticks while both splits ran"
