"""Approximate K/V reuse, opt-in and labelled: relocate cached rows to new positions, splice pieces of
other prompts into one, edit a span in place and keep the rest.

A prompt is assembled in a private contiguous window (`KVWindow`) that the block manager never sees:
nothing approximate is ever written to the pool, so nothing approximate can be served as an exact
prefix-cache hit. A plan says, run by run, where the prompt's rows come from: `Reuse` rows of a
`Snapshot` (the K/V an earlier prompt computed from position 0), rotated to their new positions, or
`Compute` them now, attending to every row before them.

Exactness: a reused row is exact (counted as cached) only while every row before it is exact, it sits at
the position it was computed at and the snapshot's tokens up to it equal the prompt's (the same prefix,
hence the same K/V). Every other reused row is approximate: relocated (moved by a position delta) or stale
(same position, changed context). Relocation is exact for layer 0 only, whose keys depend on the token
and its position alone; values carry no position and are copied as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.approx.snapshot import Snapshot
from engine.devices import now
from engine.errors import KVPlanError
from engine.kv.window import KVWindow
from engine.runtime.engine import Engine
from engine.runtime.outputs import Generation


@dataclass(frozen=True)
class Reuse:
    """Rows [start, end) of `source`, placed at the plan's current position (relocated by the difference)."""

    source: Snapshot
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Compute:
    """The next `length` tokens, computed at their positions over every row before them."""

    length: int

    def __len__(self) -> int:
        return self.length


Segment = Reuse | Compute


@dataclass
class Assembly:
    """A prompt's K/V in a private window, the last token's logits, and where its rows came from."""

    token_ids: list[int]
    window: KVWindow
    logits: torch.Tensor  # float32 [vocab] of the last prompt token
    cached_tokens: int  # exact reuse (same prefix, same positions)
    relocated_tokens: int  # approximate: reused at another position than they were computed at
    stale_tokens: int  # approximate: reused at their position, after a changed context
    computed_tokens: int

    @property
    def approximate_tokens(self) -> int:
        return self.relocated_tokens + self.stale_tokens


def check_plan(token_ids: Sequence[int], plan: Sequence[Segment]) -> None:
    """Refuse a plan that does not cover the prompt exactly, reuses rows of other tokens, or leaves the last
    token uncomputed (its logits are the answer)."""
    if sum(len(s) for s in plan) != len(token_ids):
        raise KVPlanError(
            f"the plan covers {sum(len(s) for s in plan)} tokens, the prompt has {len(token_ids)}"
        )
    if not plan or not isinstance(plan[-1], Compute) or len(plan[-1]) < 1:
        raise KVPlanError("the plan must end by computing at least the prompt's last token")
    pos = 0
    for seg in plan:
        if isinstance(seg, Reuse):
            if not 0 <= seg.start < seg.end <= len(seg.source.token_ids):
                raise KVPlanError(
                    f"rows [{seg.start}, {seg.end}) are outside a {len(seg.source.token_ids)}-row snapshot"
                )
            if seg.source.token_ids[seg.start : seg.end] != tuple(token_ids[pos : pos + len(seg)]):
                raise KVPlanError(
                    f"reused rows [{seg.start}, {seg.end}) hold other tokens than prompt positions "
                    f"[{pos}, {pos + len(seg)})"
                )
        elif seg.length < 1:
            raise KVPlanError("a Compute segment needs at least one token")
        pos += len(seg)


def assemble(
    engine: Engine, token_ids: Sequence[int], plan: Sequence[Segment], capacity: int = 0
) -> Assembly:
    """Fill a private window with the prompt's K/V as `plan` says (room for `capacity` rows): the reused runs
    are copied in (rotated to their positions), then every computed run in ONE forward, each computed token
    attending by position to every row before it, reused or computed (as CacheBlend does): exact for what it
    computes, and one read of the weights however many runs the plan has."""
    ids = list(token_ids)
    check_plan(ids, plan)
    window = KVWindow.like(engine.kv, max(capacity, len(ids)))
    counts = {"cached": 0, "relocated": 0, "stale": 0, "computed": 0}
    pos, exact, computed = 0, True, []
    for seg in plan:
        n = len(seg)
        if isinstance(seg, Reuse):
            delta = pos - seg.start
            exact = exact and delta == 0 and seg.source.token_ids[: seg.end] == tuple(ids[: pos + n])
            counts["cached" if exact else "relocated" if delta else "stale"] += n
            window.k[:, :, pos : pos + n] = engine.model.rope.shift(
                seg.source.k[:, :, seg.start : seg.end], delta
            )
            window.v[:, :, pos : pos + n] = seg.source.v[:, :, seg.start : seg.end]
        else:
            computed += range(pos, pos + n)
            counts["computed"] += n
        pos += n
    if computed == list(range(computed[0], len(ids))):  # one run at the end: the exact path's kernels
        logits = engine.runner.compute(ids[computed[0] :], window, start=computed[0])
    else:
        positions = torch.tensor(computed, dtype=torch.long)
        logits = engine.runner.compute([ids[p] for p in computed], window, positions=positions)
    return Assembly(
        ids, window, logits, counts["cached"], counts["relocated"], counts["stale"], counts["computed"]
    )


def decode_greedy(
    engine: Engine, a: Assembly, max_new_tokens: int
) -> tuple[list[int], list[torch.Tensor], str]:
    """Greedy tokens from an assembled prompt (the first from its logits), decoded by the engine's step loop
    in the assembly's window (which needs room for the new rows, and is never part of the pool); also every
    step's logits and the finish reason ("stop" at EOS)."""
    rid = engine.add_prefilled(
        a.token_ids, a.window, a.logits, max_new_tokens, a.cached_tokens, a.approximate_tokens
    )
    gen = engine.run_to_end(rid)
    assert gen.logits is not None
    return gen.token_ids, list(gen.logits), gen.finish_reason


def generate(
    engine: Engine, token_ids: Sequence[int], plan: Sequence[Segment], max_new_tokens: int = 16
) -> Generation:
    """Greedy generation over a prompt assembled by `plan`, decoded by the engine's step loop in the same
    private window. TTFT runs from the start of the assembly to the first token (its logits' argmax);
    `usage.approximate_tokens` counts the relocated and stale rows; `logits` holds every step's logits."""
    ids = list(token_ids)
    engine.check_context(len(ids), max_new_tokens)
    t0 = now(engine.device)
    a = assemble(engine, ids, plan, capacity=len(ids) + max_new_tokens)
    rid = engine.add_prefilled(
        ids, a.window, a.logits, max_new_tokens, a.cached_tokens, a.approximate_tokens, arrival=t0
    )
    return engine.run_to_end(rid)
