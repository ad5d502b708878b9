"""The wheel's proof as a user runs it (proof.sh starts it in the clean root, as an unprivileged
user with an empty environment; and on the build machine, with the `make build` binary, for the
reference answers). Standard library only: the clean root has python3 and nothing else.

  proof_user.py answers NEEDLE DATA WORK OUT.json   build dense + BM25 indexes of DATA's corpus,
                                                  serve each and save its /retrieve answers
  proof_user.py check DATA WHEELS REFERENCE.json    the proof: install, doctor, answers compared
                                                  with REFERENCE, weights, the trainer's test

DATA holds corpus.jsonl, queries.jsonl, model/ (MiniLM) and tests/ (python/tests). Every step
prints one line: PASS or FAIL, its seconds, what it saw. The exit status is the failures' count.
"""
import glob
import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request

TOPK = 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def queries(data):
    with open(os.path.join(data, "queries.jsonl")) as f:
        return [json.loads(line)["query"] for line in f][:64]


def run(*cmd, **kw):
    """Runs cmd; on failure raises with its output's tail."""
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])}... exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}")
    return p.stdout


def serve_and_ask(needle, index, data, model):
    """Serves index on a free port, answers the queries once ready, stops the server."""
    port = free_port()
    cmd = [needle, "serve", "--index", index, "--port", str(port)] + (["--model", model] if model else [])
    log = open(index + ".serve.log", "w")
    srv = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while True:
            if srv.poll() is not None:
                raise RuntimeError(f"serve exited {srv.returncode}: {open(index + '.serve.log').read()[-1500:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("serve not ready after 120 s")
            time.sleep(0.2)
        return post(f"http://127.0.0.1:{port}/retrieve", {"queries": queries(data), "topk": TOPK, "return_scores": True})
    finally:
        srv.terminate()
        srv.wait(30)
        log.close()


def answers(needle, data, work):
    """The dense (MiniLM, flat) and BM25 answers of needle on DATA's corpus, as [[id, score]]."""
    corpus, model = os.path.join(data, "corpus.jsonl"), os.path.join(data, "model")
    os.makedirs(work, exist_ok=True)
    out = {}
    dense, bm25 = os.path.join(work, "dense"), os.path.join(work, "bm25")
    run(needle, "build", "--corpus", corpus, "--model", model, "--out", dense, "--prefix", "")
    out["dense"] = ids_scores(serve_and_ask(needle, dense, data, model))
    run(needle, "build", "--bm25", "--corpus", corpus, "--out", bm25)
    out["bm25"] = ids_scores(serve_and_ask(needle, bm25, data, None))
    return out


def ids_scores(reply):
    return [[[hit["document"]["id"], hit["score"]] for hit in hits] for hits in reply["result"]]


class Proof:
    def __init__(self):
        self.failed = 0
        self.t0 = time.time()

    def step(self, name, fn):
        start = time.time()
        try:
            said = fn()
            print(f"PASS {name} ({time.time() - start:.1f} s): {said}", flush=True)
        except Exception as e:  # a failed step is reported and the proof goes on
            self.failed += 1
            print(f"FAIL {name} ({time.time() - start:.1f} s): {e}", flush=True)


def check(data, wheels, reference):
    home = os.environ["HOME"]
    venv = os.path.join(home, "venv")
    needle = os.path.join(venv, "bin", "needle")
    py = os.path.join(venv, "bin", "python")
    p = Proof()
    t_install = {}

    def install():
        run(sys.executable, "-m", "venv", venv)
        t_install["start"] = time.time()
        whl = glob.glob(os.path.join(wheels, "needle_rl-*.whl"))[0]
        run(os.path.join(venv, "bin", "pip"), "install", "-q", "--no-index", "--find-links", wheels, whl, "pytest")
        return os.path.basename(whl)
    p.step("pip install (offline, no root)", install)

    def elf_links():
        files = [f for f in glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "**", "*"), recursive=True)
                 if os.path.isfile(f) and open(f, "rb").read(4) == b"\x7fELF"]
        bad = []
        for f in files:
            out = run("ldd", f)
            for line in out.splitlines():
                if "not found" in line or ("=>" in line and "site-packages" not in line
                                           and not line.split("=>")[1].strip().startswith(("/lib", "/usr/lib"))):
                    bad.append(f"{os.path.basename(f)}: {line.strip()}")
        if bad:
            raise RuntimeError("; ".join(bad))
        return f"{len(files)} ELF files, every library resolved inside the wheel or the root's /lib"
    p.step("ldd of every ELF file", elf_links)

    p.step("needle doctor", lambda: last_line(run(needle, "doctor")))

    def dense_and_bm25():
        got = answers(needle, data, os.path.join(home, "work"))
        t_install["served"] = time.time()
        with open(reference) as f:
            want = json.load(f)
        for kind in ("dense", "bm25"):
            if got[kind] != want[kind]:
                raise RuntimeError(f"{kind} answers differ from the make-build binary's: {got[kind][:2]} vs {want[kind][:2]}")
        n = sum(len(h) for h in got["dense"])
        return f"{len(got['dense'])} queries, {n} dense and {sum(len(h) for h in got['bm25'])} BM25 hits: ids and scores equal to make build's"
    p.step("build + serve, dense (MiniLM) and BM25", dense_and_bm25)

    p.step("GPU libraries found from the venv, else the CPU", lambda: gpu_finding(needle, venv, os.path.join(data, "cudaemu.so")))
    p.step("needle_trainer.publish -> needle weights recv", lambda: weights_round_trip(py, needle, home))
    p.step("needle_trainer logprob parity (pytest)", lambda: last_line(run(
        py, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.join(data, "tests", "test_logprob.py"),
        cwd=os.path.join(data, "tests"))))
    if "served" in t_install:
        print(f"TIME pip install -> both indexes built and served: {t_install['served'] - t_install['start']:.1f} s")
    print(f"{'PASS' if p.failed == 0 else 'FAIL'}: {p.failed} failed, {time.time() - p.t0:.1f} s")
    return p.failed


def last_line(out):
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def gpu_finding(needle, venv, emulated):
    """With the emulated CUDA driver (testkit/cudaemu, which also answers cuBLAS's calls) laid out
    as pip's nvidia-cublas 13 would put cuBLAS in the venv, `needle doctor --gpu` finds both with
    no VIRTUAL_ENV set; without a driver, the CPU serves and doctor says why in one line."""
    if not os.path.exists(emulated):
        raise RuntimeError(f"no emulated driver at {emulated}")
    site = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))[0]
    cublas = os.path.join(site, "nvidia", "cu13", "lib", "libcublas.so.13")
    os.makedirs(os.path.dirname(cublas))
    try:
        with open(emulated, "rb") as f, open(cublas, "wb") as g:
            g.write(f.read())
        env = dict(os.environ, NEEDLE_CUDA_LIB=emulated)
        checks = {c["name"]: c for c in json.loads(run(needle, "doctor", "--gpu", "--json", env=env))["checks"]}
        if checks.get("cublas", {}).get("value") != cublas or checks.get("gpu 0", {}).get("status") != "ok":
            raise RuntimeError(f"doctor --gpu: {checks.get('gpu 0')} {checks.get('cublas')}")
        none = {c["name"]: c for c in json.loads(run(needle, "doctor", "--json"))["checks"]}["gpu"]
        if "the CPU serves" not in none["why"]:
            raise RuntimeError(f"without a driver: {none}")
        return f"emulated driver + {os.path.relpath(cublas, venv)}: found; without a driver: {none['why']!r}"
    finally:
        os.remove(cublas)


WEIGHTS_DRIVER = r"""
import json, struct, sys, numpy as np, needle_trainer as nt
step, sender_dir = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(7)
w = {"a.weight": rng.standard_normal((256, 384)).astype(np.float32),
     "b.bias": rng.integers(0, 1 << 16, 4099, dtype=np.uint16).view(np.float16)}
if step == 2:  # a sparse change: the receiver gets a delta
    w["a.weight"][3, ::7] += 1
print(nt.publish(w, dir=sender_dir))
for name, x in w.items():  # the published bytes, for a check that needs no numpy
    open(f"{sys.argv[3]}/{name}", "wb").write(x.tobytes())
"""


def safetensors_tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        body = f.read()
    return {k: body[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items() if k != "__metadata__"}


def weights_round_trip(py, needle, home):
    """Two versions published from Python (the second a sparse change, sent as a delta); the
    receiver's file holds exactly the published bytes each time."""
    sender_dir, out = os.path.join(home, "wsend"), os.path.join(home, "wrecv", "model.safetensors")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    port = free_port()
    procs = [subprocess.Popen([needle, "weights", "send", "--dir", sender_dir, "--listen", f"127.0.0.1:{port}", "--http", ""],
                              stdout=subprocess.DEVNULL, stderr=open(os.path.join(home, "wsend.log"), "w"))]
    try:
        wait_for(lambda: os.path.exists(os.path.join(sender_dir, "control.sock")), "the sender's control.sock")
        http = free_port()
        procs.append(subprocess.Popen([needle, "weights", "recv", "--from", f"127.0.0.1:{port}", "--out", out, "--http", f"127.0.0.1:{http}"],
                                      stdout=subprocess.DEVNULL, stderr=open(os.path.join(home, "wrecv.log"), "w")))
        for step in (1, 2):
            sent = os.path.join(home, f"w{step}")
            os.makedirs(sent, exist_ok=True)
            version = run(py, "-c", WEIGHTS_DRIVER, str(step), sender_dir, sent).strip()
            want = {}
            for name in os.listdir(sent):
                with open(os.path.join(sent, name), "rb") as f:
                    want[name] = f.read()

            def holds():
                got = safetensors_tensors(out) if os.path.exists(out) else {}
                return got.keys() == want.keys() and all(got[k] == v for k, v in want.items())
            wait_for(holds, f"version {version} in {out}")
        with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
            kinds = [line for line in r.read().decode().splitlines() if line.startswith("needle_weights_receiver_versions_total")]
        if len(kinds) != 2 or not all(line.endswith(" 1") for line in kinds):
            raise RuntimeError(f"want one full and one delta version: {kinds}")
        return f"2 versions byte-identical in {out}; the receiver's counts: {', '.join(kinds)}"
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)


def wait_for(cond, what, timeout=60):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise RuntimeError(f"no {what} after {timeout} s")
        time.sleep(0.2)


if __name__ == "__main__":
    if sys.argv[1] == "answers":
        result = answers(sys.argv[2], sys.argv[3], sys.argv[4])
        with open(sys.argv[5], "w") as f:
            json.dump(result, f)
    elif sys.argv[1] == "check":
        sys.exit(check(*sys.argv[2:5]))
    else:
        sys.exit(__doc__)
