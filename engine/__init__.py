"""kvtestbed: a from-scratch prefill/decode engine with an observable block-hashed prefix KV cache."""

from engine.engine import Engine
from engine.errors import EngineError
from engine.loader import load
from engine.outputs import Generation, Timing, Usage

__all__ = ["Engine", "EngineError", "Generation", "Timing", "Usage", "load"]
