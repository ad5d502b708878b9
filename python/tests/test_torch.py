"""torch tensors: parity with torch's own log_softmax (verl's path), in-place deltas, and the
device errors. Skipped where torch does not import: the project venv has no torch (why, and the
last run by hand with it: docs/testing.md)."""
import numpy as np
import pytest

import needle_trainer as nt

torch = pytest.importorskip("torch", reason="torch is not installed in this venv (not in tools/requirements.txt)")
F = torch.nn.functional


def verl_reference(logits, labels, temperature):
    """verl's logprobs_from_logits / entropy_from_logits in float64 torch."""
    y = logits.double() / temperature
    lp = torch.gather(F.log_softmax(y, dim=-1), -1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    lp = torch.where(labels == -100, torch.zeros_like(lp), lp)
    p = F.softmax(y, dim=-1)
    ent = torch.logsumexp(y, dim=-1) - (p * y).sum(-1)
    return lp, ent


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("v", [1, 31, 1001, 4099])
def test_torch_parity(dtype, v):
    g = torch.Generator().manual_seed(v)
    logits = (torch.randn(2, 5, v, generator=g) * 3).to(dtype)
    labels = torch.randint(0, v, (2, 5), generator=g)
    labels[0, ::2] = -100
    lp, ent = nt.logprobs_from_logits(logits, labels, temperature=0.8, return_entropy=True)
    assert isinstance(lp, torch.Tensor) and lp.dtype == torch.float32 and lp.shape == (2, 5)
    want_lp, want_ent = verl_reference(logits, labels, 0.8)
    torch.testing.assert_close(lp.double(), want_lp, rtol=2e-5, atol=2e-5)
    torch.testing.assert_close(ent.double(), want_ent, rtol=2e-5, atol=2e-5)


def test_torch_inputs_in_place_and_grad():
    logits = torch.randn(4, 50, requires_grad=True)
    labels = torch.randint(0, 50, (4,), dtype=torch.int32)
    lp = nt.logprobs_from_logits(logits[:, :40], labels.clamp(max=39))  # non-contiguous view
    want, _ = verl_reference(logits.detach()[:, :40], labels.clamp(max=39).long(), 1.0)
    torch.testing.assert_close(lp.double(), want, rtol=2e-5, atol=2e-5)
    hidden, w = torch.randn(3, 16, dtype=torch.bfloat16), torch.randn(70, 16, dtype=torch.bfloat16)
    lab = torch.randint(0, 70, (3,))
    got = nt.linear_logprobs(hidden, w, lab)
    want, _ = verl_reference(hidden.double() @ w.double().T, lab, 1.0)
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)


def test_torch_delta_in_place():
    old = torch.randn(1000, 33).to(torch.bfloat16)
    new = old.clone()
    new[3, 4] += 1
    new[999, 32] = -new[999, 32]
    d = nt.delta_encode(old, new)
    assert d.indices.tolist() == [3 * 33 + 4, 999 * 33 + 32]
    base = old.clone()
    nt.delta_apply({"w": base}, {"w": d})
    assert torch.equal(base.view(torch.int16), new.view(torch.int16))
    with pytest.raises(ValueError, match="dtype"):
        nt.delta_encode(old, new.to(torch.float16))


def test_device_errors():
    logits, labels = torch.randn(2, 8), torch.zeros(2, dtype=torch.long)
    with pytest.raises(ValueError, match="labels is on meta but logits is on cpu"):
        nt.logprobs_from_logits(logits, labels.to("meta"))
    with pytest.raises(TypeError, match="labels"):
        nt.logprobs_from_logits(logits, labels.float())
    with pytest.raises(TypeError, match="logits"):
        nt.logprobs_from_logits(logits.double(), labels)
    with pytest.raises(ValueError, match="logits is on meta: needle_trainer runs on CPU and CUDA tensors"):
        nt.logprobs_from_logits(logits.to("meta"), labels.to("meta"))
