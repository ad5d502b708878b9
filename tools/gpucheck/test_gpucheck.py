"""gpucheck.py's own logic, on this machine (no GPU needed): results are counted with every skip
a failure, a binary that cannot start or prints nothing fails with its output, a step that
raises or comes too late is recorded and the run goes on, and the machine's own libraries are
preferred where they hold the symbol versions needed. Run by gpucheck_test.go in `make test`."""
import json
import lzma
import os
import stat
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpucheck as gc  # noqa: E402

GO_OUTPUT = """=== RUN   TestPTXEmbedded
--- PASS: TestPTXEmbedded (0.00s)
=== RUN   TestGPUMatchesReference
    gpu_test.go:23: runs only on a CUDA device with a device; no CUDA device
--- SKIP: TestGPUMatchesReference (0.00s)
BenchmarkGPU/bf16/N=16384-16         	      10	   4000000 ns/op	1245000.00 MB/s
PASS
"""


@pytest.fixture
def work(tmp_path, monkeypatch):
    w = tmp_path / "work"
    w.mkdir()
    monkeypatch.setattr(gc, "WORK", str(w))
    monkeypatch.setattr(gc, "LIB_USED", str(w / "lib"))
    return w


def script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_go_tests_count_skips_as_failures(work, tmp_path):
    script(work / "x.test", f"cat <<'EOF'\n{GO_OUTPUT}EOF\n")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    c = gc.Check(str(out_dir))
    rec = c.step("go x", gc.go_tests, "x.test", [], str(out_dir), 30)
    assert rec["outcome"] == "FAIL" and "TestGPUMatchesReference" in rec["reason"]
    skipped = [t for t in rec["tests"] if t["outcome"] == "SKIP"]
    assert skipped[0]["reason"].startswith("gpu_test.go:23: runs only on a CUDA device")
    assert rec["benchmarks"][0]["bench"] == "BenchmarkGPU/bf16/N=16384" and rec["benchmarks"][0]["GB_per_s"] == 1245.0
    assert c.counts() == (1, 0, 1)
    doc = json.loads((out_dir / "results.json").read_text())
    assert doc["ok"] is False and doc["skipped"] == 1
    summary = (out_dir / "summary.txt").read_text()
    assert "1 passed, 0 failed, 1 skipped" in summary and "RESULT: FAIL" in summary
    assert "x.test" in (out_dir / "x.test.log").read_text().splitlines()[0]


def test_binary_that_cannot_start_or_says_nothing(work, tmp_path):
    out = str(tmp_path)
    rec = gc.go_tests("missing.test", [], out, 30)
    assert rec["outcome"] == "FAIL" and "cannot start" in rec["reason"] and rec["exit"] == -2
    script(work / "loader.test", "echo 'error while loading shared libraries: libopenblas.so.0' >&2; exit 127\n")
    rec = gc.go_tests("loader.test", [], out, 30)
    assert rec["outcome"] == "FAIL" and "libopenblas.so.0" in rec["reason"] and "printed no test result (exit 127)" in rec["reason"]
    script(work / "quiet.test", "echo 'testing: warning: no tests to run'; echo PASS\n")
    rec = gc.go_tests("quiet.test", [], out, 30)
    assert rec["outcome"] == "FAIL" and "printed no test result" in rec["reason"]
    script(work / "slow.test", "echo '--- PASS: TestA (0.00s)'; sleep 30\n")
    rec = gc.go_tests("slow.test", [], out, 1)
    assert rec["outcome"] == "FAIL" and "exited -1 after its tests passed" in rec["reason"] and "TIMED OUT" in rec["reason"]


def test_a_failing_step_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    c = gc.Check(str(tmp_path))
    c.step("raises", lambda: {}["missing"])
    c.step("fine", lambda: {"figure": 1})
    # A step whose tests passed but whose binary exited non-zero still counts as a failure.
    c.step("exit", lambda: {"tests": [{"test": "TestA", "outcome": "PASS"}], "outcome": "FAIL", "reason": "exit 2"})
    monkeypatch.setattr(gc, "BUDGET_S", 0)
    c.step("late", lambda: {"figure": 2})
    raised, fine, _, late = c.steps
    assert raised["outcome"] == "FAIL" and "KeyError: 'missing'" in raised["reason"]
    assert fine["outcome"] == "PASS" and fine["figure"] == 1
    assert late["outcome"] == "FAIL" and late["reason"].startswith("not run: the check's 0 s budget was spent")
    assert c.counts() == (2, 3, 0)


def test_only_runs_the_named_steps_and_what_they_need(tmp_path):
    c = gc.Check(str(tmp_path), ["sanitizer", "load"])
    assert c.step("environment", lambda: {"figure": 1})["outcome"] == "PASS"  # always run
    assert c.step("go cuda", lambda: 1 / 0) is None  # left out: neither run nor recorded
    assert c.step("compute-sanitizer", lambda: {})["outcome"] == "PASS"
    assert c.step("flatgpu load", lambda: {"outcome": "FAIL", "reason": "x"})["outcome"] == "FAIL"
    assert [s["step"] for s in c.steps] == ["environment", "compute-sanitizer", "flatgpu load"]
    assert c.counts() == (2, 1, 0)
    doc = json.loads((tmp_path / "results.json").read_text())
    assert doc["only"] == ["sanitizer", "load"] and doc["budget_s"] == gc.BUDGET_S
    assert "only the steps matching sanitizer, load" in (tmp_path / "summary.txt").read_text().splitlines()[0]


def test_libraries_prefer_the_machines_own(tmp_path, work, monkeypatch):
    here = tmp_path / "folder"
    (here / "lib").mkdir(parents=True)
    monkeypatch.setattr(gc, "HERE", str(here))
    for name in ("libstdc++.so.6", "libopenblas.so.0", "libgfortran.so.5"):
        with lzma.open(here / "lib" / (name + ".xz"), "wb") as f:
            f.write(b"ours " + name.encode())
    spec = {"binaries_need": {"libstdc++.so.6": ["GLIBCXX_3.4.30"], "libopenblas.so.0": [], "libc.so.6": ["GLIBC_2.34"]},
            "packed": {"libstdc++.so.6": {"libc.so.6": ["GLIBC_2.36"]}, "libopenblas.so.0": {"libgfortran.so.5": ["GFORTRAN_8"]},
                       "libgfortran.so.5": {}}}
    (here / "libs.json").write_text(json.dumps(spec))
    system = {"libgfortran.so.5": {"GFORTRAN_7"},  # too old for our openblas
              "libstdc++.so.6": {"GLIBCXX_3.4.29", "GLIBCXX_3.4.30", "GLIBCXX_3.4.32"}}
    monkeypatch.setattr(gc, "system_library", lambda s: "/sys/" + s if s in system else None)
    monkeypatch.setattr(gc, "defined_versions", lambda path: system[os.path.basename(path)])
    monkeypatch.setattr(gc.platform, "libc_ver", lambda: ("glibc", "2.35"))
    rec = gc.libraries()
    d = rec["libraries"]
    assert d["libstdc++.so.6"].startswith("the machine's"), d
    assert d["libopenblas.so.0"] == "ours: the machine has none"
    assert d["libgfortran.so.5"].endswith("lacks GFORTRAN_8"), d  # needed by our openblas
    assert sorted(os.listdir(gc.LIB_USED)) == ["libgfortran.so.5", "libopenblas.so.0"]
    assert rec.get("outcome") is None and rec["glibc_needed"] == "2.34"
    # An older machine: its libstdc++ lacks the version, so ours comes, and ours needs glibc 2.36.
    system["libstdc++.so.6"] = {"GLIBCXX_3.4.28"}
    rec = gc.libraries()
    assert rec["libraries"]["libstdc++.so.6"].endswith("lacks GLIBCXX_3.4.30")
    assert rec["outcome"] == "FAIL" and "need glibc 2.36, this machine has 2.35" in rec["reason"]


def test_defined_versions_of_real_libraries():
    """The machine's own libgomp and libstdc++ (needle links them): libgomp's OMP_1.0 is stored
    as the tail of GOMP_1.0 in its string table, which a search of the file's bytes would miss."""
    gomp, stdcxx = gc.system_library("libgomp.so.1"), gc.system_library("libstdc++.so.6")
    if not gomp or not stdcxx:
        pytest.skip("libgomp or libstdc++ is not installed here")
    assert {"OMP_1.0", "OMP_3.0", "GOMP_4.5"} <= gc.defined_versions(gomp)
    assert {"GLIBCXX_3.4.30", "CXXABI_1.3.13"} <= gc.defined_versions(stdcxx)
    with pytest.raises(ValueError, match="not a 64-bit ELF"):
        gc.defined_versions(__file__)


def test_unpack_leaves_the_folder_as_built(tmp_path, work, monkeypatch):
    here = tmp_path / "folder"
    (here / "sub").mkdir(parents=True)
    (here / "lib").mkdir()
    with lzma.open(here / "sub" / "a.test.xz", "wb") as f:
        f.write(b"binary")
    (here / "plain.txt").write_text("x")
    (here / "lib" / "libx.so.1.xz").write_bytes(b"")
    monkeypatch.setattr(gc, "HERE", str(here))
    gc.unpack()
    assert (work / "sub" / "a.test").read_bytes() == b"binary" and os.access(work / "sub" / "a.test", os.X_OK)
    assert (work / "plain.txt").read_text() == "x" and not (work / "lib" / "libx.so.1").exists()
    assert sorted(os.listdir(here / "sub")) == ["a.test.xz"]


def test_sanitizer_stops_where_it_refuses_the_device(work, tmp_path, monkeypatch):
    """A sanitizer that refuses the device fails its first run with its output, and the other
    runs are recorded as not run, saying why, instead of each failing the same way."""
    tool = tmp_path / "compute-sanitizer"
    script(tool, "echo '========= Error: Device not supported'; echo '========= ERROR SUMMARY: 1 error'; exit 99\n")
    monkeypatch.setattr(gc, "find_cuda_tool", lambda name: str(tool))
    rec = gc.sanitizer(str(tmp_path))
    first, *rest = rec["tests"]
    assert first["outcome"] == "FAIL" and "Device not supported" in first["reason"] and first["errors"] == 1
    assert len(rest) == 3 * len(gc.SANITIZED) - 1
    assert all(t["outcome"] == "FAIL" and "refused the device" in t["reason"] for t in rest)
