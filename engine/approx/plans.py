"""Plans for `engine.approx.assembly.assemble`: edit a prompt in place from an earlier one's K/V, or splice pieces.

A plan is built from one label per prompt token: the (snapshot, row) its K/V is taken from, or None
(compute it). Consecutive tokens whose rows are consecutive in one snapshot form one `Reuse` run; the
last token is always computed (its logits are the answer).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence

from engine.approx.assembly import Compute, Reuse, Segment
from engine.approx.snapshot import Snapshot

Label = tuple[Snapshot, int] | None
Part = Sequence[int] | tuple[Snapshot, int, int]  # fresh tokens, or rows [start, end) of a snapshot
MIN_RUN = 4  # edit plans reuse only matched runs at least this long: shorter matches are coincidences


def segments(labels: list[Label]) -> list[Segment]:
    """Group per-token labels into runs; the last token is computed whatever its label says."""
    labels = [*labels[:-1], None]
    plan: list[Segment] = []
    for label in labels:
        last = plan[-1] if plan else None
        if label is None and isinstance(last, Compute):
            plan[-1] = Compute(last.length + 1)
        elif label is None:
            plan.append(Compute(1))
        elif isinstance(last, Reuse) and last.source is label[0] and last.end == label[1]:
            plan[-1] = Reuse(last.source, last.start, last.end + 1)
        else:
            plan.append(Reuse(label[0], label[1], label[1] + 1))
    return plan


def plan_edit(source: Snapshot, token_ids: Sequence[int], recompute_after: int = 0) -> list[Segment]:
    """Edit in place: reuse every run of `source` that matches the prompt (difflib; at least MIN_RUN tokens),
    relocated where an edit changed the length before it; compute the changed spans and the first
    `recompute_after` tokens after each. With the prompt equal to the source, all but the last token is reused."""
    labels: list[Label] = [None] * len(token_ids)
    matcher = difflib.SequenceMatcher(None, source.token_ids, list(token_ids), autojunk=False)
    for i, j, n in matcher.get_matching_blocks():
        if n >= MIN_RUN:
            labels[j : j + n] = [(source, i + k) for k in range(n)]
    ends = [p for p in range(1, len(labels)) if labels[p - 1] is None and labels[p] is not None]
    for p in ends:  # the W tokens after each edited span are recomputed too
        labels[p : p + recompute_after] = [None] * len(labels[p : p + recompute_after])
    return segments(labels)


def plan_splice(parts: Sequence[Part], recompute: float = 0.0) -> tuple[list[int], list[Segment]]:
    """The prompt that concatenates `parts` and its plan: snapshot rows reused (relocated to where they land),
    fresh tokens computed. `recompute` > 0 recomputes the first ceil(recompute x length) tokens of every
    reused run but a leading one that starts at row 0 of its snapshot (that one is an exact prefix)."""
    ids: list[int] = []
    labels: list[Label] = []
    for part in parts:
        if isinstance(part, tuple):
            snap, start, end = part
            ids += snap.token_ids[start:end]
            labels += [(snap, i) for i in range(start, end)]
        else:
            ids += list(part)
            labels += [None] * len(part)
    plan = segments(labels)
    if recompute <= 0:
        return ids, plan
    repaired: list[Segment] = []
    for k, seg in enumerate(plan):
        if not isinstance(seg, Reuse) or (k == 0 and seg.start == 0):
            repaired.append(seg)
            continue
        head = min(math.ceil(recompute * len(seg)), len(seg))
        repaired += [Compute(head)] + (
            [Reuse(seg.source, seg.start + head, seg.end)] if head < len(seg) else []
        )
    return ids, merge_computes(repaired)


def merge_computes(plan: Sequence[Segment]) -> list[Segment]:
    """Adjacent Compute runs joined into one (one forward instead of two)."""
    out: list[Segment] = []
    for seg in plan:
        if isinstance(seg, Compute) and out and isinstance(out[-1], Compute):
            out[-1] = Compute(out[-1].length + seg.length)
        else:
            out.append(seg)
    return out


def plan_prefix(source: Snapshot, token_ids: Sequence[int]) -> list[Segment]:
    """Exact reuse only, as a prefix cache does (at token rather than block granularity): the longest common
    prefix of the snapshot and the prompt is reused, everything after it computed."""
    n = min(len(source.token_ids), len(token_ids) - 1)
    common = next((i for i in range(n) if source.token_ids[i] != token_ids[i]), n)
    return segments([(source, i) for i in range(common)] + [None] * (len(token_ids) - common))
