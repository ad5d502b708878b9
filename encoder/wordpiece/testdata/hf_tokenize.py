"""Reference oracle for package wordpiece: the real HF fast tokenizer (PyPI tokenizers,
pinned in tools/requirements.txt), run once per test over a batch file.

  hf_tokenize.py ids TOKENIZER_JSON MAX_LENGTH IN OUT
      IN: JSON Lines, one JSON string per line. OUT: one line per input, the
      space-separated ids of [CLS] text [SEP], right-truncated at MAX_LENGTH (0: not
      truncated), no padding.
  hf_tokenize.py codepoints TOKENIZER_JSON OUT
      Every Unicode scalar value c (surrogates excluded) in blocks of 4096: one JSON line
      [first, normalizer(s), [pre-tokens of normalizer(s)]] per block, where s joins
      "a" c "a" for each c of the block with spaces, from the tokenizer's own normalizer
      and pre-tokenizer.
  hf_tokenize.py bench TOKENIZER_JSON MAX_LENGTH IN
      Prints the best of 5 encode_batch runs over IN (JSON Lines strings) as
      "<MB/s> <texts/s>" per CPU second of this process (MB = 1e6 bytes of UTF-8
      input): CPU time, not wall time, so that a busy shared machine skews it less.
      Run it with RAYON_NUM_THREADS=1 for a single-core figure.
"""
import json
import sys
import time

from tokenizers import Tokenizer


def ids(tokenizer_json, max_length, in_path, out_path):
    tok = Tokenizer.from_file(tokenizer_json)
    tok.no_padding()
    if int(max_length) == 0:
        tok.no_truncation()
    else:
        tok.enable_truncation(max_length=int(max_length), strategy="longest_first", direction="right")
    with open(in_path, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f]
    encs = tok.encode_batch(texts, add_special_tokens=True)
    with open(out_path, "w", encoding="utf-8") as f:
        for e in encs:
            f.write(" ".join(map(str, e.ids)) + "\n")


BLOCK = 4096


def codepoints(tokenizer_json, out_path):
    tok = Tokenizer.from_file(tokenizer_json)
    norm, pre = tok.normalizer, tok.pre_tokenizer
    with open(out_path, "w", encoding="utf-8") as f:
        for first in range(0, 0x110000, BLOCK):
            s = " ".join("a" + chr(c) + "a" for c in range(first, first + BLOCK) if not 0xD800 <= c <= 0xDFFF)
            n = norm.normalize_str(s)
            words = [w for w, _ in pre.pre_tokenize_str(n)]
            f.write(json.dumps([first, n, words]) + "\n")


def bench(tokenizer_json, max_length, in_path):
    tok = Tokenizer.from_file(tokenizer_json)
    tok.no_padding()
    tok.enable_truncation(max_length=int(max_length), strategy="longest_first", direction="right")
    with open(in_path, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f]
    size = sum(len(t.encode("utf-8")) for t in texts)
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        tok.encode_batch(texts, add_special_tokens=True)
        best = min(best, time.process_time() - start)
    print(f"{size / best / 1e6:.3f} {len(texts) / best:.1f}")


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    {"ids": ids, "codepoints": codepoints, "bench": bench}[mode](*args)
