"""Loads the trainers' own retrieval client modules from the wheels `make setup` unpacks into
CLIENTS_DIR (~/.cache/needle/clients), by file path: their code is run, never copied here."""
import importlib.util
import os
import sys
import types


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def verl(clients_dir):
    """verl 0.5.0's verl/tools/utils/search_r1_like_utils.py (needs only requests)."""
    return _load("search_r1_like_utils", os.path.join(clients_dir, "verl-0.5.0/verl/tools/utils/search_r1_like_utils.py"))


def rlinf(clients_dir):
    """RLinf 0.3.0's rlinf/agents/searchr1/search_tool_worker.py. Its imports of RLinf's worker
    framework and omegaconf are stubbed: AsyncSearchClient uses none of them."""
    for name, attrs in {"omegaconf": {"DictConfig": dict}, "rlinf": {}, "rlinf.data": {}, "rlinf.data.tool_call": {},
                        "rlinf.data.tool_call.tool_io_struct": {"ToolChannelRequest": object, "ToolChannelResponse": object},
                        "rlinf.scheduler": {"Channel": object}, "rlinf.workers": {}, "rlinf.workers.agent": {},
                        "rlinf.workers.agent.tool_worker": {"ToolWorker": object}}.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    return _load("search_tool_worker", os.path.join(clients_dir, "rlinf-0.3.0/rlinf/agents/searchr1/search_tool_worker.py"))
