"""A hash-id trace replayed through the engine's `BlockManager`, for the hit rate against capacity and
eviction policy (`--pressure`) when the trace has no text.

Each hash id stands for one block of the trace (512 tokens in Mooncake's): the manager runs with one
"token" per block, so its chained hashes run over the ids and its capacity is counted in the trace's
blocks. Per request, as the engine serves one: the cached full blocks of the prompt are matched (never the
block holding the last prompt token: it is recomputed), blocks are taken for the prompt and the output
(evicting as the policy says), the prompt's full blocks are published, then everything is released. The
output's blocks are not published: the trace does not say what the next prompt's ids for them are (its
next request names them if they recur). Requests are served one at a time, in the trace's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tqdm import tqdm

from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.traces.mooncake import HashRequest, HashTrace
from engine.traces.pressure import POLICIES, PressurePoint

NAMESPACE = b"hash-ids"


@dataclass(frozen=True)
class HashServed:
    cached_tokens: int  # prompt tokens served from cache
    evictions: int  # blocks evicted while serving it


def blocks_needed(req: HashRequest, block: int) -> int:
    return -(-(req.input_length + req.output_length) // block)


def serve(blocks: BlockManager, req: HashRequest, block: int) -> HashServed:
    """One request through the manager (see the module docstring)."""
    before = blocks.stats.evictions
    seq = SequenceState(list(req.hash_ids))
    need = max(blocks_needed(req, block), len(req.hash_ids))
    blocks.admit(seq)
    try:
        blocks.grow(seq, need)
        seq.num_kv = req.input_length // block  # the full blocks of the prompt
        blocks.publish(seq)
    finally:
        blocks.release(seq)
    return HashServed(seq.num_cached * block, blocks.stats.evictions - before)


def replay(
    trace: HashTrace, capacity_blocks: int, manager: type[BlockManager] = BlockManager
) -> list[HashServed]:
    blocks = manager(capacity_blocks, 1, NAMESPACE)
    return [serve(blocks, r, trace.block_size) for r in trace.requests]


def capacities(trace: HashTrace, top_tokens: int | None, points: int = 8) -> list[int]:
    """Cache sizes in tokens, geometrically spaced, from what the largest request needs to `top_tokens`
    (default: every distinct block of the trace plus the largest request: nothing evicted)."""
    block = trace.block_size
    need = max(max(blocks_needed(r, block), len(r.hash_ids)) for r in trace.requests)
    distinct = len({h for r in trace.requests for h in r.hash_ids})
    most = max(-(-top_tokens // block) if top_tokens is not None else distinct + need, need)
    sizes = {round(need * (most / need) ** (k / max(points - 1, 1))) for k in range(points)}
    return [b * block for b in sorted(sizes)]


def sweep(trace: HashTrace, sizes: Sequence[int]) -> list[PressurePoint]:
    """The trace at every cache size with every eviction policy."""
    prompt = sum(r.input_length for r in trace.requests)
    out = []
    for size in tqdm(sizes, desc="pressure", unit="size", leave=False):
        for name, manager in POLICIES.items():
            served = replay(trace, size // trace.block_size, manager)
            cached = sum(s.cached_tokens for s in served)
            out.append(PressurePoint(name, size, cached / prompt, sum(s.evictions for s in served)))
    return out
