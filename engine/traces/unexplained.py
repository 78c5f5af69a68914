"""Cache activity a trace's own requests cannot explain, from the usage providers recorded.

- An unexplained read: a request read more than any earlier recorded request of the trace (the same model,
  its entries still live) could have left in the cache: what such a request left is what it read plus what
  it wrote where the provider reports writes (Anthropic), else its prompt as the provider stores it
  (`engine.traces.providers.recorded.held`); live means within the provider's retention of that request
  (Anthropic's TTL, OpenAI's hour at the most; none documented: always). Other calls wrote the rest: the parent agent or sibling subagents of a Claude
  Code session, another run of the same task, the parts of the prompt the trace does not hold.
- An unread write: tokens a request wrote (Anthropic's `cache_creation_input_tokens`) that no later request
  of the trace read while they were live (no later read reached past what the request had read before
  writing). Paid for at the write price and never used, as far as the trace shows.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from engine.traces.providers import recorded
from engine.traces.request import FIVE_MINUTES, ONE_HOUR
from engine.traces.usage import RecordedUsage


@dataclass(frozen=True)
class Unexplained:
    read_tokens: int  # read beyond what earlier requests of the trace could have left
    unread_write_tokens: int  # written and never read again within the entries' life


def _life_s(usage: RecordedUsage) -> float | None:
    """How long what a request left may stay live, at the most (None: no retention documented): Anthropic's
    TTL of what it wrote, OpenAI's hour (in-memory entries are always cleared within one)."""
    if usage.provider == "anthropic":
        return ONE_HOUR if (usage.cache_write_1h_tokens or 0) > 0 else FIVE_MINUTES
    return ONE_HOUR if usage.provider == "openai" else None


def unexplained(usages: Sequence[RecordedUsage | None], times: Sequence[float]) -> list[Unexplained | None]:
    """Per request (in the order sent, with its time), None where it has no recorded reads. Each model's
    requests are one cache: O(n log n) in the requests."""
    out: list[Unexplained | None] = [None] * len(usages)
    models: dict[str | None, list[int]] = {}
    for i, usage in enumerate(usages):
        if usage is not None and usage.cache_read_tokens is not None:
            models.setdefault(usage.model, []).append(i)
    for group in models.values():
        group.sort(key=lambda i: times[i])
        reads = [usages[i].cache_read_tokens or 0 for i in group]
        stamps = [times[i] for i in group]
        later = _RangeMax(reads)
        left: list[tuple[int, float]] = []  # (-held, until) of earlier requests: a heap, the most held on top
        for k, i in enumerate(group):
            usage, now = usages[i], times[i]
            while left and left[0][1] < now:  # what expired before this request can explain nothing
                heapq.heappop(left)
            could = -left[0][0] if left else 0
            life = _life_s(usage)
            until = now + life if life is not None else math.inf
            top, wrote = (
                usage.cache_read_tokens + (usage.cache_write_tokens or 0),
                usage.cache_write_tokens or 0,
            )
            last = bisect.bisect_right(stamps, until) if wrote else k + 1
            reached = later.max(k + 1, last)
            unread = top - max(usage.cache_read_tokens, min(top, reached)) if wrote else 0
            out[i] = Unexplained(max(0, usage.cache_read_tokens - could), unread)
            heapq.heappush(left, (-recorded.held(usage), until))
    return out


class _RangeMax:
    """The largest of values[a:b], for any a <= b, in O(1) after O(n log n) (a sparse table)."""

    def __init__(self, values: Sequence[int]) -> None:
        self.levels = [list(values)]
        width = 1
        while 2 * width <= len(values):
            row = self.levels[-1]
            self.levels.append([max(row[i], row[i + width]) for i in range(len(row) - width)])
            width *= 2

    def max(self, a: int, b: int) -> int:
        if b <= a:
            return 0
        level = (b - a).bit_length() - 1
        row = self.levels[level]
        return max(row[a], row[b - (1 << level)])
