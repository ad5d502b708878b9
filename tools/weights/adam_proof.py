"""The weight-transfer proof of docs/weights.md, run by hand (torch is a by-hand download):

    ~/.cache/needle/venv-torch/bin/python tools/weights/adam_proof.py --needle ./needle [--versions 200]

Pinned: torch 2.5.1, transformers 4.46.3, safetensors 0.4.5+, numpy 2.1 (the venv-torch of
~/.cache/needle). A trainer loop holds real MiniLM weights (all-MiniLM-L6-v2, BertModel) in fp32,
takes Adam steps at lr 5e-6 on real gradients (a loss on random token batches), and publishes
every version as bf16 through needle_trainer.publish to a `needle weights send` daemon. Four
`needle weights recv` processes pull (r1 from the sender, re-serving; r2 and r3 from r1; r4 from
the sender); receivers are SIGKILLed and restarted, and the sender restarted, along the way.
At the end every receiver's file must be byte-identical to the sender's newest half (the bytes
the trainer wrote), and HF transformers loading each receiver's folder must give the trainer's
bf16 model's outputs exactly. Prints one JSON summary with the changed fraction per step.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
import needle_trainer as nt  # noqa: E402
from procs import Proc, finish, free_port, newest_half  # noqa: E402  (this folder)


def status(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        return json.load(r)


def wait_ready(http_port, version, proc):
    while True:
        try:
            if status(http_port)["version"] >= version:
                return
        except OSError:
            pass
        if proc.p.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.p.returncode}")
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--needle", required=True, help="the needle binary")
    ap.add_argument("--model", default=os.path.expanduser("~/.cache/needle/models/all-MiniLM-L6-v2"))
    ap.add_argument("--versions", type=int, default=200)
    ap.add_argument("--lr", type=float, default=5e-6)
    ap.add_argument("--dir", default="/dev/shm")
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="needle-adam-proof-", dir=a.dir)
    log = open(os.path.join(work, "daemons.log"), "w")
    send_dir = os.path.join(work, "send")
    tcp, http = free_port(), free_port()
    sender = Proc([a.needle, "weights", "send", "--dir", send_dir, "--listen", f"127.0.0.1:{tcp}",
                   "--http", f"127.0.0.1:{http}", "--chunk", str(1 << 18), "--keep", "8"], log)
    while not os.path.exists(os.path.join(send_dir, "control.sock")):
        time.sleep(0.05)
    recv, ports = [], []
    r1_serve = free_port()
    for i, up in enumerate([f"127.0.0.1:{tcp}", f"127.0.0.1:{r1_serve}", f"127.0.0.1:{r1_serve}", f"127.0.0.1:{tcp}"]):
        d = os.path.join(work, f"r{i + 1}")
        os.makedirs(d)
        shutil.copy(os.path.join(a.model, "config.json"), d)
        port = free_port()
        args = [a.needle, "weights", "recv", "--from", up, "--out", os.path.join(d, "model.safetensors"),
                "--http", f"127.0.0.1:{port}", "--name", f"r{i + 1}", "--threads", "1"]
        if i == 0:
            args += ["--serve", f"127.0.0.1:{r1_serve}"]
        recv.append(Proc(args, log))
        ports.append(port)

    model = transformers.BertModel.from_pretrained(a.model, torch_dtype=torch.float32)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    gen = torch.Generator().manual_seed(1)
    prev, fractions, wire, astra, publish_s = None, [], [], [], []
    for v in range(1, a.versions + 1):
        if v > 1:  # one Adam step on a real gradient
            ids = torch.randint(1000, 30000, (8, 32), generator=gen)
            out = model(input_ids=ids).last_hidden_state
            loss = (out[:, 0] - out[:, 1:].mean(1)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        state = {k: t.detach().to(torch.bfloat16) for k, t in model.state_dict().items()}
        if prev is not None:
            changed = sum(int((state[k].view(torch.int16) != prev[k].view(torch.int16)).sum()) for k in state)
            fractions.append(changed / sum(t.numel() for t in state.values()))
        start = time.perf_counter()
        got = nt.publish(state, dir=send_dir)
        publish_s.append(time.perf_counter() - start)
        assert got == v, (got, v)
        if v > 1:
            with nt.Publisher(send_dir) as p:
                st = p.wait(v)
            wire.append(st["WireBytes"])
            astra.append(st["AstraFlowBytes"])
        prev = state
        # Faults: receivers killed and restarted, the sender restarted.
        if v in (30, 90, 160):
            recv[1].kill()
        if v in (35, 95, 165):
            recv[1].start()
        if v == 60:
            recv[3].kill()
            recv[3].start()
        if v == 120:
            recv[0].kill()  # the re-serving one: r2 and r3 lose their upstream meanwhile
        if v == 125:
            recv[0].start()
        if v == 140:
            sender.kill()
            sender.start()
            while True:
                try:
                    status(http)
                    break
                except OSError:
                    time.sleep(0.05)
    for proc, port in zip(recv, ports):
        wait_ready(port, a.versions, proc)
    want = open(newest_half(send_dir), "rb").read()
    model_bf16 = transformers.BertModel.from_pretrained(a.model, torch_dtype=torch.float32)
    model_bf16.load_state_dict({k: t.float() for k, t in prev.items()})
    model_bf16 = model_bf16.to(torch.bfloat16).eval()
    ids = torch.randint(1000, 30000, (4, 16), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref = model_bf16(input_ids=ids).last_hidden_state
    results = []
    for i in range(4):
        d = os.path.join(work, f"r{i + 1}")
        same_bytes = open(os.path.join(d, "model.safetensors"), "rb").read() == want
        m = transformers.BertModel.from_pretrained(d, torch_dtype=torch.bfloat16).eval()
        with torch.no_grad():
            out = m(input_ids=ids).last_hidden_state
        results.append({"receiver": f"r{i + 1}", "bytes_identical": same_bytes, "outputs_equal": bool(torch.equal(out, ref))})
    for proc in recv:
        proc.stop()
    sender.stop()
    f = np.array(fractions)
    summary = {
        "torch": torch.__version__, "transformers": transformers.__version__, "versions": a.versions, "lr": a.lr,
        "model": "all-MiniLM-L6-v2 (BertModel, 22.7M parameters, fp32 trainer, bf16 published)",
        "changed_fraction": {"min": f.min(), "median": float(np.median(f)), "max": f.max(), "mean": f.mean(),
                             "first5": [round(x, 5) for x in fractions[:5]], "last5": [round(x, 5) for x in fractions[-5:]]},
        "wire_bytes_per_step_median": float(np.median(wire)), "astraflow_bytes_per_step_median": float(np.median(astra)),
        "wire_over_astraflow_median": float(np.median(np.array(wire) / np.array(astra))),
        "file_bytes": len(want), "publish_seconds_median": float(np.median(publish_s)),
        "receivers": results,
    }
    print(json.dumps(summary, indent=2, default=float))
    ok = all(r["bytes_identical"] and r["outputs_equal"] for r in results)
    finish(ok, work)


if __name__ == "__main__":
    main()
