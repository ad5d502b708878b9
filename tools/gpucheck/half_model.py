"""Copies a sentence-transformers BERT folder with its F32 safetensors weights rounded to F16 and,
given text files, the word-embedding rows of every token those texts never use set to zero.

`make gpucheck` uses it to carry all-MiniLM-L6-v2 to the GPU machine (no network, no model hub
there) inside the GPU check's 60 MiB: fp16 halves the 91 MB; the GPU encoder holds its Linear
weights in fp16 anyway, and the parity tests there read these same weights on the CPU, the GPU
and in sentence-transformers. The word embeddings are half of MiniLM (30,522 x 384); the check
encodes only the texts it carries (encoder/bert's testdata, the WordNet sample), which use ~10,700
tokens, so the other rows travel as zeros (xz makes them nearly free): every text the check
encodes gets exactly the fp16 model's output, and a text with a token outside them would show
up as a golden-test failure, not pass unseen. numpy and tokenizers (the project venv) only: the
safetensors format is an 8-byte header length, a JSON header of name -> dtype, shape, offsets,
then the tensors' bytes.

Usage: python3 half_model.py SRC_DIR DST_DIR [TEXT_FILE ...]
  a TEXT_FILE ending in .jsonl gives every string in its JSON lines; any other, its lines
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def used_tokens(model_dir, paths):
    """The ids of every token the texts in paths use, with the tokenizer's special tokens."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()  # MiniLM's tokenizer.json cuts at 128 tokens; the encoders read up to 256
    tok.no_padding()
    texts = []

    def strings(v):
        if isinstance(v, str):
            texts.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                strings(x)
        elif isinstance(v, list):
            for x in v:
                strings(x)

    for p in paths:
        with open(p, encoding="utf-8", errors="replace") as f:
            if p.endswith(".jsonl"):
                for line in f:
                    if line.strip():
                        strings(json.loads(line))
            else:
                texts += f.read().splitlines()
    ids = set(tok.get_vocab(with_added_tokens=True)[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]"))
    for enc in tok.encode_batch(texts):
        ids.update(enc.ids)
    return sorted(ids)


def main():
    src, dst, text_files = sys.argv[1], sys.argv[2], sys.argv[3:]
    keep = used_tokens(src, text_files) if text_files else None
    os.makedirs(dst, exist_ok=True)
    for name in ["config.json", "tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
                 "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"]:
        if os.path.exists(os.path.join(src, name)):
            shutil.copy(os.path.join(src, name), dst)
    if os.path.isdir(os.path.join(src, "1_Pooling")):
        shutil.copytree(os.path.join(src, "1_Pooling"), os.path.join(dst, "1_Pooling"), dirs_exist_ok=True)
    with open(os.path.join(src, "model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out_header, blobs, offset = {}, [], 0
    for name, t in header.items():
        if name == "__metadata__":
            out_header[name] = t
            continue
        begin, end = t["data_offsets"]
        blob, dtype = data[begin:end], t["dtype"]
        if dtype == "F32":  # other tensors (position_ids: I64) are copied as they are
            half = np.frombuffer(blob, dtype="<f4").astype("<f2").reshape(t["shape"])
            if keep is not None and name.endswith(WORD_EMBEDDINGS):
                kept = np.zeros_like(half)
                kept[keep] = half[keep]
                half = kept
                print(f"half_model: {len(keep)} of {half.shape[0]} word-embedding rows kept", file=sys.stderr)
            blob, dtype = half.tobytes(), "F16"
        out_header[name] = {"dtype": dtype, "shape": t["shape"], "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    h = json.dumps(out_header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(dst, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
