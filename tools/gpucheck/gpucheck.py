"""The GPU check (../shared/GPU.md): run on the GPU machine from the folder `make gpucheck` fills.

    python3 gpucheck/gpucheck.py OUTDIR

It runs every GPU parity test and GPU benchmark of needle's test binaries in this folder, measures
the device's read bandwidth and bf16 GEMM rate with PyTorch in the same run (the yardsticks the
benchmarks are reported against) and times verl's torch log-prob definitions on the same shape as
the baseline; for the GPU flat index (issue 12) it checks parity with torch's fp32 matmul + topk
over the same fp16-rounded vectors, runs `needle bench search --gpu` at wiki-18's shape against
torch fp16 matmul + topk, and times loading a 5M x 768 FAISS file; then it writes
OUTDIR/results.json and OUTDIR/summary.txt (plus each binary's log).
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
    """Unpacks every .xz of the folder (libraries, binaries, the MiniLM weights) beside it, once."""
    for root, _, names in os.walk(HERE):
        for name in names:
            path = os.path.join(root, name)
            if name.endswith(".xz") and not os.path.exists(path[:-3]):
                with lzma.open(path) as src, open(path[:-3], "wb") as dst:
                    shutil.copyfileobj(src, dst)
                if root == HERE:
                    os.chmod(path[:-3], 0o755)


BENCH_LINE = re.compile(r"^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op(?:\s+([\d.]+) MB/s)?")
RESULT_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")


def run_binary(name, args, out_dir, timeout, extra_env=None, cwd=HERE):
    """Runs one Go test binary (in cwd: where its testdata/ is); returns its test outcomes and benchmark lines."""
    env = dict(os.environ, LD_LIBRARY_PATH=LIB + ":" + os.environ.get("LD_LIBRARY_PATH", ""), **(extra_env or {}))
    began = time.time()
    try:
        proc = subprocess.run([os.path.join(HERE, name)] + args, cwd=cwd, env=env, capture_output=True,
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


# The GPU flat index's goal shape: wiki-18 (21,015,324 passages x 768, e5).
WIKI_ROWS, WIKI_DIM = 21015324, 768


def run_needle(args, out_dir, log_name, timeout):
    """Runs this folder's needle binary; returns the JSON object of its last output line."""
    env = dict(os.environ, LD_LIBRARY_PATH=LIB + ":" + os.environ.get("LD_LIBRARY_PATH", ""))
    cmd = [os.path.join(HERE, "needle")] + args
    try:
        proc = subprocess.run(cmd, cwd=HERE, env=env, capture_output=True, text=True, timeout=timeout)
        text, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text, code = (e.stdout or b"").decode() + "\nTIMED OUT", -1
    with open(os.path.join(out_dir, log_name + ".log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + text)
    lines = [l for l in text.splitlines() if l.startswith("{")]
    if code != 0 or not lines:
        return {"command": " ".join(args), "exit": code, "error": text[-2000:]}
    out = json.loads(lines[-1])
    out["command"] = "needle " + " ".join(args)
    return out


def write_flat_index(path, rows, dim, block):
    """Writes a FAISS IndexFlatIP file (faiss 1.7.3's layout: tag, d, ntotal, two unused int64,
    is_trained, metric, then the float32 vectors as a std::vector) of rows vectors, repeating the
    float32 array block (a whole number of rows) as often as needed."""
    import struct
    with open(path, "wb") as f:
        f.write(b"IxFI" + struct.pack("<iQqqBi", dim, rows, 0, 0, 1, 0) + struct.pack("<Q", rows * dim))
        per = block.shape[0]
        for start in range(0, rows, per):
            block[: min(per, rows - start)].tofile(f)


def gpuflat_parity(out_dir):
    """gpuflat.test's TestGPUTorchParity searches a 200,003 x 768 file; torch fp32 matmul + topk over
    the same fp16-rounded vectors is the reference: ids must match except where scores tie within
    1e-6, and recall@10 against exact fp32 search of the original vectors is reported."""
    import numpy as np
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(12)
    n, d, nq = 200_003, WIKI_DIM, 64
    x = rng.uniform(-1, 1, (n, d)).astype(np.float32)
    q = rng.uniform(-1, 1, (nq, d)).astype(np.float32)
    pdir = os.path.join(out_dir, "gpuflat_parity")
    os.makedirs(pdir, exist_ok=True)
    write_flat_index(os.path.join(pdir, "index.faiss"), n, d, x)
    q.tofile(os.path.join(pdir, "queries.f32"))
    run = run_binary("gpuflat.test", ["-test.v", "-test.run", "TestGPUTorchParity"], out_dir, 300,
                     {"NEEDLE_GPUFLAT_PARITY": pdir})
    out = {"run": run, "rows": n, "queries": nq}
    dev = torch.device("cuda")
    xs, qs = torch.from_numpy(x).to(dev), torch.from_numpy(q).to(dev)
    scores16 = qs.half().float() @ xs.half().float().T  # the reference of the same rounded vectors
    exact = qs @ xs.T
    for k in (10, 8192):
        path = os.path.join(pdir, f"labels_k{k}.i64")
        if not os.path.exists(path):
            out[f"k{k}"] = {"error": "no results written"}
            continue
        got = torch.from_numpy(np.fromfile(path, dtype=np.int64).reshape(nq, k)).to(dev)
        dist = torch.from_numpy(np.fromfile(os.path.join(pdir, f"dist_k{k}.f32"), dtype=np.float32).reshape(nq, k)).to(dev)
        ref_s, ref_i = scores16.topk(k, dim=1)
        ours_s = scores16.gather(1, got.clamp(min=0))
        differ = got != ref_i
        tol = 1e-6 * ref_s.abs().clamp(min=1)
        untied = differ & ((ours_s - ref_s).abs() > tol)
        res = {"ids_differing": int(differ.sum()), "ids_differing_beyond_1e-6_ties": int(untied.sum()),
               "max_score_gap_at_rank": float((ours_s - ref_s).abs().max()),
               "max_returned_score_error": float((dist - ours_s).abs().max())}
        if k == 10:
            exact_i = exact.topk(10, dim=1).indices
            hits = sum(len(set(a.tolist()) & set(b.tolist())) for a, b in zip(got, exact_i))
            res["recall@10_vs_exact_fp32"] = hits / (nq * 10)
        out[f"k{k}"] = res
    shutil.rmtree(pdir, ignore_errors=True)
    del xs, qs, scores16, exact
    torch.cuda.empty_cache()  # the benchmarks' needle processes need the memory
    return out


def torch_flat_search(rows, dim, batch, k):
    """torch fp16 matmul + topk over rows x dim fp16 vectors, in row tiles that fit (the baseline of
    issue 12, as verl-agent replaced faiss-gpu): best seconds of one batch."""
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


def gpuflat_benchmarks(out_dir):
    """needle bench search --gpu at wiki-18's shape (each run measures the device's read bandwidth
    and fp16 GEMM rate itself), torch's fp16 matmul + topk on the same shape, and a 5M x 768 FAISS
    file loaded from the page cache."""
    import numpy as np
    out = {"search": [], "torch": {}}
    for batch, k in [(1, 10), (1024, 10), (4096, 10), (64, 8192)]:
        out["search"].append(run_needle(["bench", "search", "--gpu", "--rows", str(WIKI_ROWS), "--dim", str(WIKI_DIM),
                                         "--batch", str(batch), "--k", str(k), "--rounds", "5"],
                                        out_dir, f"bench_search_b{batch}_k{k}", 300))
    if all("error" in r for r in out["search"]):  # no GPU here: skip the torch runs and the 15 GB file
        out["load"] = {"command": "load", "error": "skipped: every needle bench search --gpu failed"}
        return out
    for batch in (1, 1024):
        try:
            out["torch"][f"batch{batch}"] = torch_flat_search(WIKI_ROWS, WIKI_DIM, batch, 10)
        except Exception as e:
            out["torch"][f"batch{batch}"] = repr(e)
    path = os.path.join(out_dir, "load_5M.faiss")
    try:
        block = np.random.default_rng(3).uniform(-1, 1, (1 << 15, WIKI_DIM)).astype(np.float32)
        write_flat_index(path, 5_000_000, WIKI_DIM, block)
        out["load"] = run_needle(["bench", "search", "--gpu", "--index", path, "--batch", "1", "--rounds", "1"],
                                 out_dir, "bench_search_load_5M", 300)
    finally:
        if os.path.exists(path):
            os.remove(path)
    return out


def gpuflat_summary(g):
    lines = []
    for r in g.get("search", []) + [g.get("load", {})]:
        if "error" in r:
            lines.append(f"  {r.get('command')}: FAILED {r['error'][-300:]}")
            continue
        if not r:
            continue
        line = (f"  {r['command']}: {r['qps']:.0f} QPS, {r['GB_per_s']:.0f} GB/s = {100 * r['read_share']:.0f}% of "
                f"{r['peak_read_GB_per_s']:.0f} GB/s read, {r['TFLOP_per_s']:.1f} TFLOP/s = {100 * r['gemm_share']:.0f}% of "
                f"{r['peak_gemm_TFLOP_per_s']:.0f} TFLOP/s GEMM")
        if r.get("load_GB_per_s"):
            line += f"; load {r['load_seconds']:.1f} s = {r['load_GB_per_s']:.2f} GB/s"
        t = g.get("torch", {}).get(f"batch{r['batch']}")
        if isinstance(t, float) and r["k"] == 10 and not r.get("load_GB_per_s"):
            line += f"; torch fp16 matmul+topk {t * 1e3:.2f} ms = {t / r['best_seconds']:.1f}x ours"
        lines.append(line)
    return lines


# The GPU encoder (issue 13): the MiniLM folder travels here in fp16 (half_model.py), so the
# parity tests and sentence-transformers read the same weights; the e5-base shape has random weights.
MINILM = os.path.join(HERE, "cache", "models", "all-MiniLM-L6-v2")
ENCODE_PASSAGES = 200_000  # the run for the wiki-18 projection


def wordnet():
    """The head of WordNet's data.noun (unpacked by unpack_libs): the bench's texts start over past it."""
    return os.path.join(HERE, "data.noun")


def st_encoders():
    """sentence-transformers on the GPU in fp16: MiniLM from its folder, and the e5-base shape with
    random weights (a BertModel of e5-base-v2's config saved beside MiniLM's tokenizer, the same vocab)."""
    import tempfile
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


def encoder_check(out_dir):
    """The GPU encoder's parity tests (bert.test: golden texts vs sentence-transformers fp32 and vs the CPU
    encoder, WordNet top-10, batch splitting, the e5 shape) and `needle bench encode --gpu` on 200,000
    passages per shape, side by side with sentence-transformers fp16 on the same texts and weights."""
    env = {"NEEDLE_CACHE": os.path.join(HERE, "cache")}
    out = {"tests": run_binary("bert.test", ["-test.v", "-test.run", "GPU|FLOPs"], out_dir, 300, env,
                               cwd=os.path.join(HERE, "bert"))}
    common = ["--model", MINILM, "--wordnet", wordnet(), "--passages", str(ENCODE_PASSAGES), "--queries", "200"]
    out["needle"] = [run_needle(["bench", "encode", "--gpu=require", "--shape", shape, "--repeat", "1", "--json"] + common,
                                out_dir, "bench_encode_" + shape, 240) for shape in ["minilm", "e5"]]
    texts_path = os.path.join(out_dir, "encode_texts.json")
    subprocess.run([os.path.join(HERE, "needle"), "bench", "encode", "--dump", texts_path] + common, check=True,
                   env=dict(os.environ, LD_LIBRARY_PATH=LIB))
    with open(texts_path) as f:
        texts = json.load(f)
    try:  # needle's results above come back even without sentence-transformers
        encs, torch = st_encoders()
        out["sentence_transformers"] = [st_baseline(texts, shape, encs[shape], torch) for shape in ["minilm", "e5"]]
    except Exception as e:
        out["sentence_transformers"] = [{"shape": "error", "error": repr(e)}]
    return out


def encoder_summary(e):
    lines = []
    tests = e.get("tests", {}).get("tests", [])
    lines.append(f"bert.test (GPU encoder parity): {[(t['test'], t['outcome']) for t in tests]}")
    st = {b["shape"]: b for b in e.get("sentence_transformers", [])}
    if "error" in st:
        lines.append("  sentence-transformers: " + st.pop("error")["error"])
    for run in e.get("needle", []):
        for r in run.get("results", []):
            shape = "e5" if r["model"].startswith("e5") else "minilm"
            vs = ""
            if shape in st:
                vs = f", {r['passages_per_s'] / st[shape]['passages_per_s']:.2f}x sentence-transformers fp16 " \
                     f"({st[shape]['passages_per_s']:.0f} passages/s, query {st[shape]['query_median_ms']:.2f} ms)"
            lines.append(f"  {r['model']} on {r.get('device')}: {r['passages_per_s']:.0f} passages/s, "
                         f"{r.get('tokens_per_s', 0):.0f} tokens/s, {r.get('model_TFLOP_per_s', 0):.1f} TFLOP/s = "
                         f"{100 * r.get('gemm_share', 0):.1f}% of GEMM peak {r.get('peak_gemm_TFLOP_per_s', 0):.0f}; "
                         f"wiki-18 {r.get('wiki18_hours', 0):.2f} h; query median {r['query_median_ms']:.2f} ms{vs}")
        if "error" in run:
            lines.append(f"  {run.get('command')}: {run['error']}")
    if "error" in e:
        lines.append("  error: " + e["error"])
    return lines


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
        run_binary("gpuflat.test", ["-test.v", "-test.run", "GPU|PTX"], out_dir, 300),
    ]
    for name, fn in [("gpuflat_parity", gpuflat_parity), ("gpuflat_bench", gpuflat_benchmarks),
                     ("encoder", encoder_check)]:
        try:
            results[name] = fn(out_dir)
        except Exception as e:  # the other results still come back
            results[name] = {"error": repr(e)}
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
    p = results.get("gpuflat_parity", {})
    lines.append("gpuflat parity vs torch: " + json.dumps({k: v for k, v in p.items() if k != "run"}))
    lines.append("gpuflat benchmarks:")
    lines += gpuflat_summary(results.get("gpuflat_bench", {}))
    lines.append("GPU encoder:")
    lines += encoder_summary(results.get("encoder", {}))
    with open(os.path.join(out_dir, "summary.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
