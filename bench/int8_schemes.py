"""By hand: simulate int8 schemes of the encoder's Linears on MiniLM and count, for the first 400
queries of the WordNet demo (`make run`), how many keep the top-3 rows of the fp32 forward pass
over the demo index (what the real anchor, torch fp32, answers). Fake quantization in float64
NumPy: weights and activations are rounded as a kernel would round them, products exact.
Needs only the project venv (numpy, safetensors, tokenizers, faiss):

    ~/.cache/needle/venv/bin/python bench/int8_schemes.py [scheme ...]

Schemes (none given: all): bf16; int8 today (weights per output and group of 32 inputs, int16
activations per row); 8-bit activations per row, per group of 32 or 64 inputs, per row with the
16 largest |x| of each row kept exact (against exact or int8 weights); weights alone; weights
alone with a bias correction from calibration means. Calibration rows (for the correction) are
500 corpus glosses, never the queries. GELU uses needle's erf polynomial.
"""
import json
import os
import sys

import faiss
import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

CACHE = os.environ.get("NEEDLE_CACHE", os.path.expanduser("~/.cache/needle"))
MODEL, DEMO = CACHE + "/models/all-MiniLM-L6-v2", CACHE + "/demo/wordnet-20000"
H, HEADS, LAYERS, LINEARS = 384, 12, 6, ("qkv", "ao", "fi", "fo")

W = load_file(MODEL + "/model.safetensors")
P = "" if "embeddings.word_embeddings.weight" in W else "bert."
def g(n): return W[P + n].astype(np.float64)
tok = Tokenizer.from_file(MODEL + "/tokenizer.json")
tok.no_padding()
tok.enable_truncation(256)

def erf(x):  # Abramowitz-Stegun 7.1.26, as needle's vector GELU
    s, a = np.sign(x), np.abs(x)
    t = 1 / (1 + 0.3275911 * a)
    p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return s * (1 - p * np.exp(-a * a))
def gelu(x): return 0.5 * x * (1 + erf(x / np.sqrt(2)))
def layernorm(x, gamma, beta):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-12) * gamma + beta

LAY = []
for i in range(LAYERS):
    p = f"encoder.layer.{i}."
    LAY.append(dict(
        qkv=np.concatenate([g(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]),
        qkvb=np.concatenate([g(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")]),
        ao=g(p + "attention.output.dense.weight"), aob=g(p + "attention.output.dense.bias"),
        l1g=g(p + "attention.output.LayerNorm.weight"), l1b=g(p + "attention.output.LayerNorm.bias"),
        fi=g(p + "intermediate.dense.weight"), fib=g(p + "intermediate.dense.bias"),
        fo=g(p + "output.dense.weight"), fob=g(p + "output.dense.bias"),
        l2g=g(p + "output.LayerNorm.weight"), l2b=g(p + "output.LayerNorm.bias")))
EMB = [g("embeddings." + n) for n in ("word_embeddings.weight", "position_embeddings.weight")]
EMB += [g("embeddings.token_type_embeddings.weight")[0], g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias")]

def encode(texts, lin, seen=None):
    """Mean-pooled, normalized embeddings; lin(name, layer, x) is a Linear without its bias, over
    all tokens of all texts packed; seen(name, layer, x), if given, sees each Linear's input."""
    ids = [tok.encode(t).ids for t in texts]
    st = np.cumsum([0] + [len(e) for e in ids])
    x = layernorm(EMB[0][np.concatenate(ids)] + EMB[1][np.concatenate([np.arange(len(e)) for e in ids])] + EMB[2],
                  EMB[3], EMB[4])
    hd = H // HEADS
    def heads(m, a, b): return m[a:b].reshape(b - a, HEADS, hd).transpose(1, 0, 2)
    for i, l in enumerate(LAY):
        seen and seen("qkv", i, x)
        qkv = lin("qkv", i, x) + l["qkvb"]
        ctx = np.zeros((len(x), H))
        for a, b in zip(st[:-1], st[1:]):
            q, k, v = heads(qkv[:, :H], a, b), heads(qkv[:, H:2 * H], a, b), heads(qkv[:, 2 * H:], a, b)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(hd)
            s = np.exp(s - s.max(-1, keepdims=True))
            ctx[a:b] = (s / s.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(b - a, H)
        seen and seen("ao", i, ctx)
        x = layernorm(lin("ao", i, ctx) + l["aob"] + x, l["l1g"], l["l1b"])
        seen and seen("fi", i, x)
        f = gelu(lin("fi", i, x) + l["fib"])
        seen and seen("fo", i, f)
        x = layernorm(lin("fo", i, f) + l["fob"] + x, l["l2g"], l["l2b"])
    out = np.array([x[a:b].mean(0) for a, b in zip(st[:-1], st[1:])])
    return out / np.linalg.norm(out, axis=1, keepdims=True)

def bf16(x):  # round to nearest even, as vcvtneps2bf16 (normal values)
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((u + 0x7fff + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32).astype(np.float64)

def groups(m, G):  # [rows, n] -> [rows, n/G, G], zero padded (G 0: the whole row)
    G = G or m.shape[1]
    return np.pad(m, ((0, 0), (0, (-m.shape[1]) % G))).reshape(len(m), -1, G)

def quant(m, G, amax):  # symmetric per row and group of G, fake-quantized
    q = groups(m, G)
    s = np.abs(q).max(-1, keepdims=True) / amax
    s[s == 0] = 1
    return (np.clip(np.rint(q / s), -amax, amax) * s).reshape(len(m), -1)[:, :m.shape[1]]

def split(x, keep):  # the keep largest |x| of each row apart
    ix = np.argpartition(-np.abs(x), keep, axis=1)[:, :keep]
    r = np.arange(len(x))[:, None]
    big, rest = np.zeros_like(x), x.copy()
    big[r, ix], rest[r, ix] = x[r, ix], 0
    return rest, big

def scheme(act=None, keep=0, exact_big=True, correct=False):
    """act: None (exact activations) or (G, amax); weights int8 per output and group of 32."""
    cache = {}
    def lin(n, i, x):
        if (n, i) not in cache:
            wq = quant(LAY[i][n], 32, 127)
            cache[n, i] = wq, (LAY[i][n] - wq) @ MEAN[n, i] if correct else 0
        wq, corr = cache[n, i]
        if act is None:
            return x @ wq.T + corr
        rest, big = split(x, keep) if keep else (x, 0 * x)
        return quant(rest, *act) @ wq.T + big @ (bf16(LAY[i][n]) if exact_big else wq).T + corr
    return lin

SCHEMES = {
    "bf16": lambda n, i, x: bf16(x) @ bf16(LAY[i][n]).T,
    "int8-today": scheme(act=(0, 32767)),
    "a8-row": scheme(act=(0, 127)),
    "a8-group32": scheme(act=(32, 127)),
    "a8-group64": scheme(act=(64, 127)),
    "a8-row-top16-exact": scheme(act=(0, 127), keep=16),
    "a8-row-top16-int8w": scheme(act=(0, 127), keep=16, exact_big=False),
    "weights-only": scheme(),
    "weights-only-corrected": scheme(correct=True),
}

if __name__ == "__main__":
    index = faiss.read_index(DEMO + "/index/index.faiss")
    queries = [json.loads(l)["query"] for l in open(DEMO + "/queries.jsonl")][:400]
    ref = encode(queries, lambda n, i, x: x @ LAY[i][n].T)
    top = index.search(ref.astype(np.float32), 3)[1]
    calib = [json.loads(l)["contents"] for l in open(DEMO + "/corpus.jsonl")][::40][:500]
    sums, counts = {}, {}
    def mean(n, i, x):
        sums[n, i] = sums.get((n, i), 0) + x.sum(0)
        counts[n, i] = counts.get((n, i), 0) + len(x)
    encode(calib, lambda n, i, x: x @ LAY[i][n].T, mean)
    MEAN = {k: sums[k] / counts[k] for k in sums}
    for name in sys.argv[1:] or SCHEMES:
        e = encode(queries, SCHEMES[name])
        t = index.search(e.astype(np.float32), 3)[1]
        same = sum((t[q] == top[q]).all() for q in range(len(queries)))
        print(f"{name:26s} top-3 equal {same}/{len(queries)}  min cosine {(e * ref).sum(1).min():.6f}", flush=True)
