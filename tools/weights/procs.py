"""Processes that the by-hand proofs of tools/weights start, SIGKILL and start again."""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_members(pgid):
    """The live (not zombie) processes of a process group, from /proc."""
    pids = []
    for d in os.listdir("/proc"):
        try:
            stat = open(f"/proc/{d}/stat").read()
        except (OSError, ValueError):
            continue  # not a process, or gone meanwhile
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(d))
    return pids


def signal_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass  # the group is gone already


def wait_gone(pgid, timeout_s):
    """Whether the group has no live process within timeout_s."""
    deadline = time.time() + timeout_s
    while group_members(pgid):
        if time.time() >= deadline:
            return False
        time.sleep(0.1)
    return True


def shm_files(pids):
    """The /dev/shm files that pids have mapped (vLLM's psm_* message queues): nobody removes
    them after a SIGKILL, as Python's resource tracker dies in the same group."""
    files = set()
    for pid in pids:
        try:
            maps = open(f"/proc/{pid}/maps").read()
        except OSError:
            continue
        for line in maps.splitlines():
            path = line.split(maxsplit=5)[5:]
            # psm_* only: the engine also maps the model file that the receiver keeps in /dev/shm
            if path and path[0].startswith("/dev/shm/psm_") and not path[0].endswith("(deleted)"):
                files.add(path[0])
    return files


class Proc:
    """A process that can be killed and started again with the same arguments. It runs in a
    session (and process group) of its own, and kill and stop signal the whole group: an engine
    such as vLLM forks helpers (EngineCore, Worker) that outlive a signal to its first process.
    After kill or stop no process of the group is left and the /dev/shm files it held are removed;
    cleanups says what each one found."""

    live = set()  # every started Proc, killed at exit so that no group outlives the script

    def __init__(self, args, log, env=None):
        self.args, self.log, self.env, self.p = args, log, env, None
        self.cleanups = []  # per kill or stop: the group's processes before and after, psm_* files removed
        self.start()

    def start(self):
        self.p = subprocess.Popen(self.args, stdout=self.log, stderr=self.log, env=self.env, start_new_session=True)
        Proc.live.add(self)

    def kill(self):
        self._end(signal.SIGKILL)

    def stop(self, grace_s=60):
        self._end(signal.SIGTERM, grace_s)

    def _end(self, sig, grace_s=0):
        pgid = self.p.pid  # start_new_session: the group's id is the leader's pid
        members = group_members(pgid)
        held = shm_files(members)
        signal_group(pgid, sig)
        if not wait_gone(pgid, grace_s) and sig != signal.SIGKILL:
            sig = signal.SIGKILL  # the grace is over
            signal_group(pgid, sig)
        if not wait_gone(pgid, 30):
            raise RuntimeError(f"process group {pgid} of {self.args[:3]} survives SIGKILL: {group_members(pgid)}")
        self.p.wait()
        Proc.live.discard(self)
        left = [f for f in held if os.path.exists(f)]
        size = sum(os.path.getsize(f) for f in left)
        for f in left:
            os.remove(f)
        self.cleanups.append({"signal": signal.Signals(sig).name, "processes": len(members), "processes_left": len(group_members(pgid)),
                              "shm_files_removed": len(left), "shm_bytes_removed": size})

    def check(self):
        """Raises if the process has exited."""
        if self.p.poll() is not None:
            raise RuntimeError(f"{self.args[:3]} exited with {self.p.returncode}")


@atexit.register
def _kill_live():
    for p in list(Proc.live):
        p.kill()


# A SIGTERM of the script exits through the handler above as well (by default it would not).
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


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
