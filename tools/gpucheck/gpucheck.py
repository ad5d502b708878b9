"""The GPU check (../shared/GPU.md): run on the GPU machine from the folder `make gpucheck` fills.

    python3 gpucheck/gpucheck.py OUTDIR

It runs every GPU parity test and GPU benchmark of needle's test binaries in this folder, measures
the device's read bandwidth and bf16 GEMM rate with PyTorch in the same run (the yardsticks the
benchmarks are reported against) and times verl's torch log-prob definitions on the same shape as
the baseline, then writes OUTDIR/results.json and OUTDIR/summary.txt (plus each binary's log).
Needs only python3 with torch on a CUDA machine; the shared libraries the binaries link (OpenBLAS
and its runtime) travel xz-compressed in lib/ and are unpacked next to them.
"""
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "lib")

# The goal shape of issue 14: bf16 logits of N tokens over Qwen2.5's vocabulary.
GOAL_ROWS, GOAL_VOCAB = 16384, 151936


def unpack_libs():
    for name in os.listdir(LIB):
        if name.endswith(".xz"):
            with lzma.open(os.path.join(LIB, name)) as src, open(os.path.join(LIB, name[:-3]), "wb") as dst:
                dst.write(src.read())


BENCH_LINE = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op(?:\s+([\d.]+) MB/s)?")
RESULT_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")


def run_binary(name, args, out_dir, timeout):
    """Runs one Go test binary; returns its test outcomes and benchmark lines."""
    env = dict(os.environ, LD_LIBRARY_PATH=LIB + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    began = time.time()
    try:
        proc = subprocess.run([os.path.join(HERE, name)] + args, cwd=HERE, env=env, capture_output=True,
                              text=True, timeout=timeout)
        text, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text, code = (e.stdout or b"").decode() + "\nTIMED OUT", -1
    with open(os.path.join(out_dir, name + ".log"), "w") as f:
        f.write(text)
    tests = [{"outcome": m.group(1), "test": m.group(2)} for m in map(RESULT_LINE.match, text.splitlines()) if m]
    benches = []
    for m in map(BENCH_LINE.match, text.splitlines()):
        if m:
            benches.append({"bench": m.group(1), "iterations": int(m.group(2)), "ns_per_op": float(m.group(3)),
                            "GB_per_s": float(m.group(4)) / 1e3 if m.group(4) else None})
    return {"binary": name, "exit": code, "seconds": round(time.time() - began, 1), "tests": tests, "benchmarks": benches}


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
    """The device's read bandwidth and bf16 GEMM rate, and verl's torch log-prob paths."""
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
    return out


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out_dir, exist_ok=True)
    unpack_libs()
    smi = shutil.which("nvidia-smi")
    results = {"nvidia_smi": subprocess.run([smi], capture_output=True, text=True).stdout if smi else "no nvidia-smi"}
    results["runs"] = [
        run_binary("cuda.test", ["-test.v"], out_dir, 120),
        run_binary("logprob.test", ["-test.v", "-test.run", "GPU|PTX", "-test.bench", "GPU", "-test.benchtime", "20x"],
                   out_dir, 300),
        run_binary("delta.test", ["-test.v", "-test.run", "GPU|PTX", "-test.bench", "GPU", "-test.benchtime", "10x"],
                   out_dir, 300),
    ]
    try:
        results["torch"] = torch_yardsticks()
    except Exception as e:  # the Go results still come back
        results["torch"] = {"error": repr(e)}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    t = results["torch"]
    lines = ["torch: " + json.dumps(t)]
    for run in results["runs"]:
        failed = [x["test"] for x in run["tests"] if x["outcome"] == "FAIL"]
        lines.append(f"{run['binary']}: exit {run['exit']}, {len(run['tests'])} results, failed {failed}")
        for b in run["benchmarks"]:
            share = ""
            if b["GB_per_s"] and "read_GB_per_s" in t:
                share = f" = {100 * b['GB_per_s'] / t['read_GB_per_s']:.0f}% of read bandwidth"
            lines.append(f"  {b['bench']}: {b['ns_per_op'] / 1e6:.3f} ms, {b['GB_per_s']} GB/s{share}")
            if "bf16/N=16384" in b["bench"] and "verl_per_row" in t:
                ours = b["ns_per_op"] / 1e9
                lines.append(f"    vs verl per-row {t['verl_per_row']['seconds'] / ours:.1f}x, "
                             f"vs verl fp32 {t['verl_fp32']['seconds'] / ours:.1f}x")
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
