"""Cross-encoder speed and agreement, by hand: sentence-transformers' CrossEncoder.predict
(Search-R1's reranker: batch 32) against needle's POST /rerank on the same pairs and weights.

  python bench/rerank_speed.py MODEL_DIR REQUEST.json http://127.0.0.1:8000 [runs]

REQUEST.json is a /rerank body ({"queries", "documents": [[{"contents"}]]}); needle serve must
run with --rerank-model MODEL_DIR. Prints pairs/s of both (best of runs) and the largest score
difference.
"""
import json
import sys
import time
import urllib.request

import torch
from sentence_transformers import CrossEncoder


def passage(contents):
    title, _, text = contents.partition("\n")
    return f"(Title: {title}) {text}"


model_dir, req_path, url = sys.argv[1], sys.argv[2], sys.argv[3]
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 3
req = json.load(open(req_path))
req["rerank_topk"], req["return_scores"] = max(len(d) for d in req["documents"]), True
pairs = [(q, passage(d["contents"])) for q, docs in zip(req["queries"], req["documents"]) for d in docs]

m = CrossEncoder(model_dir, device="cpu")
best = float("inf")
for _ in range(runs):
    t = time.perf_counter()
    st = m.predict(pairs, batch_size=32)
    best = min(best, time.perf_counter() - t)
st_rate = len(pairs) / best

body = json.dumps(req).encode()
best = float("inf")
for _ in range(runs):
    t = time.perf_counter()
    out = json.load(urllib.request.urlopen(urllib.request.Request(url + "/rerank", body, {"Content-Type": "application/json"})))
    best = min(best, time.perf_counter() - t)
needle_rate = len(pairs) / best

want = {}
for (q, p), s in zip(pairs, st):
    want[(q, p)] = float(s)
diff = max(abs(h["score"] - want[(q, h["document"])]) for q, hits in zip(req["queries"], out["result"]) for h in hits)
print(json.dumps({"pairs": len(pairs), "torch_threads": torch.get_num_threads(), "sentence_transformers_pairs_per_s": round(st_rate, 1),
                  "needle_pairs_per_s": round(needle_rate, 1), "speedup": round(needle_rate / st_rate, 2), "max_abs_score_diff": diff}))
