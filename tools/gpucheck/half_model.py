"""Copies a sentence-transformers BERT folder with its F32 safetensors weights rounded to F16.

`make gpucheck` uses it to carry all-MiniLM-L6-v2 to the GPU machine (no network there) in half
the bytes: 45 MB instead of 91, inside the GPU check's 64 MiB. The GPU encoder holds its Linear
weights in fp16 anyway; the parity tests on that machine read these same weights on the CPU,
the GPU and in sentence-transformers. numpy only: the safetensors format is an 8-byte header
length, a JSON header of name -> dtype, shape, offsets, then the tensors' bytes.

Usage: python3 half_model.py SRC_DIR DST_DIR
"""
import json
import os
import shutil
import struct
import sys

import numpy as np


def main():
    src, dst = sys.argv[1], sys.argv[2]
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
            blob, dtype = np.frombuffer(blob, dtype="<f4").astype("<f2").tobytes(), "F16"
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
