"""By hand: an encoder folder of the e5-base-v2 shape (BERT 12 x 768, 12 heads, FFN 3072,
bert-base-uncased vocabulary) with seeded random fp16 weights, for timing `needle serve` on a
768-wide index (bench/wiki18_shape.py) where the real e5 weights cannot be downloaded. Its
vectors mean nothing: use it for speed and memory only (an exact flat search costs the same
for any query); recall is measured on the generator's own query vectors (`needle bench index`).

Usage: ~/.cache/needle/venv/bin/python bench/e5_shaped_model.py OUT [TOKENIZER_DIR]
(TOKENIZER_DIR: a BERT folder with vocab.txt / tokenizer.json, default the MiniLM one.)
"""
import json
import os
import shutil
import sys

import numpy as np
from safetensors.numpy import save_file

H, LAYERS, FFN, VOCAB, POS = 768, 12, 3072, 30522, 512

out = sys.argv[1]
tok = sys.argv[2] if len(sys.argv) > 2 else os.path.expanduser("~/.cache/needle/models/all-MiniLM-L6-v2")
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(5)


def normal(*shape):
    return (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float16)


t = {"embeddings.word_embeddings.weight": normal(VOCAB, H), "embeddings.position_embeddings.weight": normal(POS, H),
     "embeddings.token_type_embeddings.weight": normal(2, H),
     "embeddings.LayerNorm.weight": np.ones(H, np.float16), "embeddings.LayerNorm.bias": np.zeros(H, np.float16)}
for l in range(LAYERS):
    p = f"encoder.layer.{l}."
    for name, shape in [("attention.self.query", (H, H)), ("attention.self.key", (H, H)), ("attention.self.value", (H, H)),
                        ("attention.output.dense", (H, H)), ("intermediate.dense", (FFN, H)), ("output.dense", (H, FFN))]:
        t[p + name + ".weight"] = normal(*shape)
        t[p + name + ".bias"] = np.zeros(shape[0], np.float16)
    for ln in ["attention.output.LayerNorm", "output.LayerNorm"]:
        t[p + ln + ".weight"] = np.ones(H, np.float16)
        t[p + ln + ".bias"] = np.zeros(H, np.float16)
save_file(t, os.path.join(out, "model.safetensors"))
config = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu", "hidden_size": H,
          "intermediate_size": FFN, "layer_norm_eps": 1e-12, "max_position_embeddings": POS, "num_attention_heads": 12,
          "num_hidden_layers": LAYERS, "type_vocab_size": 2, "vocab_size": VOCAB, "pad_token_id": 0}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
for name in ["vocab.txt", "tokenizer.json"]:
    if os.path.exists(os.path.join(tok, name)):
        shutil.copy(os.path.join(tok, name), os.path.join(out, name))
