"""delta_encode / delta_apply: against NumPy's bitwise diff, for tensors, state dicts and
safetensors files (written and read back by the safetensors package)."""
import os

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import needle_trainer as nt


def pair(rng, n, dtype, frac):
    old = rng.standard_normal(n).astype(dtype)
    new = old.copy()
    bits = new.view(np.uint16 if new.itemsize == 2 else np.uint32)
    bits[rng.random(n) < frac] ^= 1
    return old, new


def numpy_delta(old, new):
    ob = old.reshape(-1).view(np.uint16 if old.itemsize == 2 else np.uint32)
    nb = new.reshape(-1).view(ob.dtype)
    idx = np.nonzero(ob != nb)[0]
    return idx, nb[idx]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint16])
@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 1000, 70001])
@pytest.mark.parametrize("frac", [0.0, 0.005, 0.02, 1.0])
def test_round_trip_matches_numpy(rng, dtype, n, frac):
    old, new = pair(rng, n, dtype, frac) if dtype != np.uint16 else (
        rng.integers(0, 1 << 16, n).astype(np.uint16), None)
    if new is None:
        new = old.copy()
        new[rng.random(n) < frac] ^= 1
    d = nt.delta_encode(old, new)
    want_idx, want_vals = numpy_delta(old, new)
    assert d.numel == n and d.indices.dtype == np.uint32
    assert np.array_equal(d.indices, want_idx) and np.array_equal(d.values, want_vals)
    base = old.copy()
    assert nt.delta_apply(base, d) is base
    assert base.tobytes() == new.tobytes()


def test_bits_not_values():
    old = np.array([0.0, np.nan, 1.0], np.float32)
    new = np.array([-0.0, np.nan, 1.0], np.float32)
    new.view(np.uint32)[1] = old.view(np.uint32)[1] ^ 2  # another NaN payload
    assert nt.delta_encode(old, new).indices.tolist() == [0, 1]


def test_multidimensional_and_state_dict(rng):
    old = {"a": rng.standard_normal((4, 33)).astype(np.float32),
           "b": rng.standard_normal((2, 3, 5)).astype(np.float16)}
    new = {k: v.copy() for k, v in old.items()}
    new["a"][1, 2] += 1
    new["b"][1, 1, 4] += 1
    deltas = nt.delta_encode(old, new)
    assert deltas["a"].indices.tolist() == [35]
    assert deltas["b"].indices.tolist() == [1 * 15 + 1 * 5 + 4]
    nt.delta_apply(old, deltas)
    for k in old:
        assert old[k].tobytes() == new[k].tobytes()


def test_safetensors_files(tmp_path, rng):
    old = {"w": rng.standard_normal((64, 130)).astype(np.float32),
           "h": rng.standard_normal(1001).astype(np.float16)}
    new = {"w": old["w"].copy(), "h": old["h"].copy()}
    new["w"][3, 7] *= 2
    new["h"][[0, 999]] += 1
    op, np_ = str(tmp_path / "old.safetensors"), tmp_path / "new.safetensors"
    save_file(old, op)
    save_file(new, str(np_))
    deltas = nt.delta_encode(op, np_)  # str and PathLike
    assert deltas["w"].indices.tolist() == [3 * 130 + 7]
    assert deltas["h"].indices.tolist() == [0, 999]
    nt.delta_apply(op, deltas)  # patches old.safetensors in place
    got = load_file(op)
    for k in new:
        assert got[k].tobytes() == new[k].tobytes(), k


def test_safetensors_dtype_or_shape_change_is_named(tmp_path, rng):
    a, b = str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")
    save_file({"x": np.zeros(4, np.float32), "y": np.zeros(3, np.float16)}, a)
    save_file({"x": np.zeros(4, np.float32), "y": np.zeros(4, np.float16)}, b)
    with pytest.raises(ValueError, match=r"new\['y'\]"):
        nt.delta_encode(a, b)
    save_file({"x": np.zeros(4, np.float32), "z": np.zeros(3, np.float16)}, b)
    with pytest.raises(KeyError, match=r"new\['z'\]"):
        nt.delta_encode(a, b)
    save_file({"x": np.zeros(4, np.int64)}, b)
    with pytest.raises(TypeError, match=r"\['x'\] has dtype I64 \(8-byte"):
        nt.delta_encode(b, b)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes((1 << 40).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="header length"):
        nt.delta_encode(str(bad), str(bad))


def test_bad_deltas_leave_base_untouched(rng):
    old, new = pair(rng, 1000, np.float16, 0.05)
    d = nt.delta_encode(old, new)
    base = old.copy()
    swapped = nt.Delta(d.numel, d.indices[::-1].copy(), d.values)
    with pytest.raises(ValueError, match="not greater"):
        nt.delta_apply(base, swapped)
    out_of_range = nt.Delta(d.numel, d.indices + 1000, d.values)
    with pytest.raises(ValueError, match="out of range"):
        nt.delta_apply(base, out_of_range)
    with pytest.raises(ValueError, match="1000 elements of 2 bytes"):
        nt.delta_apply(base[:999].copy(), d)
    with pytest.raises(ValueError, match="uint32/uint64"):
        nt.delta_apply(base, nt.Delta(d.numel, d.indices.astype(np.int64), d.values))
    with pytest.raises(KeyError, match="'q'"):
        nt.delta_apply({"p": base}, {"p": d, "q": d})
    assert base.tobytes() == old.tobytes()
    with pytest.raises(ValueError, match=r"\(1000,\).*\(999,\)"):
        nt.delta_encode(old[:999], new)
    with pytest.raises(TypeError, match="new"):
        nt.delta_encode(old, new.tolist())
    with pytest.raises(TypeError, match="8-byte"):
        nt.delta_encode(old.astype(np.float64), new.astype(np.float64))
    frozen = old.copy()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="base is read-only"):
        nt.delta_apply(frozen, d)
    with pytest.raises(ValueError, match="not contiguous"):
        nt.delta_apply(np.zeros(2000, np.float16)[::2], d)
