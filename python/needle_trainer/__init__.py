"""needle_trainer: needle's trainer-side tensor ops (token log-probs, weight deltas) for Python,
on the C kernels of libneedle.so (`make native`) through ctypes. NumPy arrays and torch CPU
tensors are used in place; torch CUDA tensors run needle's CUDA kernels on their device, on torch's
current stream (log-probs and delta encode; delta_apply of a CUDA tensor raises GPUNotBuiltError).
publish() hands a version of the weights to a `needle weights send` daemon (docs/weights.md)."""
from ._arrays import GPUNotBuiltError
from ._native import PATH as library_path
from ._native import simd_level
from .delta import Delta, delta_apply, delta_encode
from .logprob import linear_logprobs, logprobs_from_logits
from .weights import Publisher, publish

__all__ = ["Delta", "GPUNotBuiltError", "delta_apply", "delta_encode", "library_path",
           "linear_logprobs", "logprobs_from_logits", "Publisher", "publish", "simd_level"]
