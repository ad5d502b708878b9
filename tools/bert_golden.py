#!/usr/bin/env python3
"""Reference embeddings for needle's BERT golden test (encoder/bert/golden_test.go).

Run BY HAND (never by `make test`) in the separate torch venv:
    python3 -m venv ~/.cache/needle/venv-torch
    ~/.cache/needle/venv-torch/bin/pip install numpy==2.1.3 torch==2.5.1 \
        transformers==4.46.3 sentence-transformers==3.3.1
    ~/.cache/needle/venv-torch/bin/python tools/bert_golden.py \
        --model ~/.cache/needle/models/all-MiniLM-L6-v2 --out encoder/bert/testdata

Pinned: torch 2.5.1, transformers 4.46.3, sentence-transformers 3.3.1, numpy 2.1.3 (CPU, fp32).

Writes into --out:
  golden_texts.jsonl    one JSON string per line: >= 300 varied texts (short queries, WordNet
                        glosses, passages past 256 tokens, the empty string, non-Latin scripts,
                        seeded random Unicode)
  golden_emb.f32        little-endian float32 [len(texts), dim]: sentence-transformers
                        embeddings (mean pooling, max_seq_length 256, L2-normalized)
  wordnet_corpus.jsonl  2,000 WordNet noun glosses as {"id", "contents"} rows
  wordnet_queries.jsonl 100 WordNet example sentences (JSON strings)
  wordnet_top.json      per query, the reference top-20 corpus rows and scores (inner product
                        of normalized fp32 embeddings), best first
"""
import argparse
import json
import os
import random

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from transformers import AutoModel, AutoTokenizer

WORDNET = "/usr/share/wordnet/data.noun"

NON_LATIN = [
    "北京是中华人民共和国的首都", "東京は日本の首都です。", "서울은 대한민국의 수도이다",
    "Москва — столица России", "Αθήνα είναι η πρωτεύουσα της Ελλάδας", "القاهرة هي عاصمة مصر",
    "ירושלים היא עיר הבירה", "नई दिल्ली भारत की राजधानी है", "กรุงเทพมหานครเป็นเมืองหลวง",
    "Tiếng Việt có dấu: Hà Nội", "Ελληνικά και English μαζί", "日本語とEnglishの混在テキスト",
    "emoji 🎉🚀 party time 😀", "Crème brûlée à la française, naïve façade", "Ångström Øresund Æsir",
    "Straße Größe Übermaß", "¿Dónde está la biblioteca? ¡Aquí!", "ﬁnancial ligature ﬂow",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３", "zero\u200bwidth\u200bspace", "tab\tand\nnewline\r\nmix",
    "control\x01\x02chars\x7f here", "   leading and trailing spaces   ", "ALL CAPS QUERY ABOUT NASA",
    "C++ vs. C# vs. F#: which?", "e-mail: someone@example.com, url https://en.wikipedia.org/wiki/BERT",
    "3.14159 2,718 1e-9 -42 +7 100%", "supercalifragilisticexpialidocious" * 4,
    "a" * 150, "unaffable unbelievable antidisestablishmentarianism", "Ꭰ Cherokee ᏣᎳᎩ syllabary",
    "ᠮᠣᠩᠭᠣᠯ Mongolian script", "Ethiopic ሰላም ዓለም", "Armenian Բարեւ", "Georgian გამარჯობა",
    "Tamil வணக்கம் உலகம்", "Bengali হ্যালো বিশ্ব", "Khmer សួស្តី", "Tibetan བཀྲ་ཤིས་བདེ་ལེགས",
    "Math ∑ ∫ √ ∞ ≠ ≤", "Musical 𝄞 symbols 𝅘𝅥𝅮", "???!!!...", "—–-‒―", "\u00a0nbsp\u00a0",
]


def read_wordnet(path):
    """(lemmas, definition, examples) for each synset line of data.noun, in file order."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith(" ") or " | " not in line:
                continue
            head, gloss = line.rstrip("\n").split(" | ", 1)
            fields = head.split()
            n = int(fields[3], 16)
            lemmas = [fields[4 + 2 * i].replace("_", " ") for i in range(n)]
            parts = [p.strip() for p in gloss.split(";")]
            examples = [p.strip('"') for p in parts if p.startswith('"')]
            definition = "; ".join(p for p in parts if p and not p.startswith('"'))
            out.append((lemmas, definition, examples))
    return out


def passage(lemmas, definition):
    return '"' + ", ".join(lemmas) + '"\n' + definition


def build_texts(synsets, rng):
    texts = ["", " ", "hello", "what is the capital of france?", "query: who wrote hamlet"]
    # short queries: WordNet example sentences and lemma lists
    examples = [e for _, _, ex in synsets[3000:] for e in ex]
    texts += rng.sample(examples, 90)
    texts += [" ".join(l) for l, _, _ in rng.sample(synsets, 30)]
    # passages: glosses in the anchors' "Title"\ntext form
    texts += [passage(l, d) for l, d, _ in rng.sample(synsets, 100)]
    # long passages: many glosses joined, from ~150 to ~600 tokens (truncation at 256)
    for i in range(30):
        k = 8 + i * 2
        texts.append(" ".join(d for _, d, _ in rng.sample(synsets, k)))
    texts += NON_LATIN
    # seeded random Unicode from a few scripts and punctuation
    alphabet = [chr(c) for r in [(0x20, 0x7e), (0xc0, 0x17f), (0x391, 0x3c9), (0x410, 0x44f),
                                 (0x4e00, 0x4e80), (0x3040, 0x309f), (0x600, 0x6ff)] for c in range(r[0], r[1] + 1)]
    for _ in range(25):
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))))
    return texts


def st_encode(model, texts):
    return model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)


def hf_encode(model_dir, texts):
    """Independent check of sentence-transformers: plain transformers + mean pooling."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), 32):
            b = tok(texts[i:i + 32], padding=True, truncation=True, max_length=256, return_tensors="pt")
            h = model(**b).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).float()
            e = (h * m).sum(1) / m.sum(1)
            out.append(torch.nn.functional.normalize(e, dim=-1).numpy())
    return np.concatenate(out).astype(np.float32)


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="sentence-transformers model folder (all-MiniLM-L6-v2)")
    ap.add_argument("--out", required=True, help="testdata folder to write")
    args = ap.parse_args()
    torch.set_num_threads(2)
    rng = random.Random(20261122)
    synsets = [s for s in read_wordnet(WORDNET) if s[1]]
    texts = build_texts(synsets, rng)
    model = SentenceTransformer(args.model, device="cpu")
    model.max_seq_length = 256
    emb = st_encode(model, texts)
    check = hf_encode(args.model, texts)
    worst = float((emb * check).sum(1).min())
    assert worst > 0.99999, f"sentence-transformers and transformers disagree: min cosine {worst}"
    os.makedirs(args.out, exist_ok=True)
    write_jsonl(os.path.join(args.out, "golden_texts.jsonl"), texts)
    emb.tofile(os.path.join(args.out, "golden_emb.f32"))

    corpus = synsets[:2000]
    rows = [{"id": str(i), "contents": passage(l, d)} for i, (l, d, _) in enumerate(corpus)]
    pool = [e for _, _, ex in corpus for e in ex]
    queries = rng.sample(pool, 100)
    cemb = st_encode(model, [r["contents"] for r in rows])
    qemb = st_encode(model, queries)
    scores = qemb @ cemb.T
    top = []
    for q in range(len(queries)):
        ids = np.argsort(-scores[q], kind="stable")[:20]
        top.append({"ids": ids.tolist(), "scores": [float(scores[q, i]) for i in ids]})
    write_jsonl(os.path.join(args.out, "wordnet_corpus.jsonl"), rows)
    write_jsonl(os.path.join(args.out, "wordnet_queries.jsonl"), queries)
    with open(os.path.join(args.out, "wordnet_top.json"), "w") as f:
        json.dump(top, f)
    print(f"{len(texts)} texts (st vs hf min cosine {worst:.7f}), {len(rows)} corpus rows, {len(queries)} queries")


if __name__ == "__main__":
    main()
