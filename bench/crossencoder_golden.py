"""sentence-transformers' CrossEncoder.predict on the parity models of encoder/rerank, the
reference of its TestMatchesSentenceTransformers (by hand, in bench/requirements-torch.txt's venv:
sentence-transformers 3.3.1, torch 2.5.1).

  NEEDLE_CE_OUT=/tmp/ce go test -run TestModelFolders ./encoder/rerank   # writes /tmp/ce/{identity,sigmoid}
  python bench/crossencoder_golden.py /tmp/ce encoder/rerank/testdata/golden_scores.json

The pairs are WordNet queries with passages in Search-R1's reranker form "(Title: ...) text",
a passage and a query past the 512-token limit, and empty strings.
"""
import json
import sys

import torch
from sentence_transformers import CrossEncoder

torch.manual_seed(0)
passages = [
    '(Title: "horse, Equus caballus") solid-hoofed herbivorous quadruped domesticated since prehistoric times',
    '(Title: "zebu") domesticated ox having a humped back and long horns and a large dewlap; used chiefly as a draft animal in India and east Asia',
    '(Title: "entity") that which is perceived or known or inferred to have its own distinct existence (living or nonliving)',
    '(Title: "bank") sloping land (especially the slope beside a body of water)',
    '(Title: "bank, depository financial institution") a financial institution that accepts deposits and channels the money into lending activities',
    '(Title: "Café Müller") naïve résumé über straße 日本語のテキスト',
]
queries = ["a large domesticated animal used for riding", "he sat on the bank of the river and watched the currents",
           "he cashed a check at the bank", "what exists?", "", "Who choreographed Café Müller?"]
pairs = [[q, p] for q in queries for p in passages]
long_passage = '(Title: "long") ' + " ".join(["the horse galloped across the wide open field under a grey sky"] * 80)
pairs += [[queries[0], long_passage], [" ".join(["riding horses"] * 300), passages[0]], [" ".join(["bank"] * 400), long_passage], ["", ""]]

out = []
for act in ["identity", "sigmoid"]:
    m = CrossEncoder(f"{sys.argv[1]}/{act}", device="cpu")
    scores = m.predict([tuple(p) for p in pairs], batch_size=32)
    out.append({"activation": "torch.nn.modules.linear.Identity" if act == "identity" else "",
                "pairs": pairs, "scores": [float(s) for s in scores]})
with open(sys.argv[2], "w") as f:
    json.dump(out, f, ensure_ascii=False, indent=0)
print({o["activation"] or "sigmoid": [round(s, 4) for s in o["scores"][:6]] for o in out})
