#!/usr/bin/env python3
"""PyTorch CPU side of `needle bench encode`: the same texts, threads and batch size, the way
the anchors encode (HF transformers BertModel, fast tokenizer, batches in the given order
padded to their longest text, truncation at 256, mean pooling over the attention mask, L2
normalization). Run BY HAND in ~/.cache/needle/venv-torch (torch 2.5.1, transformers 4.46.3),
right after needle on the same machine:

    bin/needle bench encode --dump /tmp/bench_texts.json
    ~/.cache/needle/venv-torch/bin/python bench/encode_pytorch.py --texts /tmp/bench_texts.json \
        --model ~/.cache/needle/models/all-MiniLM-L6-v2 --threads 2 --shape both
    bin/needle bench encode --threads 2

Prints the same figures as needle: passages/s (best of --repeat, wall and per CPU-second),
single-query latency (median, p90), peak RSS. The e5 shape is a seeded random BertModel of
e5-base-v2's configuration (12 x 768, 12 heads, FFN 3072), tokenized with MiniLM's vocabulary
(the same bert-base-uncased vocabulary).
"""
import argparse
import json
import resource
import time

import torch
from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel


def encode(tok, model, texts, batch_size):
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            b = tok(texts[i:i + batch_size], padding=True, truncation=True, max_length=256, return_tensors="pt")
            h = model(**b).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1)
            out.append(torch.nn.functional.normalize(e, dim=-1))
    return torch.cat(out)


def measure(name, tok, model, texts, batch_size, repeat):
    passages, queries = texts["passages"], texts["queries"]
    tokens = sum(len(ids) for ids in tok(passages, truncation=True, max_length=256)["input_ids"])
    encode(tok, model, passages[:64], batch_size)  # warm-up
    best_wall = best_cpu = 0.0
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        encode(tok, model, passages, batch_size)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        best_wall = max(best_wall, len(passages) / wall)
        best_cpu = max(best_cpu, len(passages) / cpu)
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        encode(tok, model, [q], batch_size)
        lat.append((time.perf_counter() - t0) * 1e3)
    lat.sort()
    weights = sum(p.numel() * p.element_size() for p in model.parameters()) / 1e6
    return {"model": name, "passages": len(passages), "tokens": tokens, "passages_per_s": best_wall,
            "passages_per_cpu_s": best_cpu, "query_median_ms": lat[len(lat) // 2],
            "query_p90_ms": lat[len(lat) * 9 // 10], "weights_mb": weights,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", required=True, help="JSON {passages, queries} from `needle bench encode --dump`")
    ap.add_argument("--model", required=True, help="all-MiniLM-L6-v2 folder (its tokenizer also serves the e5 shape)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shape", default="both", choices=["both", "minilm", "e5"])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    texts = json.load(open(args.texts, encoding="utf-8"))
    tok = AutoTokenizer.from_pretrained(args.model)
    results = []
    if args.shape in ("both", "minilm"):
        model = AutoModel.from_pretrained(args.model).eval()
        results.append(measure("all-MiniLM-L6-v2", tok, model, texts, args.batch_size, args.repeat))
        del model
    if args.shape in ("both", "e5"):
        torch.manual_seed(1)
        cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                         intermediate_size=3072, max_position_embeddings=512, layer_norm_eps=1e-12)
        model = BertModel(cfg, add_pooling_layer=False).eval()
        results.append(measure("e5-base shape (random)", tok, model, texts, args.batch_size, args.repeat))
    if args.json:
        print(json.dumps({"torch": torch.__version__, "threads": args.threads, "results": results}, indent=2))
        return
    print(f"pytorch {torch.__version__}: {args.threads} threads, batch {args.batch_size}")
    for r in results:
        print(f"{r['model']:<24} {r['passages']:4d} passages ({r['tokens']} tokens): {r['passages_per_s']:7.1f} passages/s "
              f"({r['passages_per_cpu_s']:6.1f} per CPU-s); query median {r['query_median_ms']:6.2f} ms, "
              f"p90 {r['query_p90_ms']:6.2f} ms; weights {r['weights_mb']:5.0f} MB, peak RSS {r['peak_rss_mb']:5.0f} MB")


if __name__ == "__main__":
    main()
