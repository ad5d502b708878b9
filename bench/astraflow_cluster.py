"""Runs AstraFlow's own weight transfer on one host of a `go run ./tools/cluster astraflow` rehearsal.

Run BY HAND, by tools/cluster (never by `make test`), in the venv of bench/requirements-astraflow.txt,
against a checkout of AstraFlow (Infini-AI-Lab/astraflow) that is never part of this repository:

    go run ./tools/cluster astraflow --checkout /tmp/astraflow \
        --python ~/.cache/needle/astraflow-venv/bin/python --hosts 8 --link 1gbit --mib 512 --versions 4

This file holds none of AstraFlow's code; it imports the checkout's modules and calls them:

  trainer (in h0): AstraFlow's WeightManager (its sender subprocess: TransferAgent, the HTTP service,
      _compute_delta, the TCP sendfile engine) and the RaaSPool fan-out of /notify_version. It reads
      commands on stdin, one a line: "load PATH" (the next version's safetensors file, read into tensors
      as a trainer's state dict; the first one starts the sender), "register" (the RaaS hosts, into the
      pool), "publish N" (WeightManager.offload, as the trainer calls it after a step; then
      wait_delta_ready and the pool's notify_version, as AstraFlow's trainer and dataflow do), "verify"
      (every host's model.safetensors against the last version loaded).
  raas (in each rollout host): AstraFlow's RaaS3Manager behind its own FastAPI routes (build_app), its
      RaaSWeightReceiver, and its SGLangEngine pointed at a stand-in SGLang on 127.0.0.1 that answers
      every request with 200 at once (no SGLang here). It prints "astraflow raas: version N (MODE)" once
      its /notify_version has pulled, written and loaded version N.

What is adapted to a machine without a GPU or AstraFlow's full install (docs/measurements/
2026-12-07-weights-netns-astraflow.md says the same):
  - Package __init__ files that import all of AstraFlow (datasets, workflows) are skipped: the
    packages on the weight path are made as empty packages over the checkout's folders, so each
    module still loads from the checkout's own file.
  - The trainer's two GPU calls become no-ops: cudaHostRegister (pins the buffer for GPU copies) and
    torch.cuda.synchronize (the copies here are CPU copies, done when copy_ returns). A one-process
    gloo group stands for the trainer's torch.distributed group (offload calls dist.barrier).
  - Each RaaS's receiver is made and registered with the sender before version 1 by an early pull that
    the sender refuses (no version yet); AstraFlow makes it in the first pull: so neither side's first
    version includes start-up, as needle's receivers are connected before it too.
  - The receivers keep their files in the rehearsal's folder (RaaSWeightReceiver.DEFAULT_SHM_DIR),
    the sender's buffers stay in /dev/shm (tools/cluster removes them).
"""

import argparse
import os
import sys
import time
import types

PKGS = (
    "astraflow",
    "astraflow.core",
    "astraflow.core.weight_manager",
    "astraflow.core.workflow",
    "astraflow.dataflow",
    "astraflow.raas",
    "astraflow.raas.server",
)


def use_checkout(root):
    """Makes AstraFlow's packages importable from root without running their __init__ files."""
    for name in PKGS:
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = m


# The sender is a spawned child: it runs this file's top level again, and needs the same packages.
if os.environ.get("ASTRAFLOW_CHECKOUT"):
    use_checkout(os.environ["ASTRAFLOW_CHECKOUT"])


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def trainer(a):
    import torch
    import torch.distributed as dist
    from safetensors.torch import load_file

    import astraflow.core.weight_manager.weight_manager as wm_mod
    from astraflow.core.weight_manager.config import WeightManagerConfig
    from astraflow.core.weight_manager.transfer.config import SenderAgentConfig, TransferEngineConfig
    from astraflow.dataflow.raas_pool import RaaSPool

    torch.cuda.cudart = lambda: types.SimpleNamespace(cudaHostRegister=lambda *args: 0)
    torch.cuda.synchronize = lambda *args, **kw: None

    # As AstraFlow's PPO trainer configures it (ppo_trainer.py), delta enabled.
    cfg = WeightManagerConfig(
        sender_config=SenderAgentConfig(
            trainer_global_rank=0,
            trainer_world_size=1,
            engine_configs=[TransferEngineConfig(local_hostname=a.ip, handshake_port=21000)],
            http_bind_port=a.port,
        ),
        strategies=["full", "delta"],
    )
    wm = wm_mod.WeightManager(cfg)
    pool = RaaSPool(heartbeat_interval=3600)  # no heartbeats during the timed versions
    raas = dict(kv.split("=", 1) for kv in a.raas.split(","))
    endpoint = f"{a.ip}:{a.port}"  # what get_sender_endpoint's host name resolves to on a real cluster
    state, loads = None, 0
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "load":
            state = load_file(arg)
            if wm._buffer is None:
                wm.initialize(iter(state.items()), local_rank=0, global_rank=0)
                dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29511", rank=0, world_size=1)
            loads += 1
            say(f"astraflow trainer: loaded {loads}")
        elif cmd == "register":
            for name, url in raas.items():
                pool.register(name, url)
            say(f"astraflow trainer: registered {len(raas)}")
        elif cmd == "publish":
            v = int(arg)
            t0 = time.monotonic()
            wm.offload(iter(state.items()), version=v, rank=0, world_size=1)
            say(f"astraflow trainer: version {v} offloaded in {time.monotonic() - t0:.3f}s")
            wm.wait_delta_ready(timeout=180.0)
            res = pool.notify_version("default", v, endpoint)
            bad = [uid for uid, r in res.items() if not (isinstance(r, dict) and r.get("ok"))]
            say(f"astraflow trainer: version {v} notified in {time.monotonic() - t0:.3f}s, failed: {bad}")
        elif cmd == "verify":
            verify(a.shm, raas, state)
    pool.shutdown()


def verify(shm, raas, state):
    import torch
    from safetensors.torch import load_file

    bad = []
    for name in raas:
        got = load_file(os.path.join(shm, name, "default", "model.safetensors"))
        same = set(got) == set(state) and all(torch.equal(got[k].view(torch.int16), t.view(torch.int16)) for k, t in state.items())
        if not same:
            bad.append(name)
    say(f"astraflow trainer: verified {len(raas) - len(bad)} of {len(raas)} hosts, differing: {bad}")


class StandIn:
    """A stand-in SGLang: answers every request with 200 and {"success": true} at once."""

    @staticmethod
    def serve(port):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class H(BaseHTTPRequestHandler):
            def answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                body = b'{"success": true}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = answer

            def log_message(self, *args):
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", port), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()


def raas(a):
    import uvicorn

    from astraflow.raas.api.cli_args import InferenceEngineConfig
    from astraflow.raas.engine.sglang_remote import SGLangEngine
    from astraflow.raas.server.manager import RaaS3Manager
    from astraflow.raas.server.routes import build_app
    from astraflow.raas.server.tcp_receiver import RaaSWeightReceiver

    StandIn.serve(a.engine_port)
    RaaSWeightReceiver.DEFAULT_SHM_DIR = a.shm
    m = RaaS3Manager(service_port=a.port)
    engine = SGLangEngine(InferenceEngineConfig())
    engine.initialize(engine_id=a.name, addr=f"127.0.0.1:{a.engine_port}")
    m._engines["default"] = engine
    m._engine_id, m._status = a.name, "ready"  # what bootstrap sets once its engines are up
    try:
        m._pull_weights_to_disk(a.sender, "default")  # refused (no version yet): makes and registers the receiver
    except RuntimeError as e:
        say(f"astraflow raas: early pull refused as expected: {e}")
    if "default" not in m._tcp_receivers:
        sys.exit("astraflow raas: the receiver did not start")

    pull = m.notify_version

    async def notify_version(**kw):
        res = await pull(**kw)
        mode = (res.get("pull_result") or {}).get("mode", "none")
        say(f"astraflow raas: version {kw['version']} ({mode}) ok={res.get('ok')}")
        return res

    m.notify_version = notify_version
    say("astraflow raas: joined")
    uvicorn.run(build_app(m), host="0.0.0.0", port=a.port, log_level="warning")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("role", choices=["trainer", "raas"])
    p.add_argument("--checkout", required=True, help="an AstraFlow checkout (its repository's root)")
    p.add_argument("--shm", required=True, help="the rehearsal's folder on a tmpfs (the receivers' files)")
    p.add_argument("--ip", help="trainer: this host's address")
    p.add_argument("--port", type=int, required=True, help="trainer: the sender's HTTP port; raas: its service port")
    p.add_argument("--raas", help="trainer: NAME=URL,... of the RaaS hosts")
    p.add_argument("--sender", help="raas: the sender's host:port")
    p.add_argument("--name", help="raas: this host's name")
    p.add_argument("--engine-port", type=int, default=30000, help="raas: the stand-in SGLang's port")
    a = p.parse_args()
    os.environ["ASTRAFLOW_CHECKOUT"] = os.path.abspath(a.checkout)
    use_checkout(os.environ["ASTRAFLOW_CHECKOUT"])
    os.dup2(2, 1)  # AstraFlow prints to stdout: one stream for tools/cluster to read
    trainer(a) if a.role == "trainer" else raas(a)


if __name__ == "__main__":
    main()
