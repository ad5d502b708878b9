"""The GPU check (../shared/GPU.md): run on the GPU machine from the folder `make gpucheck` fills.

    python3 gpucheck/gpucheck.py OUTDIR [--budget SECONDS] [--only STEP,STEP]

This script IS the GPU check, so it knows it runs on the GPU machine: every test that skips
counts as a failure here, a binary that cannot start is a failure with its stderr, and it exits
non-zero when anything failed. Each step records its outcome (PASS or FAIL, with the reason)
and the run goes on; OUTDIR/results.json and OUTDIR/summary.txt are rewritten after every step,
so a run cut short still leaves what it measured. The steps, in order of what matters most:
  environment     nvidia-smi, driver, glibc, python and torch versions
  libraries       which packed libraries (lib/*.xz) the machine needs: its own where they hold
                  every symbol version the binaries need, ours only where they do not
  ptxas           ptxas -arch=sm_90 on each clang PTX the binaries carry
  go tests        the GPU tests of cuda, logprob, delta, flatgpu and bert (nngpu's kernels), with
                  the fatbin, then again with the PTX (NEEDLE_CUDA_IMAGE), NEEDLE_REQUIRE_GPU=1,
                  plus the logprob and delta GPU benchmarks
  python          needle_trainer's CUDA path (python/tests/test_cuda.py) under pytest (packed in pylib/)
  torch           the device's read bandwidth and bf16 GEMM rate by PyTorch, verl's log-prob paths,
                  and needle_trainer's CUDA log-prob and delta encode at the goal shapes
  flatgpu         parity with torch's fp32 matmul + topk; `needle bench search --gpu` at wiki-18's
                  shape against torch fp16 matmul + topk
  encoder         `needle bench encode --gpu` beside sentence-transformers fp16
  sanitizer       compute-sanitizer memcheck, racecheck and synccheck over the kernel tests, in
                  the time left (at most 180 s)
  flatgpu load    loading a 5M x 768 FAISS file (15 GB written to a temporary folder)
The whole check stops starting steps after --budget seconds (400 by default; a step not started
is a failure saying so): with the machine's start, one run leaves room in a session's 15 minutes
of device time for a second, shorter one. --only runs just the steps whose names
contain one of the words given (the first three always run), e.g. `--only sanitizer,load` for what
a first run had no time left for. The folder is unpacked into $TMPDIR/needle-gpucheck
and run from there (the folder itself is left as built). Needs python3, with torch (and numpy,
sentence-transformers) for the reference steps; nothing to install.
"""
import argparse
import glob
import json
import lzma
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
# Where the folder is unpacked and run (recreated by each run): the folder itself stays as it
# was built, small enough to carry again.
WORK = os.path.join(tempfile.gettempdir(), "needle-gpucheck")
LIB_USED = os.path.join(WORK, "lib")  # the packed libraries this machine needs, unpacked
BUDGET_S = 400  # no step starts after this many seconds (--budget); set by main
STARTED = time.time()

# The goal shape of the trainer log-probs: bf16 logits of N tokens over Qwen2.5's vocabulary.
GOAL_ROWS, GOAL_VOCAB = 16384, 151936
# The GPU flat index's goal shape: wiki-18 (21,015,324 passages x 768, e5).
WIKI_ROWS, WIKI_DIM = 21015324, 768
# The GPU encoder: the MiniLM folder travels here in fp16 (half_model.py), so the parity tests and
# sentence-transformers read the same weights; the e5-base shape has random weights.
MINILM = os.path.join(WORK, "cache", "models", "all-MiniLM-L6-v2")
ENCODE_PASSAGES = 50_000  # enough for a steady passages/s and the wiki-18 projection

RESULT_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
BENCH_LINE = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op(?:\s+([\d.]+) MB/s)?")


def remaining():
    return BUDGET_S - (time.time() - STARTED)


def tail(text, n=3000):
    return text if len(text) <= n else "..." + text[-n:]


ALWAYS = ("environment", "unpack", "libraries")  # steps --only keeps: every other step needs them


class Check:
    """The run's record: every step's outcome, written to OUTDIR after each step."""

    def __init__(self, out_dir, only=()):
        self.out = out_dir
        self.only = list(only)  # words of the step names to run (--only); empty: every step
        self.steps = []
        self.started = time.strftime("%Y-%m-%d %H:%M:%S %Z")

    def step(self, name, fn, *args, need_s=10):
        """Runs fn(*args), which returns a dict (its figures, "outcome" FAIL with a "reason" when
        it failed, "tests" when it ran tests); an exception is a FAIL with its traceback. A step
        that would start with less than need_s seconds of the budget left is a FAIL, not run. A
        step --only leaves out is neither run nor recorded: None."""
        if self.only and name not in ALWAYS and not any(w in name for w in self.only):
            return None
        began = time.time()
        if remaining() < need_s:
            rec = {"outcome": "FAIL", "reason": f"not run: the check's {BUDGET_S} s budget was spent "
                                                f"({remaining():.0f} s left, the step needs ~{need_s} s)"}
        else:
            try:
                rec = fn(*args) or {}
            except Exception:
                rec = {"outcome": "FAIL", "reason": tail(traceback.format_exc())}
        rec = dict(rec, step=name, seconds=round(time.time() - began, 1))
        if any(t["outcome"] != "PASS" for t in rec.get("tests", [])):
            rec["outcome"] = "FAIL"
            rec.setdefault("reason", "failed or skipped: " + ", ".join(
                t["test"] for t in rec["tests"] if t["outcome"] != "PASS")[:2000])
        rec.setdefault("outcome", "PASS")
        self.steps.append(rec)
        self.save()
        print(f"[{time.time() - STARTED:5.0f} s] {rec['outcome']} {name} ({rec['seconds']} s)"
              + (f": {rec['reason'][:300]}" if rec["outcome"] != "PASS" else ""), flush=True)
        return rec

    def counts(self):
        """(passed, failed, skipped) over every test result, and over every step that ran no tests."""
        c = {"PASS": 0, "FAIL": 0, "SKIP": 0}
        for s in self.steps:
            tests = s.get("tests") or []
            for t in tests:
                c[t["outcome"]] += 1
            if not tests or (s["outcome"] == "FAIL" and all(t["outcome"] == "PASS" for t in tests)):
                c[s["outcome"]] += 1  # a step without tests, or one that failed beyond them (exit code)
        return c["PASS"], c["FAIL"], c["SKIP"]

    def save(self):
        passed, failed, skipped = self.counts()
        doc = {"started": self.started, "seconds": round(time.time() - STARTED, 1), "budget_s": BUDGET_S,
               "only": self.only, "passed": passed, "failed": failed, "skipped": skipped,
               "ok": failed == 0 and skipped == 0, "steps": self.steps}
        write_atomic(os.path.join(self.out, "results.json"), json.dumps(doc, indent=1, default=str))
        write_atomic(os.path.join(self.out, "summary.txt"),
                     "\n".join(summary(self.steps, passed, failed, skipped, self.only)) + "\n")


def fail(rec, reason):
    """Marks rec failed, adding reason to any it has: a step keeps every cause."""
    rec["outcome"] = "FAIL"
    rec["reason"] = "; ".join(r for r in (rec.get("reason"), reason) if r)
    return rec


def write_atomic(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


# ---------------------------------------------------------------- environment and libraries

def environment():
    out = {"python": sys.version.split()[0], "glibc": " ".join(platform.libc_ver()), "machine": platform.node()}
    smi = shutil.which("nvidia-smi")
    if not smi:
        return fail(out, "no nvidia-smi on PATH: this is not a GPU machine (every GPU step below fails)")
    q = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                       capture_output=True, text=True, timeout=60)
    out["gpus"] = q.stdout.strip().splitlines()
    out["nvidia_smi"] = subprocess.run([smi], capture_output=True, text=True, timeout=60).stdout
    if q.returncode != 0 or not out["gpus"]:
        return fail(out, f"nvidia-smi lists no GPU: {tail(q.stderr, 500)}")
    return out


def system_library(soname):
    """The path of the machine's own copy of soname (ldconfig's cache, then the usual folders)."""
    try:
        text = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
        for m in re.finditer(r"^\s*" + re.escape(soname) + r" \(([^)]*)\) => (\S+)", text, re.M):
            if "x86-64" in m.group(1):
                return m.group(2)
    except (OSError, subprocess.SubprocessError):
        pass
    for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64"):
        if os.path.exists(os.path.join(d, soname)):
            return os.path.join(d, soname)
    return None


def defined_versions(path):
    """The symbol versions (e.g. GLIBCXX_3.4.30) an ELF64 library defines: the names of its
    .gnu.version_d entries (read from the file: no binutils needed on the GPU machine)."""
    import struct
    with open(path, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError(f"{path} is not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names = set()
    for _, sh_type, _, _, off, _, link, count, _, _ in sections:
        if sh_type != 0x6FFFFFFD:  # SHT_GNU_verdef; sh_info (count) entries, names in section link
            continue
        strtab = sections[link][4]
        for _ in range(count):
            aux, nxt = struct.unpack_from("<II", elf, off + 12)
            name_at, = struct.unpack_from("<I", elf, off + aux)
            start = strtab + name_at
            names.add(elf[start:elf.index(b"\0", start)].decode())
            off += nxt
    return names


def glibc_tuple(v):
    return tuple(int(x) for x in v.split("."))


def libraries():
    """Unpacks into lib/use only the packed libraries this machine lacks (or whose copy lacks a
    symbol version the binaries or the other packed libraries need), and checks glibc."""
    with open(os.path.join(HERE, "libs.json")) as f:
        spec = json.load(f)
    packed, ours, decisions = spec["packed"], set(), {}
    while True:  # a library of ours may need versions of another library: repeat until stable
        need = {}
        for needs in [spec["binaries_need"]] + [packed[s] for s in ours]:
            for soname, versions in needs.items():
                need.setdefault(soname, set()).update(versions)
        changed = False
        for soname in sorted(set(packed) - ours):
            own = system_library(soname)
            missing = sorted(set(need.get(soname, ())) - defined_versions(own)) if own else None
            if own and not missing:
                decisions[soname] = f"the machine's {own}"
                continue
            ours.add(soname)
            changed = True
            decisions[soname] = ("ours: the machine has none" if not own else
                                 f"ours: the machine's {own} lacks {', '.join(missing)}")
        if not changed:
            break
    shutil.rmtree(LIB_USED, ignore_errors=True)
    os.makedirs(LIB_USED)
    for soname in ours:
        with lzma.open(os.path.join(HERE, "lib", soname + ".xz")) as src, open(os.path.join(LIB_USED, soname), "wb") as dst:
            shutil.copyfileobj(src, dst)
    glibc_need = max((v.split("_", 1)[1] for s in ("libc.so.6", "libm.so.6") for v in need.get(s, ())
                      if v.startswith("GLIBC_2")), key=glibc_tuple, default="2.0")
    have = platform.libc_ver()[1] or "0"
    out = {"libraries": decisions, "glibc_needed": glibc_need, "glibc_here": have}
    if glibc_tuple(have) < glibc_tuple(glibc_need):
        return fail(out, f"the binaries need glibc {glibc_need}, this machine has {have}: "
                         "none of them can start (build the folder on an older distribution)")
    return out


def child_env(extra=None):
    """The environment of every process the check starts: the chosen libraries first on the
    loader path, the GPU tests made to fail where they would skip."""
    path = ":".join(p for p in (LIB_USED, os.environ.get("LD_LIBRARY_PATH", "")) if p)
    return dict(os.environ, LD_LIBRARY_PATH=path, NEEDLE_REQUIRE_GPU="1", NEEDLE_STRICT="1",
                NEEDLE_LIB=os.path.join(WORK, "libneedle.so"), **(extra or {}))


def unpack():
    """Unpacks the folder into WORK: each .xz decompressed (binaries, libneedle.so, MiniLM, PTX,
    needle_trainer, pytest), the rest linked; the packed libraries are left to libraries()."""
    shutil.rmtree(WORK, ignore_errors=True)
    for root, _, names in os.walk(HERE):
        rel = os.path.relpath(root, HERE)
        if rel == "lib" or rel.startswith("lib" + os.sep):
            continue
        os.makedirs(os.path.join(WORK, rel), exist_ok=True)
        for name in names:
            src = os.path.join(root, name)
            if name.endswith(".xz"):
                dst = os.path.join(WORK, rel, name[:-3])
                with lzma.open(src) as f, open(dst, "wb") as g:
                    shutil.copyfileobj(f, g)
                os.chmod(dst, 0o755)
            else:
                os.symlink(src, os.path.join(WORK, rel, name))
    return {"work": WORK}


def find_cuda_tool(name):
    """A CUDA toolkit program (ptxas, compute-sanitizer): PATH, CUDA_HOME, /usr/local/cuda*, the
    nvidia/cu13 folders of this Python's site-packages (pip's nvidia-cuda-nvcc), then the nvcc
    `make setup` installs on a development machine (NEEDLE_CACHE)."""
    cache = os.environ.get("NEEDLE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "needle")
    cands = [shutil.which(name)]
    for root in [os.environ.get("CUDA_HOME", "")] + sorted(glob.glob("/usr/local/cuda*"), reverse=True):
        if root:
            cands += [os.path.join(root, "bin", name), os.path.join(root, name, name)]
    import site
    for sp in site.getsitepackages() + [site.getusersitepackages()]:
        cands += glob.glob(os.path.join(sp, "nvidia", "cu1*", "bin", name))
        cands += glob.glob(os.path.join(sp, "nvidia", "cu1*", name, name))
    cands += sorted(glob.glob(os.path.join(cache, "nvcc-*", "nvidia", "cu1*", "bin", name)))
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    return None


def ptxas():
    tool = find_cuda_tool("ptxas")
    files = sorted(glob.glob(os.path.join(WORK, "ptx", "*.ptx")))
    if not tool:
        return {"outcome": "FAIL", "reason": "no ptxas on PATH, CUDA_HOME, /usr/local/cuda*, pip's nvidia/cu13/bin or NEEDLE_CACHE"}
    version = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    tests = []
    for f in files:
        p = subprocess.run([tool, "-arch=sm_90", "-v", "-o", os.devnull, f], capture_output=True, text=True, timeout=120)
        tests.append({"test": "ptxas sm_90 " + os.path.basename(f), "outcome": "PASS" if p.returncode == 0 else "FAIL",
                      "log": tail(p.stdout + p.stderr, 4000)})
    if not tests:
        return {"outcome": "FAIL", "reason": "no PTX in ptx/ (make gpucheck copies it there)"}
    return {"ptxas": tool, "version": version[-1:] or version, "tests": tests}


# ---------------------------------------------------------------- test binaries and pytest

def run_logged(cmd, out_dir, log_name, timeout, env, cwd=None):
    """Runs cmd in its own process group, writes its command line and output (stdout and stderr
    interleaved) to OUTDIR/<log_name>.log; returns (exit code, output). On a timeout the whole
    group is killed (compute-sanitizer's target too) and the exit is -1 with what it printed; a
    program that cannot start is exit -2 with the error. cwd defaults to WORK (read at the call:
    the tests move it)."""
    try:
        p = subprocess.Popen(cmd, cwd=cwd or WORK, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", start_new_session=True)
    except OSError as e:
        code, text = -2, f"cannot start {cmd[0]}: {e}"
    else:
        try:
            text, _ = p.communicate(timeout=max(timeout, 1))
            code = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            text, _ = p.communicate()
            code, text = -1, text + f"\nTIMED OUT after {timeout:.0f} s"
    with open(os.path.join(out_dir, log_name + ".log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + text)
    return code, text


def go_tests(binary, args, out_dir, timeout, log_name=None, extra_env=None, cwd=None):
    """Runs a Go test binary (-test.v); each test and benchmark result is a counted result. A
    run that printed no result, or exited non-zero, is a failure with its output's tail."""
    code, text = run_logged([os.path.join(WORK, binary), "-test.v", "-test.skip", "WithoutGPU"] + args, out_dir,
                            log_name or binary, min(timeout, remaining()), child_env(extra_env), cwd)
    lines = text.splitlines()
    tests = []
    for i, line in enumerate(lines):
        m = RESULT_LINE.match(line)
        if m:
            t = {"test": m.group(2), "outcome": m.group(1)}
            if m.group(1) != "PASS":  # why: the test's log, printed above its result line
                log = []
                for prev in reversed(lines[:i]):
                    if prev.startswith(("=== ", "--- ")) or RESULT_LINE.match(prev):
                        break
                    log.insert(0, prev.strip())
                t["reason"] = " | ".join(log[-3:])[:500]
            tests.append(t)
    benches = []
    for m in map(BENCH_LINE.match, lines):
        if m:
            benches.append({"bench": m.group(1), "iterations": int(m.group(2)), "ns_per_op": float(m.group(3)),
                            "GB_per_s": float(m.group(4)) / 1e3 if m.group(4) else None})
    out = {"binary": binary, "args": args, "exit": code, "tests": tests, "benchmarks": benches}
    if extra_env:
        out["env"] = extra_env
    if not tests:
        fail(out, f"{binary} printed no test result (exit {code}): {tail(text, 1500)}")
    elif code != 0 and all(t["outcome"] == "PASS" for t in tests):  # a panic or timeout past them
        fail(out, f"{binary} exited {code} after its tests passed: {tail(text, 1500)}")
    return out


def pytest_cuda(out_dir):
    """needle_trainer's CUDA tests with the pytest packed in pylib/ (the tests named
    *without_gpu are for machines without one)."""
    xml = os.path.join(out_dir, "pytest_cuda.xml")
    env = child_env({"PYTHONPATH": os.pathsep.join([os.path.join(WORK, "python"), os.path.join(WORK, "pylib")])})
    code, text = run_logged([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                             "-k", "not without_gpu", "--junitxml", xml, "tests/test_cuda.py"],
                            out_dir, "pytest_cuda", min(240, remaining()), env, cwd=os.path.join(WORK, "python"))
    tests = []
    if os.path.exists(xml):
        for case in ET.parse(xml).iter("testcase"):
            bad = [c for c in case if c.tag in ("failure", "error", "skipped")]
            outcome = "PASS" if not bad else ("SKIP" if bad[0].tag == "skipped" else "FAIL")
            t = {"test": case.get("name"), "outcome": outcome}
            if bad:
                t["reason"] = (bad[0].get("message") or "")[:500]
            tests.append(t)
    out = {"exit": code, "tests": tests}
    if not tests:
        fail(out, f"pytest ran no test (exit {code}): {tail(text, 1500)}")
    elif code != 0 and all(t["outcome"] == "PASS" for t in tests):
        fail(out, f"pytest exited {code} after its tests passed: {tail(text, 1500)}")
    return out


# The kernel tests compute-sanitizer runs: the GPU parity test of each package whose kernels
# needle ships (nngpu's run inside bert's golden test).
BERT_ENV = {"NEEDLE_CACHE": os.path.join(WORK, "cache")}  # bert.test finds MiniLM (fp16) there
# (binary, test, folder under WORK it runs in, environment)
SANITIZED = [("logprob.test", "TestGPUMatchesReference", "", None), ("delta.test", "TestGPUMatchesCPU", "", None),
             ("flatgpu.test", "TestGPUParity", "", None), ("bert.test", "TestGPUGolden", "bert", BERT_ENV)]
SANITIZER_LAUNCHES = 400  # kernel launches checked per run (the rest run unchecked): bounds the time


def sanitizer(out_dir):
    tool = find_cuda_tool("compute-sanitizer")
    if not tool:
        return {"outcome": "FAIL", "reason": "no compute-sanitizer on PATH, CUDA_HOME or /usr/local/cuda*"}
    tests, section_end = [], time.time() + min(180, remaining() - 50)  # leaves the load its time
    refused = None  # the sanitizer's own refusal of the device: the other runs would say the same
    for name in ("memcheck", "racecheck", "synccheck"):
        for binary, run, folder, env in SANITIZED:
            label = f"{name} {binary} {run}"
            left = section_end - time.time()
            if refused or left < 20:
                tests.append({"test": label, "outcome": "FAIL", "reason": refused or "not run: the sanitizer's share of the budget was spent"})
                continue
            cmd = [tool, "--tool", name, "--error-exitcode", "99", "--launch-count", str(SANITIZER_LAUNCHES),
                   os.path.join(WORK, binary), "-test.run", "^" + run + "$", "-test.v"]
            code, text = run_logged(cmd, out_dir, f"sanitizer_{name}_{binary}", min(120, left), child_env(env),
                                    os.path.join(WORK, folder))
            m = re.search(r"ERROR SUMMARY: (\d+) error", text)
            t = {"test": label, "exit": code, "errors": int(m.group(1)) if m else None}
            if code == 0 and m and m.group(1) == "0" and "--- PASS" in text:
                t["outcome"] = "PASS"
            else:
                t.update(outcome="FAIL", reason=tail(text, 1500))
                if "Device not supported" in text:  # seen on a gVisor runtime (device KINDS.md): not our kernels
                    refused = (f"not run: compute-sanitizer refused the device in '{label}' (\"Device not "
                               "supported\": a sandboxed runtime such as gVisor, not a kernel error)")
            tests.append(t)
    return {"compute_sanitizer": tool, "launches_checked_per_run": SANITIZER_LAUNCHES, "tests": tests}


# ---------------------------------------------------------------- PyTorch yardsticks and baselines

def cuda_time(fn, repeats):
    """Best time in seconds of fn over repeats, by CUDA events, after one warm-up call."""
    import torch
    fn()
    best = float("inf")
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


def torch_yardsticks():
    """The device's read bandwidth and bf16 GEMM rate, verl's torch log-prob paths, and
    needle_trainer's CUDA path at the same shapes (log-probs at the goal shape; delta encode of a
    1 GiB bf16 tensor with 1% changed)."""
    import torch
    dev = torch.device("cuda")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda}
    x = torch.empty(2 << 30, dtype=torch.bfloat16, device=dev).uniform_(-1, 1)  # 4 GiB
    out["read_GB_per_s"] = x.numel() * 2 / cuda_time(lambda: x.sum(dtype=torch.float32), 10) / 1e9
    del x
    a = torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev)
    out["gemm_bf16_TFLOP_per_s"] = 2 * 8192**3 / cuda_time(lambda: a @ a, 10) / 1e12
    del a
    logits = torch.empty(GOAL_ROWS, GOAL_VOCAB, dtype=torch.bfloat16, device=dev).uniform_(-8, 8)
    labels = torch.randint(0, GOAL_VOCAB, (GOAL_ROWS,), device=dev)

    # verl's definitions (verl/utils/torch_functional.py, logprobs_from_logits_*): log_softmax then
    # gather of the label, row by row for 16-bit logits (the memory-saving path verl takes without
    # flash-attn), or at once in fp32.
    def per_row():
        return torch.stack([torch.log_softmax(r, -1).gather(-1, l.view(1)).squeeze(-1) for r, l in zip(logits, labels)])

    def all_fp32():
        return torch.log_softmax(logits.float(), -1).gather(-1, labels.view(-1, 1)).squeeze(-1)

    for name, fn in [("verl_per_row", per_row), ("verl_fp32", all_fp32)]:
        t = cuda_time(fn, 3)
        out[name] = {"seconds": t, "logits_GB_per_s": logits.numel() * 2 / t / 1e9}
    try:
        nt = import_needle_trainer()
        t = cuda_time(lambda: nt.logprobs_from_logits(logits, labels), 5)
        ours = nt.logprobs_from_logits(logits[:256], labels[:256]).double()
        ref = torch.log_softmax(logits[:256].double(), -1).gather(-1, labels[:256].view(-1, 1)).squeeze(-1)
        out["needle_trainer_logprob_bf16"] = {"seconds": t, "logits_GB_per_s": logits.numel() * 2 / t / 1e9,
                                              "max_abs_error_vs_float64": float((ours - ref).abs().max())}
        del logits
        old = torch.empty(1 << 29, dtype=torch.bfloat16, device=dev).uniform_(-1, 1)  # 1 GiB
        new = old.clone()
        new[torch.rand(old.numel(), device=dev) < 0.01] += 1
        t = cuda_time(lambda: nt.delta_encode(old, new), 5)
        out["needle_trainer_delta_encode_bf16_1GiB_1pct"] = {"seconds": t, "read_GB_per_s": 2 * old.numel() * 2 / t / 1e9}
    except Exception:
        out["needle_trainer"] = {"error": tail(traceback.format_exc(), 1500)}
        fail(out, "needle_trainer's CUDA path failed: " + out["needle_trainer"]["error"][-500:])
    return out


def import_needle_trainer():
    """needle_trainer from python/, over this folder's libneedle.so, in this process: the packed
    libraries libraries() chose are loaded first (this process's loader path did not have them)."""
    import ctypes
    pending = sorted(os.listdir(LIB_USED)) if os.path.isdir(LIB_USED) else []
    while pending:  # in any order that loads: a library's own dependencies first
        loaded = []
        for soname in pending:
            try:
                ctypes.CDLL(os.path.join(LIB_USED, soname), mode=ctypes.RTLD_GLOBAL)
                loaded.append(soname)
            except OSError:
                pass
        if not loaded:
            raise OSError(f"cannot load the packed libraries {pending}")
        pending = [s for s in pending if s not in loaded]
    sys.path.insert(0, os.path.join(WORK, "python"))
    os.environ["NEEDLE_LIB"] = os.path.join(WORK, "libneedle.so")
    import needle_trainer
    return needle_trainer


def write_flat_index(path, rows, dim, block):
    """Writes a FAISS IndexFlatIP file (FAISS's layout, 1.7.3 to 1.12.0: tag, d, ntotal, two unused int64,
    is_trained, metric, then the float32 vectors as a std::vector) of rows vectors, repeating the
    float32 array block (a whole number of rows) as often as needed."""
    import struct
    with open(path, "wb") as f:
        f.write(b"IxFI" + struct.pack("<iQqqBi", dim, rows, 0, 0, 1, 0) + struct.pack("<Q", rows * dim))
        per = block.shape[0]
        for start in range(0, rows, per):
            block[: min(per, rows - start)].tofile(f)


def run_needle(args, out_dir, log_name, timeout):
    """Runs this folder's needle binary: the JSON object of its last output line, or a FAIL."""
    code, text = run_logged([os.path.join(WORK, "needle")] + args, out_dir, log_name, min(timeout, remaining()), child_env())
    lines = [l for l in text.splitlines() if l.startswith("{")]
    if code != 0 or not lines:
        return {"command": "needle " + " ".join(args), "exit": code, "outcome": "FAIL",
                "reason": f"exit {code}: {tail(text, 1500)}"}
    return dict(json.loads(lines[-1]), command="needle " + " ".join(args))


def flatgpu_parity(out_dir):
    """flatgpu.test's TestGPUTorchParity searches a 200,003 x 768 file; torch fp32 matmul + topk over
    the same fp16-rounded vectors is the reference: ids must match except where scores tie within
    1e-6, and recall@10 against exact fp32 search of the original vectors is reported."""
    import numpy as np
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(12)
    n, d, nq = 200_003, WIKI_DIM, 64
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    q = rng.uniform(-1, 1, (nq, d)).astype(np.float32)
    pdir = tempfile.mkdtemp(prefix="flatgpu_parity")
    try:
        write_flat_index(os.path.join(pdir, "index.faiss"), n, d, x)
        q.tofile(os.path.join(pdir, "queries.f32"))
        out = go_tests("flatgpu.test", ["-test.run", "^TestGPUTorchParity$"], out_dir, 300,
                       log_name="flatgpu_torch_parity", extra_env={"NEEDLE_FLATGPU_PARITY": pdir})
        out.update(rows=n, queries=nq)
        dev = torch.device("cuda")
        xs, qs = torch.from_numpy(x).to(dev), torch.from_numpy(q).to(dev)
        scores16 = qs.half().float() @ xs.half().float().T  # the reference of the same rounded vectors
        exact = qs @ xs.T
        for k in (10, 8192):
            path = os.path.join(pdir, f"labels_k{k}.i64")
            if not os.path.exists(path):
                out[f"k{k}"] = {"error": "no results written"}
                fail(out, f"k={k}: flatgpu.test wrote no results")
                continue
            got = torch.from_numpy(np.fromfile(path, dtype=np.int64).reshape(nq, k)).to(dev)
            dist = torch.from_numpy(np.fromfile(os.path.join(pdir, f"dist_k{k}.f32"), dtype=np.float32).reshape(nq, k)).to(dev)
            ref_s, ref_i = scores16.topk(k, dim=1)
            ours_s = scores16.gather(1, got.clamp(min=0))
            differ = got != ref_i
            untied = differ & ((ours_s - ref_s).abs() > 1e-6 * ref_s.abs().clamp(min=1))
            res = {"ids_differing": int(differ.sum()), "ids_differing_beyond_1e-6_ties": int(untied.sum()),
                   "max_score_gap_at_rank": float((ours_s - ref_s).abs().max()),
                   "max_returned_score_error": float((dist - ours_s).abs().max())}
            if k == 10:
                exact_i = exact.topk(10, dim=1).indices
                hits = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(got, exact_i))
                res["recall@10_vs_exact_fp32"] = hits / (nq * 10)
            if res["ids_differing_beyond_1e-6_ties"]:
                fail(out, f"k={k}: {res['ids_differing_beyond_1e-6_ties']} ids differ from torch's beyond ties")
            out[f"k{k}"] = res
        del xs, qs, scores16, exact
        torch.cuda.empty_cache()  # the benchmarks' needle processes need the memory
        return out
    finally:
        shutil.rmtree(pdir, ignore_errors=True)


def torch_flat_search(rows, dim, batch, k):
    """torch fp16 matmul + topk over rows x dim fp16 vectors, in row tiles that fit (the baseline of
    the GPU flat index, as verl-agent replaced faiss-gpu): best seconds of one batch."""
    import torch
    dev = torch.device("cuda")
    x = torch.empty(rows, dim, dtype=torch.float16, device=dev).uniform_(-1, 1)
    q = torch.empty(batch, dim, dtype=torch.float16, device=dev).uniform_(-1, 1)
    tile = min(rows, (1 << 31) // (2 * batch))  # 2 GiB of fp16 scores per tile

    def search():
        best_v = best_i = None
        for s in range(0, rows, tile):
            v, i = (q @ x[s:s + tile].T).topk(k, dim=1)
            i += s
            if best_v is not None:
                v, j = torch.cat([best_v, v], 1).topk(k, dim=1)
                i = torch.cat([best_i, i], 1).gather(1, j)
            best_v, best_i = v, i
        return best_i

    t = cuda_time(search, 3)
    del x, q
    torch.cuda.empty_cache()
    return t


def flatgpu_search(out_dir):
    """needle bench search --gpu at wiki-18's shape (each run measures the device's read bandwidth
    and fp16 GEMM rate itself) and torch's fp16 matmul + topk on the same shape."""
    out = {"search": []}
    for batch, k in [(1, 10), (1024, 10), (4096, 10), (64, 8192)]:
        r = run_needle(["bench", "search", "--gpu", "--rows", str(WIKI_ROWS), "--dim", str(WIKI_DIM),
                        "--batch", str(batch), "--k", str(k), "--rounds", "5"], out_dir, f"bench_search_b{batch}_k{k}", 180)
        out["search"].append(r)
    failed = [r for r in out["search"] if r.get("outcome") == "FAIL"]
    if failed:
        fail(out, "; ".join(r["reason"][-300:] for r in failed))
    if len(failed) == len(out["search"]):
        return out  # nothing to compare torch with
    out["torch_seconds"] = {}
    for batch in (1, 1024):
        out["torch_seconds"][f"batch{batch}"] = torch_flat_search(WIKI_ROWS, WIKI_DIM, batch, 10)
    return out


def flatgpu_load(out_dir, search):
    """Loading a 5M x 768 FAISS file (15 GB, written here and removed) from the page cache; not
    tried when `needle bench search --gpu` (the search step, None when --only left it out) ran at
    no shape."""
    if search is not None and not any("qps" in r for r in search.get("search", [])):
        return {"outcome": "FAIL", "reason": "not run: needle bench search --gpu ran at no shape (the search step says why)"}
    import numpy as np
    d = tempfile.mkdtemp(prefix="flatgpu_load")
    try:
        block = np.random.default_rng(3).uniform(-1, 1, (1 << 15, WIKI_DIM)).astype(np.float32)
        write_flat_index(os.path.join(d, "load_5M.faiss"), 5_000_000, WIKI_DIM, block)
        return run_needle(["bench", "search", "--gpu", "--index", os.path.join(d, "load_5M.faiss"), "--batch", "1",
                           "--rounds", "1"], out_dir, "bench_search_load_5M", 240)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def st_encoders():
    """sentence-transformers on the GPU in fp16: MiniLM from its folder, and the e5-base shape with
    random weights (a BertModel of e5-base-v2's config saved beside MiniLM's tokenizer, the same vocab)."""
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer, models
    e5_dir = tempfile.mkdtemp()
    cfg = transformers.BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                  intermediate_size=3072, max_position_embeddings=512)
    transformers.BertModel(cfg).save_pretrained(e5_dir)
    for name in ["tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"]:
        if os.path.exists(os.path.join(MINILM, name)):
            shutil.copy(os.path.join(MINILM, name), e5_dir)
    word = models.Transformer(e5_dir, max_seq_length=256)
    e5 = SentenceTransformer(modules=[word, models.Pooling(768, "mean"), models.Normalize()], device="cuda")
    minilm = SentenceTransformer(MINILM, device="cuda")
    minilm.max_seq_length = 256
    return {"minilm": minilm.half(), "e5": e5.half()}, torch


def st_baseline(texts, shape, enc, torch):
    """Passages/s of sentence-transformers fp16 (batch 512, its own length sorting) and its single-query latency."""
    enc.encode(texts["passages"][:2048], batch_size=512)  # warm-up
    torch.cuda.synchronize()
    began = time.time()
    enc.encode(texts["passages"], batch_size=512)
    torch.cuda.synchronize()
    seconds = time.time() - began
    lat = []
    for q in texts["queries"]:
        t0 = time.time()
        enc.encode([q], batch_size=1)
        torch.cuda.synchronize()
        lat.append((time.time() - t0) * 1e3)
    lat.sort()
    return {"shape": shape, "passages": len(texts["passages"]), "seconds": round(seconds, 2),
            "passages_per_s": len(texts["passages"]) / seconds, "query_median_ms": lat[len(lat) // 2]}


def encoder_bench(out_dir):
    """`needle bench encode --gpu` per shape, side by side with sentence-transformers fp16 on the
    same texts and weights."""
    common = ["--model", MINILM, "--wordnet", os.path.join(WORK, "data.noun"), "--passages", str(ENCODE_PASSAGES),
              "--queries", "200"]
    out = {"needle": [run_needle(["bench", "encode", "--gpu=require", "--shape", shape, "--repeat", "1", "--json"] + common,
                                 out_dir, "bench_encode_" + shape, 150) for shape in ["minilm", "e5"]]}
    failed = [r for r in out["needle"] if r.get("outcome") == "FAIL"]
    if failed:
        fail(out, "; ".join(r["reason"][-300:] for r in failed))
    d = tempfile.mkdtemp(prefix="encode_texts")
    try:
        path = os.path.join(d, "texts.json")
        code, text = run_logged([os.path.join(WORK, "needle"), "bench", "encode", "--dump", path] + common, out_dir,
                                "bench_encode_dump", 60, child_env())
        if code != 0:
            return fail(out, f"needle bench encode --dump: exit {code}: {tail(text, 800)}")
        with open(path) as f:
            texts = json.load(f)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    try:  # needle's figures above are kept without sentence-transformers
        encs, torch = st_encoders()
        out["sentence_transformers"] = [st_baseline(texts, shape, encs[shape], torch) for shape in ["minilm", "e5"]]
    except Exception:
        fail(out, "sentence-transformers baseline: " + tail(traceback.format_exc(), 800))
    return out


# ---------------------------------------------------------------- the summary

def fmt(v, spec=".1f", unit=""):
    return format(v, spec) + unit if isinstance(v, (int, float)) else "?"


def summary(steps, passed, failed, skipped, only=()):
    by = {s["step"]: s for s in steps}
    env = by.get("environment", {})
    lines = [f"needle GPU check: {', '.join(env.get('gpus', [])) or 'no GPU found'}; python {env.get('python', '?')}, "
             f"{env.get('glibc', '?')}" + (f"; only the steps matching {', '.join(only)}" if only else ""), ""]
    for s in steps:
        n = len(s.get("tests", []))
        lines.append(f"{s['outcome']:4} {s['step']} ({s['seconds']} s{', %d results' % n if n else ''})"
                     + (f": {s.get('reason', '')[:400]}" if s["outcome"] != "PASS" else ""))
        for t in s.get("tests", []):
            if t["outcome"] != "PASS":
                lines.append(f"       {t['outcome']} {t['test']}: {t.get('reason', '')[:300]}")
    lines.append("")
    for section in (figures_trainer, figures_flatgpu, figures_encoder):
        try:
            lines += section(by)
        except Exception as e:  # a figure missing from a failed step must not cost the rest
            lines.append(f"({section.__name__}: {e!r})")
    lines += ["", f"{passed} passed, {failed} failed, {skipped} skipped",
              "RESULT: " + ("PASS" if failed == skipped == 0 else
                            f"FAIL ({failed} failed, {skipped} skipped; on the GPU machine every skip is a failure)")]
    return lines


def figures_trainer(by):
    t = by.get("torch", {})
    read = t.get("read_GB_per_s")
    lines = [f"device: read {fmt(read, '.0f')} GB/s, bf16 GEMM {fmt(t.get('gemm_bf16_TFLOP_per_s'), '.0f')} TFLOP/s (PyTorch)"]
    for step in ("go logprob", "go delta"):
        for b in by.get(step, {}).get("benchmarks", []):
            share = f" = {100 * b['GB_per_s'] / read:.0f}% of read" if b.get("GB_per_s") and read else ""
            line = f"  {b['bench']}: {b['ns_per_op'] / 1e6:.3f} ms, {fmt(b.get('GB_per_s'))} GB/s{share}"
            if "bf16/N=16384" in b["bench"] and "verl_per_row" in t:
                ours = b["ns_per_op"] / 1e9
                line += (f"; {t['verl_per_row']['seconds'] / ours:.1f}x verl per-row, "
                         f"{t['verl_fp32']['seconds'] / ours:.1f}x verl fp32")
            lines.append(line)
    for key in ("needle_trainer_logprob_bf16", "needle_trainer_delta_encode_bf16_1GiB_1pct"):
        r = t.get(key)
        if r:
            gbs = r.get("logits_GB_per_s") or r.get("read_GB_per_s")
            lines.append(f"  python {key}: {r['seconds'] * 1e3:.2f} ms, {gbs:.0f} GB/s"
                         + (f" = {100 * gbs / read:.0f}% of read" if read else ""))
    return lines


def figures_flatgpu(by):
    lines = [f"flatgpu parity vs torch: " + json.dumps({k: v for k, v in by.get("flatgpu torch parity", {}).items()
                                                      if k.startswith("k")})]
    g = by.get("flatgpu search", {})
    for r in g.get("search", []) + [by.get("flatgpu load", {})]:
        if "qps" not in r:
            continue
        line = (f"  {r['command']}: {r['qps']:.0f} QPS, {r['GB_per_s']:.0f} GB/s = {100 * r['read_share']:.0f}% of "
                f"{r['peak_read_GB_per_s']:.0f} GB/s read, {r['TFLOP_per_s']:.1f} TFLOP/s = "
                f"{100 * r.get('gemm_share', 0):.0f}% of {fmt(r.get('peak_gemm_TFLOP_per_s'), '.0f')} TFLOP/s GEMM")
        if r.get("load_GB_per_s"):
            line += f"; load {r['load_seconds']:.1f} s = {r['load_GB_per_s']:.2f} GB/s"
        t = g.get("torch_seconds", {}).get(f"batch{r['batch']}")
        if isinstance(t, float) and r["k"] == 10 and not r.get("load_GB_per_s"):
            line += f"; torch fp16 matmul+topk {t * 1e3:.2f} ms = {t / r['best_seconds']:.1f}x ours"
        lines.append(line)
    return lines


def figures_encoder(by):
    e = by.get("encoder bench", {})
    lines = ["GPU encoder:"]
    st = {b["shape"]: b for b in e.get("sentence_transformers", [])}
    for run in e.get("needle", []):
        for r in run.get("results", []):
            shape = "e5" if r["model"].startswith("e5") else "minilm"
            vs = ""
            if shape in st:
                vs = (f", {r['passages_per_s'] / st[shape]['passages_per_s']:.2f}x sentence-transformers fp16 "
                      f"({st[shape]['passages_per_s']:.0f} passages/s, query {st[shape]['query_median_ms']:.2f} ms)")
            lines.append(f"  {r['model']} on {r.get('device')}: {r['passages_per_s']:.0f} passages/s, "
                         f"{r.get('tokens_per_s', 0):.0f} tokens/s, {r.get('model_TFLOP_per_s', 0):.1f} TFLOP/s = "
                         f"{100 * r.get('gemm_share', 0):.1f}% of GEMM peak {r.get('peak_gemm_TFLOP_per_s', 0):.0f}; "
                         f"wiki-18 {r.get('wiki18_hours', 0):.2f} h; query median {r.get('query_median_ms', 0):.2f} ms{vs}")
    return lines


def main():
    global BUDGET_S
    ap = argparse.ArgumentParser(description="needle's GPU check (docs/gpu.md)")
    ap.add_argument("out_dir", nargs="?", default=".", help="where results.json, summary.txt and the logs go")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help="seconds after which no step starts (default %(default)s)")
    ap.add_argument("--only", default="", help="comma-separated words: run only the steps whose names contain one")
    args = ap.parse_args()
    BUDGET_S = args.budget
    out_dir = os.path.abspath(args.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    c = Check(out_dir, [w.strip() for w in args.only.split(",") if w.strip()])
    c.step("environment", environment)
    c.step("unpack", unpack)
    c.step("libraries", libraries)
    c.step("ptxas", ptxas)
    bench = ["-test.benchtime", "10x"]
    c.step("go cuda", go_tests, "cuda.test", [], out_dir, 60)
    c.step("go logprob", go_tests, "logprob.test", ["-test.run", "GPU|PTX", "-test.bench", "GPU"] + bench, out_dir, 240)
    c.step("go delta", go_tests, "delta.test", ["-test.run", "GPU|PTX", "-test.bench", "GPU"] + bench, out_dir, 240)
    # TestGPUTorchParity runs in the flatgpu torch parity step, with its data.
    c.step("go flatgpu", go_tests, "flatgpu.test", ["-test.run", "GPU|PTX", "-test.skip", "WithoutGPU|TorchParity"],
           out_dir, 240, need_s=30)
    for binary in ("logprob.test", "delta.test", "flatgpu.test"):  # the fallback image
        c.step("go " + binary[:-5] + " (PTX)", go_tests, binary, ["-test.run", "GPU", "-test.skip", "WithoutGPU|TorchParity"],
               out_dir, 180, binary[:-5] + "_ptx", {"NEEDLE_CUDA_IMAGE": "ptx"}, need_s=20)
    c.step("go bert", go_tests, "bert.test", ["-test.run", "GPU|FLOPs"], out_dir, 240, None, BERT_ENV,
           os.path.join(WORK, "bert"), need_s=30)
    c.step("go bert (PTX)", go_tests, "bert.test", ["-test.run", "^TestGPUGolden$"], out_dir, 120, "bert_ptx",
           dict(BERT_ENV, NEEDLE_CUDA_IMAGE="ptx"), os.path.join(WORK, "bert"), need_s=20)
    c.step("python cuda", pytest_cuda, out_dir, need_s=30)
    c.step("torch", torch_yardsticks, need_s=30)
    c.step("flatgpu torch parity", flatgpu_parity, out_dir, need_s=60)
    search = c.step("flatgpu search", flatgpu_search, out_dir, need_s=90)
    c.step("encoder bench", encoder_bench, out_dir, need_s=120)
    c.step("compute-sanitizer", sanitizer, out_dir, need_s=60)
    c.step("flatgpu load", flatgpu_load, out_dir, search, need_s=60)
    passed, failed, skipped = c.counts()
    print("\n".join(summary(c.steps, passed, failed, skipped, c.only)[-2:]))
    sys.exit(0 if failed == skipped == 0 else 1)


if __name__ == "__main__":
    main()
