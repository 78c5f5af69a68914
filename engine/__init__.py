"""kvtestbed: a from-scratch prefill/decode engine with an observable block-hashed prefix KV cache.

Module map (dependencies point down this list only; docs/architecture.md has the whole picture):
- `machine_load` (the load averages when a command started), `openmp` (how torch's CPU threads wait, set before torch loads), `errors`, `arguments`, `devices`: typed one-line errors, argument checks, devices and timing;
- `model/` the model math, `kv/` KV storage and the prefix cache, `loading/` weights and tokenizers,
  `prompts/` messages, chat templates and prompt regions;
- `inspect/` attention maps, sinks and FLOPs (over the model);
- `runtime/` the `Engine` (a request's lifecycle), its `ModelRunner` (the forward loops), outputs, `load()`;
- `approx/` approximate K/V, opt-in; `traces/` agent traces and hosted cache rules;
- `bench/`, `viz/`, `generate` (with `cli`): the command lines.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from engine import machine_load  # noqa: F401  (the load averages when the command started, before its start-up)
from engine.openmp import wait_passively

wait_passively()  # before anything imports torch: libgomp reads its wait policy once, at load

if TYPE_CHECKING:
    from engine.errors import EngineError
    from engine.runtime.engine import Engine
    from engine.runtime.loader import load
    from engine.runtime.outputs import Generation, Timing, Usage

# the public names, imported on first use: `import engine` and every command's --help load no torch
_PUBLIC = {
    "Engine": "engine.runtime.engine",
    "EngineError": "engine.errors",
    "Generation": "engine.runtime.outputs",
    "Timing": "engine.runtime.outputs",
    "Usage": "engine.runtime.outputs",
    "load": "engine.runtime.loader",
}
__all__ = ["Engine", "EngineError", "Generation", "Timing", "Usage", "load"]


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_PUBLIC[name]), name)
