"""Processes that the by-hand proofs of tools/weights start, SIGKILL and start again."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A process that can be killed and started again with the same arguments."""

    def __init__(self, args, log, env=None):
        self.args, self.log, self.env, self.p = args, log, env, None
        self.start()

    def start(self):
        self.p = subprocess.Popen(self.args, stdout=self.log, stderr=self.log, env=self.env)

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        self.p.terminate()
        self.p.wait()

    def check(self):
        """Raises if the process has exited."""
        if self.p.poll() is not None:
            raise RuntimeError(f"{self.args[:3]} exited with {self.p.returncode}")


def newest_half(send_dir):
    """The path of the sender's half that holds its newest version."""
    meta = json.load(open(os.path.join(send_dir, "sender.json")))
    return os.path.join(send_dir, f"half{meta['halves'].index(meta['newest'])}.safetensors")


def finish(ok, work):
    """Removes the work folder of a passing run, keeps a failing one's; exits 0 or 1."""
    if ok:
        shutil.rmtree(work)
    else:
        print(f"kept {work} for inspection", file=sys.stderr)
    sys.exit(0 if ok else 1)
