"""logprobs_from_logits and linear_logprobs against verl's definitions (conftest.reference)."""
import numpy as np
import pytest
from conftest import assert_close, bf16_bits, reference

import needle_trainer as nt


def logits_of(dtype, x32):
    """(array handed to needle, extra kwargs, float values it holds) for one dtype."""
    if dtype == "bf16":
        bits, vals = bf16_bits(x32)
        return bits, {"bits": "bfloat16"}, vals
    if dtype == "f16":
        h = x32.astype(np.float16)
        return h, {}, h.astype(np.float32)
    return x32, {}, x32


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("n,v", [(0, 5), (1, 1), (1, 7), (5, 33), (3, 1000), (4, 1001), (2, 4099)])
@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.5])
def test_parity(rng, dtype, n, v, temperature):
    x = (rng.standard_normal((n, v)) * 4).astype(np.float32)
    labels = rng.integers(0, v, n)
    labels[::3] = -100
    arr, kw, vals = logits_of(dtype, x)
    lp, ent = nt.logprobs_from_logits(arr, labels, temperature=temperature, return_entropy=True, **kw)
    want_lp, want_ent = reference(vals, labels, temperature)
    assert lp.dtype == np.float32 and lp.shape == (n,)
    assert_close(lp, want_lp, what="logprob")
    assert_close(ent, want_ent, what="entropy")
    assert (lp[labels == -100] == 0).all()


def test_batch_shape_threads_and_custom_ignore(rng):
    x = rng.standard_normal((3, 5, 257)).astype(np.float32)
    labels = rng.integers(0, 257, (3, 5))
    labels[1, 2] = 7  # ignored below
    lp = nt.logprobs_from_logits(x, labels, ignore_index=7, threads=3)
    want, _ = reference(x, labels, ignore_index=7)
    assert lp.shape == (3, 5)
    assert_close(lp, want)
    assert lp[1, 2] == 0


def test_non_contiguous_logits_are_copied(rng):
    x = rng.standard_normal((6, 100)).astype(np.float32)
    labels = rng.integers(0, 50, 3)
    assert_close(nt.logprobs_from_logits(x[::2, :50], labels), reference(x[::2, :50], labels)[0])


def test_inf_and_nan_logits():
    ninf, inf, nan = -np.inf, np.inf, np.nan
    x = np.array([[0.0, ninf, 1.0, 2.0],    # -inf contributes nothing
                  [0.0, ninf, 1.0, 2.0],    # label on the -inf entry: -inf
                  [0.0, inf, 1.0, 2.0],     # +inf: NaN row, as log_softmax
                  [0.0, nan, 1.0, 2.0],     # NaN: NaN row
                  [0.0, nan, 1.0, 2.0],     # NaN row, ignored label: logprob 0
                  [3.0, 1.0, 1.0, 2.0]], np.float32)
    labels = np.array([2, 1, 0, 0, -100, 0])
    for dtype in ("f32", "f16", "bf16"):
        arr, kw, vals = logits_of(dtype, x) if dtype != "bf16" else (
            (x.view(np.uint32) >> 16).astype(np.uint16), {"bits": "bfloat16"}, x)
        lp, ent = nt.logprobs_from_logits(arr, labels, return_entropy=True, **kw)
        want_lp, want_ent = reference(vals, labels)
        assert_close(lp, want_lp, what=f"{dtype} logprob")
        assert lp[1] == -np.inf and np.isnan(lp[2]) and np.isnan(lp[3]) and lp[4] == 0
        assert_close(ent[[0, 1, 5]], want_ent[[0, 1, 5]], what=f"{dtype} entropy")
        assert np.isnan(ent[[2, 3, 4]]).all()


@pytest.mark.parametrize("scale", [1.0, 30.0, 1e4, 3e38])
def test_finite_input_never_gives_positive_logprob(rng, scale):
    """verl #2656: a dominant label logit must give logprob <= 0, never a rounding-positive one."""
    n, v = 64, 1031
    x = np.clip(rng.standard_normal((n, v)) * scale, -3.4e38, 3.4e38).astype(np.float32)
    labels = rng.integers(0, v, n)
    x[np.arange(n), labels] = np.float32(scale) * 2 if scale < 1e38 else np.float32(3.4e38)
    x[:8] = np.float32(-scale)  # rows of equal logits
    # Temperatures below 1 would overflow the largest logits to inf (a NaN row, as documented).
    for t in (1.0, 0.3, 2.0) if scale < 1e37 else (1.0, 2.0):
        lp = nt.logprobs_from_logits(x, labels, temperature=t)
        assert np.isfinite(lp).all() and (lp <= 0).all(), lp.max()
    one = nt.logprobs_from_logits(np.full((3, 1), 5.0, np.float32), np.zeros(3, np.int64))
    assert (one == 0).all()


@pytest.mark.parametrize("n,h,v", [(0, 8, 10), (1, 16, 1), (7, 32, 1001), (300, 24, 5003)])
def test_linear_parity(rng, n, h, v):
    hidden = rng.standard_normal((n, h)).astype(np.float32)
    w = (rng.standard_normal((v, h)) / np.sqrt(h)).astype(np.float32)
    labels = rng.integers(0, v, n)
    labels[::4] = -100
    lp, ent = nt.linear_logprobs(hidden, w, labels, temperature=0.9, return_entropy=True)
    want_lp, want_ent = reference(hidden.astype(np.float64) @ w.astype(np.float64).T, labels, 0.9)
    assert_close(lp, want_lp, tol=1e-4, what="linear logprob")
    assert_close(ent, want_ent, tol=1e-4, what="linear entropy")


def test_linear_fp16_inputs_and_batch_shape(rng):
    hidden = rng.standard_normal((2, 3, 16)).astype(np.float16)
    w = (rng.standard_normal((77, 16)) / 4).astype(np.float16)
    labels = rng.integers(0, 77, (2, 3))
    lp = nt.linear_logprobs(hidden, w, labels)
    want, _ = reference(hidden.astype(np.float64) @ w.astype(np.float64).T, labels)
    assert lp.shape == (2, 3)
    assert_close(lp, want, tol=1e-4)


@pytest.mark.parametrize("call,exc,needle", [
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.int32), np.zeros(2, np.int64)), TypeError, "logits"),
    (lambda: nt.logprobs_from_logits([[0.0, 1.0]], np.zeros(1, np.int64)), TypeError, "logits"),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.uint16), np.zeros(2, np.int64)), TypeError, "bits="),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.uint16), np.zeros(2, np.int64), bits="x"), ValueError, "bits="),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.float32), np.zeros(2)), TypeError, "labels"),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.float32), np.zeros(3, np.int64)), ValueError, "labels"),
    (lambda: nt.logprobs_from_logits(np.zeros(3, np.float32), np.zeros(3, np.int64)), ValueError, "labels"),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.float32), np.array([0, 3])), ValueError, "labels[1] = 3"),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.float32), np.zeros(2, np.int64), temperature=0), ValueError, "temperature"),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.float32), np.zeros(2, np.int64), temperature="hot"), TypeError, "temperature"),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 0), np.float32), np.zeros(2, np.int64)), ValueError, "shape"),
    (lambda: nt.logprobs_from_logits(np.zeros((2, 3), np.float32), np.zeros(2, np.int64), ignore_index=1 << 70), ValueError, "ignore_index"),
    (lambda: nt.linear_logprobs(np.zeros((2, 4), np.float32), np.zeros((5, 3), np.float32), np.zeros(2, np.int64)), ValueError, "hidden"),
    (lambda: nt.linear_logprobs(np.zeros((2, 4), np.float32), np.zeros(20, np.float32), np.zeros(2, np.int64)), ValueError, "weight"),
    (lambda: nt.linear_logprobs(np.zeros((2, 4), np.float32), np.zeros((5, 4), np.int8), np.zeros(2, np.int64)), TypeError, "weight"),
    (lambda: nt.linear_logprobs(np.zeros((2, 4), np.float32), np.zeros((5, 4), np.float32), np.zeros(3, np.int64)), ValueError, "labels"),
])
def test_bad_input_names_the_argument(call, exc, needle):
    with pytest.raises(exc, match=None) as e:
        call()
    assert needle in str(e.value), str(e.value)
