#!/usr/bin/env python3
"""By-hand reference for `needle build`: what the anchors' index builder does
(Search-R1 / FlashRAG `search_r1/search/index_builder.py`, dense path), on CPU.

- corpus JSONL read whole, batches in corpus order (no length sorting),
- HF tokenizer with padding=True (pad to the longest in each batch), truncation at max_length,
- transformers AutoModel forward, mean pooling over the attention mask (or CLS), L2 normalize,
- faiss.index_factory(dim, factory, METRIC_INNER_PRODUCT), train if needed, add, write_index.

Optionally evaluates recall@1/@5 of the index it built (or of another index, e.g. needle's
index.faiss) on a queries JSONL ({"query", "gold"} per line, as tools/wordnet writes).

Run in the torch venv (never part of `make test`):
  ~/.cache/needle/venv-torch/bin/python bench/anchor_index_builder.py \
      --corpus C.jsonl --model ~/.cache/needle/models/all-MiniLM-L6-v2 --out /tmp/anchor \
      [--queries Q.jsonl] [--eval-index other/index.faiss]
"""
import argparse
import json
import os
import sys
import time

import faiss
import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def encode(model, tok, texts, batch_size, max_length, pooling):
    """Embeddings of texts in order, batches as they come (pad to longest per batch)."""
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            batch = tok(texts[i:i + batch_size], padding=True, truncation=True,
                        max_length=max_length, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            if pooling == "mean":
                mask = batch["attention_mask"]
                hidden = hidden.masked_fill(~mask[..., None].bool(), 0.0)
                emb = hidden.sum(dim=1) / mask.sum(dim=1)[..., None]
            else:
                emb = hidden[:, 0]
            emb = torch.nn.functional.normalize(emb, dim=-1)
            out.append(emb.numpy().astype(np.float32))
            done = min(i + batch_size, len(texts))
            if (i // batch_size) % 20 == 0 or done == len(texts):
                print(f"encoded {done}/{len(texts)}", file=sys.stderr, flush=True)
    return np.concatenate(out, axis=0)


def recall(index, qemb, gold, ks=(1, 5)):
    _, labels = index.search(qemb, max(ks))
    gold = np.asarray(gold)[:, None]
    return {k: float((labels[:, :k] == gold).any(axis=1).mean()) for k in ks}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, help="folder for index.faiss and emb.memmap")
    p.add_argument("--factory", default="Flat")
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=512, help="the anchors' default (per GPU)")
    p.add_argument("--prefix", default="", help='"passage: " for e5; "" for MiniLM')
    p.add_argument("--query-prefix", default="", help='"query: " for e5')
    p.add_argument("--pooling", default="mean", choices=["mean", "cls"])
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    p.add_argument("--queries", help="queries JSONL with gold rows: print recall@1/@5")
    p.add_argument("--eval-index", help="also evaluate this FAISS index (e.g. needle's) with the same query embeddings")
    p.add_argument("--skip-build", action="store_true", help="only evaluate --eval-index")
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    began = time.time()
    tok = AutoTokenizer.from_pretrained(a.model, use_fast=True)
    model = AutoModel.from_pretrained(a.model).eval()
    report = {"model": a.model, "factory": a.factory, "torch_threads": torch.get_num_threads()}
    if not a.skip_build:
        rows = read_jsonl(a.corpus)
        texts = [a.prefix + r["contents"] for r in rows]
        t0 = time.time()
        emb = encode(model, tok, texts, a.batch_size, a.max_length, a.pooling)
        t1 = time.time()
        index = faiss.index_factory(emb.shape[1], a.factory, faiss.METRIC_INNER_PRODUCT)
        if not index.is_trained:
            index.train(emb)
        index.add(emb)
        os.makedirs(a.out, exist_ok=True)
        faiss.write_index(index, os.path.join(a.out, "index.faiss"))
        emb.tofile(os.path.join(a.out, "emb.memmap"))
        end = time.time()
        report.update(rows=len(texts), encode_seconds=round(t1 - t0, 2), total_seconds=round(end - began, 2),
                      passages_per_s=round(len(texts) / (end - began), 1),
                      encode_passages_per_s=round(len(texts) / (t1 - t0), 1))
    if a.queries:
        qs = read_jsonl(a.queries)
        qemb = encode(model, tok, [a.query_prefix + q["query"] for q in qs], a.batch_size, a.max_length, a.pooling)
        gold = [q["gold"] for q in qs]
        report["queries"] = len(qs)
        if not a.skip_build:
            report["recall"] = recall(index, qemb, gold)
        if a.eval_index:
            report["eval_index"] = a.eval_index
            report["eval_recall"] = recall(faiss.read_index(a.eval_index), qemb, gold)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
