"""By hand: a synthetic corpus + Flat index for the time-to-ready / RSS comparison of
`needle serve` and bench/anchor_server.py (not a test oracle; vectors are random).

Writes OUT/corpus.jsonl (N wiki-like rows {"id","contents","url"}, ~660 bytes each) and
OUT/flat.index (faiss IndexFlatIP of N random unit vectors of width D, as faiss.write_index).
Usage: ~/.cache/needle/venv/bin/python bench/synthetic_flat_index.py OUT [N=1000000] [D=384]
"""
import json
import os
import random
import sys

import faiss
import numpy as np

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
d = int(sys.argv[3]) if len(sys.argv) > 3 else 384
os.makedirs(out, exist_ok=True)
words = ["".join(random.Random(i).choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1 + i % 8)) for i in range(5000)]
r = random.Random(2)
with open(os.path.join(out, "corpus.jsonl"), "w") as f:
    for i in range(n):
        text = " ".join(r.choices(words, k=100))
        f.write(json.dumps({"id": str(i), "contents": f'"Title {i}"\n{text}',
                            "url": f"https://en.wikipedia.org/w/index.php?title=Page_{i}"}) + "\n")
index = faiss.IndexFlatIP(d)
rng = np.random.default_rng(1)
for start in range(0, n, 100_000):
    x = rng.standard_normal((min(100_000, n - start), d), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    index.add(x)
faiss.write_index(index, os.path.join(out, "flat.index"))
