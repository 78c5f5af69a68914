"""kvtestbed: a from-scratch prefill/decode engine with an observable block-hashed prefix KV cache.

Module map (dependencies point down this list only; docs/architecture.md has the whole picture):
- `errors`, `arguments`, `devices`: typed one-line errors, argument checks, devices and timing;
- `model/` the model math, `kv/` KV storage and the prefix cache, `loading/` weights and tokenizers,
  `prompts/` messages, chat templates and prompt regions;
- `inspect/` attention maps, sinks and FLOPs (over the model);
- `runtime/` the `Engine` (a request's lifecycle), its `ModelRunner` (the forward loops), outputs, `load()`;
- `approx/` approximate K/V, opt-in; `traces/` agent traces and hosted cache rules;
- `bench/`, `viz/`, `generate` (with `cli`): the command lines.
"""

from engine.errors import EngineError
from engine.runtime.engine import Engine
from engine.runtime.loader import load
from engine.runtime.outputs import Generation, Timing, Usage

__all__ = ["Engine", "EngineError", "Generation", "Timing", "Usage", "load"]
