"""By-hand benchmark: PyTorch CPU cross_entropy vs needle's logprob (libneedle.so) in one run.

    ~/.cache/needle/venv-torch/bin/python bench/logprob_pytorch.py [--rows 1024] [--vocab 151936]
        [--lib build/native/libneedle.so] [--repeats 5]

Same bf16 logits [rows, vocab] and int64 labels for both. PyTorch: F.cross_entropy(reduction=
"none") on the bf16 tensor, and verl's fp32 path (logits.float() then cross_entropy). needle:
needle_logprob_bf16 (logprob + entropy + lse). Each at 1 thread and at all threads
(torch.set_num_threads / the threads argument). Reports best wall time, G elements/s, and
G elements per CPU-second (process_time; robust when the machine is shared), plus the ratio
needle / PyTorch. Not part of `make test` (needs torch: the separate venv-torch).
"""
import argparse
import ctypes
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F


def best_of(fn, repeats):
    fn()  # warm-up
    best = None
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        if best is None or w < best[0]:
            best = (w, c)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lib", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                  "build", "native", "libneedle.so"))
    args = ap.parse_args()
    n, v = args.rows, args.vocab
    all_threads = os.cpu_count()

    g = torch.Generator().manual_seed(0)
    logits = (torch.randn(n, v, generator=g) * 3).to(torch.bfloat16)
    labels = torch.randint(0, v, (n,), generator=g, dtype=torch.int64)
    bits = logits.view(torch.int16).numpy().view(np.uint16)  # the same buffer, shared
    lab = labels.numpy()

    lib = ctypes.CDLL(args.lib)
    f32p, i64p, u16p = (ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int64),
                        ctypes.POINTER(ctypes.c_uint16))
    lib.needle_logprob_bf16.restype = ctypes.c_int32
    lib.needle_logprob_bf16.argtypes = [u16p, ctypes.c_int64, ctypes.c_int64, i64p, ctypes.c_float,
                                        ctypes.c_int64, ctypes.c_int32, f32p, f32p, f32p,
                                        ctypes.c_char_p, ctypes.c_int64]
    out = np.zeros((3, n), np.float32)
    err = ctypes.create_string_buffer(256)

    def needle(threads):
        def run():
            rc = lib.needle_logprob_bf16(bits.ctypes.data_as(u16p), n, v, lab.ctypes.data_as(i64p),
                                         1.0, -100, threads, out[0].ctypes.data_as(f32p),
                                         out[1].ctypes.data_as(f32p), out[2].ctypes.data_as(f32p),
                                         err, len(err))
            if rc != 0:
                raise RuntimeError(err.value.decode())
        return run

    def torch_bf16():
        F.cross_entropy(logits, labels, reduction="none")

    def torch_fp32():
        F.cross_entropy(logits.float(), labels, reduction="none")

    # Agreement check on the shared buffers (needle logprob = -cross_entropy).
    needle(1)()
    ref = -F.cross_entropy(logits.double(), labels, reduction="none").numpy()
    agree = float(np.max(np.abs(out[0] - ref) / np.maximum(1, np.abs(ref))))

    results = []
    for threads in sorted({1, all_threads}):
        torch.set_num_threads(threads)
        for name, fn in [("needle logprob bf16 (+entropy, lse)", needle(threads)),
                         ("torch cross_entropy bf16", torch_bf16),
                         ("torch cross_entropy fp32 (verl: logits.float())", torch_fp32)]:
            wall, cpu = best_of(fn, args.repeats)
            results.append({"name": name, "threads": threads, "seconds": wall, "cpu_seconds": cpu,
                            "gelems_per_s": n * v / wall / 1e9,
                            "gelems_per_cpu_s": n * v / cpu / 1e9})
    for threads in sorted({1, all_threads}):
        rs = {r["name"].split(" (")[0]: r for r in results if r["threads"] == threads}
        nd = rs["needle logprob bf16"]
        for tname in ("torch cross_entropy bf16", "torch cross_entropy fp32"):
            t = rs[tname]
            print(f"threads={threads}: needle / {tname}: {t['seconds'] / nd['seconds']:.1f}x wall, "
                  f"{t['cpu_seconds'] / nd['cpu_seconds']:.1f}x CPU time")
    print(json.dumps({"rows": n, "vocab": v, "torch": torch.__version__,
                      "max_rel_err_vs_torch_float64": agree, "results": results}, indent=1))


if __name__ == "__main__":
    main()
