"""Shared helpers: verl's definitions in NumPy float64, the oracle of the parity tests."""
import numpy as np
import pytest


def reference(logits, labels, temperature=1.0, ignore_index=-100):
    """(logprob, entropy) of verl's logprobs_from_logits (log_softmax + gather) and
    entropy_from_logits (lse - sum(softmax * y)) on y = logits / temperature, in float64,
    row-wise over the last axis. Ignored labels give logprob 0. A -inf logit has softmax 0 and
    adds 0 to the entropy sum (the limit; torch's 0 * -inf would give NaN there)."""
    y = np.asarray(logits, np.float64) / temperature
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        m = np.max(y, axis=-1, keepdims=True)
        z = np.exp(y - m)
        s = z.sum(axis=-1, keepdims=True)
        lse = m + np.log(s)
        p = z / s
        py = np.where(p == 0, 0.0, p * y)
        entropy = lse[..., 0] - py.sum(axis=-1)
        ignored = labels == ignore_index
        safe = np.where(ignored, 0, labels)
        picked = np.take_along_axis(y, safe[..., None], axis=-1)[..., 0]
        logprob = np.where(ignored, 0.0, picked - lse[..., 0])
    return logprob, entropy


def assert_close(got, want, tol=2e-5, what=""):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    same_special = (np.isnan(got) == np.isnan(want)).all() and (np.isinf(got) == np.isinf(want)).all()
    assert same_special, f"{what}: NaN/inf at different places:\n{got}\n{want}"
    fin = np.isfinite(want)
    assert (got[np.isinf(want)] == want[np.isinf(want)]).all(), f"{what}: inf signs differ"
    if fin.any():
        err = np.max(np.abs(got[fin] - want[fin]) / np.maximum(1.0, np.abs(want[fin])))
        assert err <= tol, f"{what}: max relative error {err:.3g} > {tol}"


def bf16_bits(x):
    """bf16 bit patterns (uint16) of float32 x, rounded to nearest even, and their values."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
