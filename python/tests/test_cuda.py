"""The CUDA path (libneedle's needle_cuda_* entry points through needle_trainer) against the CPU
path and verl's float64 definitions. The tests that need a GPU skip without torch or a CUDA
device, saying why; under NEEDLE_REQUIRE_GPU=1 (the GPU check, on the GPU machine) they fail
instead. NEVER RUN ON A GPU so far. The tests named *without_gpu run the C entry points here,
without torch: arguments are refused before the driver, a machine without a driver is told so, and
against the emulated driver (testkit/cudaemu/driver.cpp, host memory as device memory) the
entry points compute what the CPU path computes."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest

import needle_trainer as nt
from needle_trainer._native import ERR_LEN, PATH, lib

from conftest import assert_close, reference


@pytest.fixture
def torch_cuda():
    """torch with a usable CUDA device, or a skip (a failure under NEEDLE_REQUIRE_GPU=1) saying why."""
    def unavailable(why):
        if os.environ.get("NEEDLE_REQUIRE_GPU") == "1":
            pytest.fail(f"NEEDLE_REQUIRE_GPU=1 and {why}")
        pytest.skip(why)
    try:
        import torch
    except ImportError as e:
        unavailable(f"torch does not import ({e}): the CUDA path needs torch CUDA tensors")
    if not torch.cuda.is_available():
        unavailable(f"no CUDA device (torch {torch.__version__}, torch.cuda.is_available() is False)")
    return torch


def test_logprob_matches_cpu_and_reference(torch_cuda):
    torch = torch_cuda
    g = torch.Generator().manual_seed(1)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for n, v in ((1, 1), (3, 31), (7, 4099), (2, 151936)):
            logits = (torch.randn(n, v, generator=g) * 4).to(dtype)
            labels = torch.randint(0, v, (n,), generator=g)
            labels[::3] = -100
            lp, ent = nt.logprobs_from_logits(logits.cuda(), labels.cuda(), temperature=0.7, return_entropy=True)
            assert lp.is_cuda and lp.dtype == torch.float32 and lp.shape == (n,)
            cpu_lp, cpu_ent = nt.logprobs_from_logits(logits, labels, temperature=0.7, return_entropy=True)
            want_lp, want_ent = reference(logits.float().numpy(), labels.numpy(), 0.7)
            what = f"{dtype} n={n} v={v}"
            # The device's ex2/lg2 are approximate (~2 ulp): the CPU's 2e-5 plus that.
            assert_close(lp.cpu().numpy(), want_lp, 1e-4, what + " logprob vs float64")
            assert_close(ent.cpu().numpy(), want_ent, 1e-4, what + " entropy vs float64")
            assert_close(lp.cpu().numpy(), cpu_lp.numpy(), 1e-4, what + " logprob vs CPU")
            assert_close(ent.cpu().numpy(), cpu_ent.numpy(), 1e-4, what + " entropy vs CPU")


def test_logprob_edge_rows(torch_cuda):
    """NaN and +inf rows give NaN for that row only; a label outside [0, V) gives NaN (on the CPU
    it is an error; device labels are not read back)."""
    torch = torch_cuda
    logits = torch.zeros(4, 10, device="cuda")
    logits[1, 3], logits[2, 4] = float("nan"), float("inf")
    labels = torch.tensor([1, 1, 1, 10], device="cuda")
    lp = nt.logprobs_from_logits(logits, labels).cpu()
    assert torch.isnan(lp[1:]).all() and abs(lp[0].item() + np.log(10)) < 1e-5


def test_logprob_on_a_side_stream(torch_cuda):
    """Work is queued on torch's current stream: results read on that stream are complete."""
    torch = torch_cuda
    logits = torch.randn(64, 32768, device="cuda", dtype=torch.bfloat16)
    labels = torch.randint(0, 32768, (64,), device="cuda")
    want = nt.logprobs_from_logits(logits, labels)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = nt.logprobs_from_logits(logits, labels) * 1  # the multiply runs after, on s
    torch.cuda.synchronize()
    assert torch.equal(got, want)


def test_linear_logprob(torch_cuda):
    torch = torch_cuda
    g = torch.Generator().manual_seed(2)
    for dtype, tol in ((torch.float32, 1e-4), (torch.bfloat16, 2e-2)):
        hidden = torch.randn(2, 37, 64, generator=g).to(dtype)
        weight = (torch.randn(5000, 64, generator=g) / 8).to(dtype)
        labels = torch.randint(0, 5000, (2, 37), generator=g)
        lp, ent = nt.linear_logprobs(hidden.cuda(), weight.cuda(), labels.cuda(), return_entropy=True)
        assert lp.shape == (2, 37) and lp.is_cuda
        want_lp, want_ent = reference((hidden.double() @ weight.double().T).numpy(), labels.numpy())
        # bf16: the logits are rounded to bf16 as the model's own matmul rounds them.
        assert_close(lp.cpu().numpy(), want_lp, tol, f"{dtype} logprob")
        assert_close(ent.cpu().numpy(), want_ent, tol, f"{dtype} entropy")
    with pytest.raises(TypeError, match="must match"):
        nt.linear_logprobs(hidden.cuda(), weight.float().cuda(), labels.cuda())


def test_delta_encode_matches_cpu(torch_cuda):
    """Indices and values bit for bit the CPU encode's, for 2- and 4-byte elements, at sizes
    around the 2,048-element tile and with nothing, some or everything changed."""
    torch = torch_cuda
    g = torch.Generator().manual_seed(3)
    for dtype in (torch.bfloat16, torch.float32):
        for n in (1, 2047, 2048, 2049, 5 * 2048 + 3, 1 << 20):
            for frac in (0.0, 0.01, 1.0):
                old = torch.randn(n, generator=g).to(dtype)
                new = old.clone()
                changed = torch.rand(n, generator=g) < frac
                new[changed] = (new[changed].float() + 1).to(dtype)
                d = nt.delta_encode(old.cuda(), new.cuda())
                want = nt.delta_encode(old, new)
                assert d.indices.is_cuda and d.numel == n
                assert np.array_equal(host_bits(torch, d.indices), want.indices), (dtype, n, frac)
                assert np.array_equal(host_bits(torch, d.values), want.values), (dtype, n, frac)
    base = torch.zeros(4, device="cuda")
    with pytest.raises(nt.GPUNotBuiltError, match="delta_apply runs on the CPU only"):
        nt.delta_apply(base, nt.delta_encode(torch.zeros(4), torch.ones(4)))


def host_bits(torch, t):
    """A CUDA tensor of unsigned integers as a NumPy array, through the signed type of its width
    (torch's unsigned types have few operations of their own)."""
    signed = {torch.uint16: (torch.int16, np.uint16), torch.uint32: (torch.int32, np.uint32),
              torch.uint64: (torch.int64, np.uint64)}[t.dtype]
    return t.view(signed[0]).cpu().numpy().view(signed[1])


def _cuda_logprob_f32(n=1, v=4, temperature=1.0, ptr=0x10000, device=0):
    err = ctypes.create_string_buffer(ERR_LEN)
    rc = lib.needle_cuda_logprob_f32(ptr, n, v, ptr, temperature, -100, ptr, 0, 0, device, 0, err, ERR_LEN)
    return rc, err.value.decode()


def test_cuda_arguments_without_gpu():
    """Bad arguments are refused before the driver is asked for anything."""
    for kw, want in [({"n": -1}, "n=-1"), ({"v": 0}, "v=0"), ({"temperature": 0.0}, "temperature=0"),
                     ({"ptr": 0}, "logits, labels and out_logprob")]:
        rc, msg = _cuda_logprob_f32(**kw)
        assert rc == -1 and want in msg and msg.startswith("needle_cuda_logprob_f32: "), (kw, msg)
    assert lib.needle_cuda_delta_work_bytes(-1) == -1
    assert lib.needle_cuda_delta_work_bytes(0) == 0
    assert lib.needle_cuda_delta_work_bytes(2049) == 8 + 16  # two tiles: counts, then offsets
    err = ctypes.create_string_buffer(ERR_LEN)
    assert lib.needle_cuda_delta_count(1, 1, 10, 3, 1, 64, 0, 0, err, ERR_LEN) == -1
    assert "elements of 2 or 4 bytes" in err.value.decode()
    assert lib.needle_cuda_delta_count(1, 1, 4096, 2, 1, 8, 0, 0, err, ERR_LEN) == -1
    assert "needle_cuda_delta_work_bytes(n) = 24 bytes" in err.value.decode()
    assert lib.needle_cuda_delta_write(1, 1, 10, 2, 1, 64, 1, 5, 1, 0, 0, err, ERR_LEN) == -1
    assert "idx_size=5" in err.value.decode()
    assert lib.needle_cuda_delta_count(0, 0, 0, 2, 0, 0, 0, 0, err, ERR_LEN) == 0  # nothing to do


def test_cuda_without_gpu():
    """Where no NVIDIA driver is installed, a CUDA call fails saying so, and the CPU path works on."""
    if os.path.exists("/proc/driver/nvidia"):
        pytest.skip("an NVIDIA driver is present; this test covers machines without one")
    rc, msg = _cuda_logprob_f32()
    assert rc == -1 and msg.startswith("no CUDA device: cannot load the CUDA driver: "), msg
    lp = nt.logprobs_from_logits(np.zeros((1, 4), np.float32), np.zeros(1, np.int64))
    assert abs(lp[0] + np.log(4)) < 1e-6


# Run in a child process (libneedle opens the driver once per process) against the emulated driver:
# the entry points with host arrays as "device" memory, compared with the CPU path.
EMULATED = """
import ctypes, sys
import numpy as np
import needle_trainer as nt
from needle_trainer._native import ERR_LEN, lib
sys.path.insert(0, "tests")
from conftest import assert_close, bf16_bits
err = ctypes.create_string_buffer(ERR_LEN)
rng = np.random.default_rng(4)
n, v = 6, 1001
x = rng.normal(0, 3, (n, v)).astype(np.float32)
labels = rng.integers(0, v, n)
labels[1] = -100
for code, arr, bits in (("f32", x, None), ("f16", x.astype(np.float16).view(np.uint16), "float16"),
                        ("bf16", bf16_bits(x)[0], "bfloat16")):
    lp, ent, lse = (np.full(n, 7.0, np.float32) for _ in range(3))
    rc = getattr(lib, "needle_cuda_logprob_" + code)(arr.ctypes.data, n, v, labels.ctypes.data, 0.8, -100, lp.ctypes.data,
                                                     ent.ctypes.data, 0, 0, 0, err, ERR_LEN)
    assert rc == 0, err.value.decode()
    want_lp, want_ent = nt.logprobs_from_logits(arr, labels, temperature=0.8, return_entropy=True, bits=bits)
    assert_close(lp, want_lp, 1e-5, code + " logprob")
    assert_close(ent, want_ent, 1e-5, code + " entropy")
    assert (lse == 7.0).all()  # out_lse 0: not written
for dtype, size in ((np.uint16, 2), (np.uint32, 4)):
    for count in (1, 2047, 2049, 10007):
        old = rng.integers(0, 1 << 15, count).astype(dtype)
        new = old.copy()
        new[::97] += 1
        wb = lib.needle_cuda_delta_work_bytes(count)
        work = np.zeros(wb, np.uint8)
        nnz = lib.needle_cuda_delta_count(old.ctypes.data, new.ctypes.data, count, size, work.ctypes.data, wb, 0, 0, err, ERR_LEN)
        assert nnz >= 0, err.value.decode()
        idx, vals = np.empty(nnz, np.uint32), np.empty(nnz, dtype)
        rc = lib.needle_cuda_delta_write(old.ctypes.data, new.ctypes.data, count, size, work.ctypes.data, wb,
                                         idx.ctypes.data, 4, vals.ctypes.data, 0, 0, err, ERR_LEN)
        assert rc == 0, err.value.decode()
        want = nt.delta_encode(old, new)
        assert np.array_equal(idx, want.indices) and np.array_equal(vals, want.values), (size, count)
rc = lib.needle_cuda_logprob_f32(x.ctypes.data, n, v, labels.ctypes.data, 1.0, -100, x.ctypes.data, 0, 0, 1, 0, err, ERR_LEN)
assert rc == -1 and err.value.decode() == "no CUDA device: device 1 requested, 1 present", err.value
print("emulated: ok")
"""


def emulated(**env):
    driver = os.path.join(os.path.dirname(PATH), "testkit", "cudaemu", "libcudaemu_driver.so")
    if not os.path.exists(driver):
        if os.environ.get("NEEDLE_STRICT") == "1":
            pytest.fail(f"the emulated CUDA driver {driver} is missing; `make native` builds it")
        pytest.skip(f"the emulated CUDA driver {driver} is missing; `make native` builds it")
    return subprocess.run([sys.executable, "-c", EMULATED], capture_output=True, text=True, timeout=600,
                          cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          env=dict(os.environ, NEEDLE_CUDA_LIB=driver, PYTHONPATH=".", **env))


def test_cuda_emulated_driver_without_gpu():
    """The entry points against the emulated driver: fatbin, then the PTX fallback when the
    driver refuses the fatbin; a refused PTX's error carries the JIT log."""
    for env in ({}, {"CUDAEMU_REFUSE": "fatbin"}):
        p = emulated(**env)
        assert p.returncode == 0 and "emulated: ok" in p.stdout, (env, p.stdout, p.stderr)
    p = emulated(CUDAEMU_REFUSE="ptx", NEEDLE_CUDA_IMAGE="ptx")
    assert p.returncode != 0 and "logprob_sm80.ptx: cuda load module: a PTX JIT compilation failed (CUDA error 218); " \
        "JIT error log: \"ptxas application ptx input, line 1; fatal: cudaemu refuses (CUDAEMU_REFUSE=ptx)\\nptxas fatal   : " \
        "Ptx assembly aborted due to \\\"errors\\\"\"; JIT info log: \"\"" in p.stderr, p.stderr
