"""ONNX Runtime baseline for needle's CPU encoder: the BERT graph built by hand with
onnx.helper from the same model.safetensors (no torch, no exporter), run by ONNX Runtime in fp32
and after onnxruntime.quantization.quantize_dynamic (int8 weights per tensor, the default,
and per channel; uint8 activations), on the same texts and threads as `go test -bench Precisions ./encoder/bert`.

Reports passages/s (256 WordNet glosses, length-sorted batches of 64, padded with a mask as
ORT users run it), single-query latency (median), and each graph's cosine with the fp32
sentence-transformers embeddings of encoder/bert/testdata (min and mean).

  python3 -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install -r bench/onnx_requirements.txt
  /tmp/ortvenv/bin/python bench/onnx_baseline.py --model ~/.cache/needle/models/all-MiniLM-L6-v2 --threads 2
"""
import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from safetensors.numpy import load_file
from tokenizers import Tokenizer

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "engine", "bert", "testdata")
QUERY = "query: a member of the genus Canis that has been domesticated"


def build_graph(model_dir):
    """The BertModel forward pass (token type 0) as an ONNX graph: input_ids and attention_mask
    [batch, length] int64 in, last hidden state [batch, length, hidden] out."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    w = load_file(os.path.join(model_dir, "model.safetensors"))
    p = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    H, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    d, eps = H // heads, cfg.get("layer_norm_eps", 1e-12)
    inits, nodes = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def weight(name, transpose=False):
        a = w[p + name].astype(np.float32)
        return const(name, a.T if transpose else a)

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def linear(x, name, out):
        y = node("MatMul", [x, weight(name + ".weight", transpose=True)], out + ".mm")
        return node("Add", [y, weight(name + ".bias")], out)

    def layernorm(x, name, out):
        return node("LayerNormalization", [x, weight(name + ".weight"), weight(name + ".bias")], out, axis=-1, epsilon=eps)

    # embeddings: word + position + token type 0
    word = node("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "emb.word")
    length = node("Shape", ["input_ids"], "emb.shape", start=1, end=2)
    zero, one = const("c.zero", np.array([0], np.int64)), const("c.one", np.array([1], np.int64))
    pos_ids = node("Range", [node("Squeeze", [zero], "c.zero0"), node("Squeeze", [length], "emb.len"),
                             node("Squeeze", [one], "c.one0")], "emb.pos_ids")
    pos = node("Gather", [weight("embeddings.position_embeddings.weight"), pos_ids], "emb.pos")
    type0 = const("emb.type0", w[p + "embeddings.token_type_embeddings.weight"][0].astype(np.float32))
    x = node("Add", [node("Add", [word, pos], "emb.wp"), type0], "emb.sum")
    x = layernorm(x, "embeddings.LayerNorm", "emb.out")
    # additive mask [batch, 1, 1, length]: 0 for tokens, -1e4 for padding (as BERT's)
    maskf = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    maskf = node("Unsqueeze", [maskf, const("c.axes12", np.array([1, 2], np.int64))], "mask.4d")
    bias = node("Mul", [node("Sub", [const("c.onef", np.array(1, np.float32)), maskf], "mask.inv"),
                        const("c.neg", np.array(-1e4, np.float32))], "mask.bias")
    split_shape = const("c.split", np.array([0, 0, heads, d], np.int64))
    merge_shape = const("c.merge", np.array([0, 0, H], np.int64))
    scale = const("c.scale", np.array(1 / np.sqrt(d), np.float32))
    half, sqrt1_2 = const("c.half", np.array(0.5, np.float32)), const("c.s12", np.array(np.sqrt(0.5), np.float32))
    onef = "c.onef"
    for l in range(cfg["num_hidden_layers"]):
        n = f"encoder.layer.{l}."

        def heads_of(t, name, perm):
            return node("Transpose", [node("Reshape", [t, split_shape], name + ".r")], name, perm=perm)

        q = heads_of(linear(x, n + "attention.self.query", n + "q"), n + "qh", [0, 2, 1, 3])
        k = heads_of(linear(x, n + "attention.self.key", n + "k"), n + "kh", [0, 2, 3, 1])
        v = heads_of(linear(x, n + "attention.self.value", n + "v"), n + "vh", [0, 2, 1, 3])
        s = node("Add", [node("Mul", [node("MatMul", [q, k], n + "qk"), scale], n + "qks"), bias], n + "scores")
        ctx = node("MatMul", [node("Softmax", [s], n + "probs", axis=-1), v], n + "ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], n + "ctx.t", perm=[0, 2, 1, 3]), merge_shape], n + "ctx.m")
        a = linear(ctx, n + "attention.output.dense", n + "attn")
        x = layernorm(node("Add", [a, x], n + "attn.res"), n + "attention.output.LayerNorm", n + "ln1")
        h = linear(x, n + "intermediate.dense", n + "ffn1")
        erf = node("Erf", [node("Mul", [h, sqrt1_2], n + "gelu.s")], n + "gelu.erf")
        h = node("Mul", [node("Mul", [h, half], n + "gelu.h"), node("Add", [erf, onef], n + "gelu.1")], n + "gelu")
        f = linear(h, n + "output.dense", n + "ffn2")
        x = layernorm(node("Add", [f, x], n + "ffn.res"), n + "output.LayerNorm", n + "ln2")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    g = helper.make_graph(nodes, "bert",
                          [helper.make_tensor_value_info(i, TensorProto.INT64, ["batch", "length"]) for i in ("input_ids", "attention_mask")],
                          [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "length", H])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


class Encoder:
    def __init__(self, path, tok, threads):
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
        self.s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.tok = tok

    def encode(self, texts, batch=64):
        """Mean-pooled, L2-normalized embeddings in input order (length-sorted batches)."""
        encs = self.tok.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        out = [None] * len(texts)
        for b in range(0, len(order), batch):
            idx = order[b:b + batch]
            L = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), L), np.int64)
            mask = np.zeros((len(idx), L), np.int64)
            for r, i in enumerate(idx):
                ids[r, :len(encs[i].ids)] = encs[i].ids
                mask[r, :len(encs[i].ids)] = 1
            h = self.s.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            v = (h * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
            for r, i in enumerate(idx):
                out[i] = v[r]
        return np.stack(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="passes over the glosses per graph (alternating)")
    ap.add_argument("--queries", type=int, default=50, help="single-query runs per round and graph")
    a = ap.parse_args()
    tok = Tokenizer.from_file(os.path.join(a.model, "tokenizer.json"))
    tok.enable_truncation(256)
    tok.no_padding()
    glosses = [json.loads(l)["contents"] for l in open(os.path.join(TESTDATA, "wordnet_corpus.jsonl"))][:256]
    golden = [json.loads(l) for l in open(os.path.join(TESTDATA, "golden_texts.jsonl"))]
    want = np.fromfile(os.path.join(TESTDATA, "golden_emb.f32"), np.float32).reshape(len(golden), -1)
    tmp = tempfile.mkdtemp()
    fp32, int8, int8pc = (os.path.join(tmp, f"bert_{n}.onnx") for n in ("fp32", "int8", "int8pc"))
    onnx.save(build_graph(a.model), fp32)
    quantize_dynamic(fp32, int8, weight_type=QuantType.QInt8)  # per tensor: the default
    quantize_dynamic(fp32, int8pc, weight_type=QuantType.QInt8, per_channel=True)  # as needle's weights
    encs = {"ort-fp32": Encoder(fp32, tok, a.threads), "ort-int8": Encoder(int8, tok, a.threads),
            "ort-int8-per-channel": Encoder(int8pc, tok, a.threads)}
    for name, e in encs.items():
        cos = (e.encode(golden) * want).sum(1)
        print(f"{name}: golden cosine with sentence-transformers fp32: min {cos.min():.6f} mean {cos.mean():.6f} over {len(golden)} texts")
    passages = {n: [] for n in encs}
    query = {n: [] for n in encs}
    for _ in range(a.rounds):
        for name, e in encs.items():
            t0 = time.perf_counter()
            e.encode(glosses)
            passages[name].append(time.perf_counter() - t0)
            for _ in range(a.queries):
                t0 = time.perf_counter()
                e.encode([QUERY])
                query[name].append(time.perf_counter() - t0)
    for name in encs:
        print(f"{name}: {len(glosses) * len(passages[name]) / sum(passages[name]):.1f} passages/s "
              f"(best round {len(glosses) / min(passages[name]):.1f}), single query median "
              f"{statistics.median(query[name]) * 1e6:.0f} us, threads {a.threads}")


if __name__ == "__main__":
    main()
