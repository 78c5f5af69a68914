"""Recorded reads the trace's own earlier requests could not have left, and writes no later request read
while they lived: flagged per request, in tokens."""

from __future__ import annotations

from engine.traces.unexplained import Unexplained, unexplained
from engine.traces.usage import RecordedUsage


def claude(read: int, write: int, fresh: int = 3, model: str = "claude-haiku-4-5") -> RecordedUsage:
    return RecordedUsage("anthropic", model, fresh + read + write, read, write, write, 0)


def test_reads_beyond_what_earlier_requests_left_and_writes_never_read() -> None:
    usages = [
        claude(12_000, 500),  # the first request reads a prefix other calls wrote: all unexplained
        claude(12_500, 800),  # explained by the first (12,000 read + 500 written)
        claude(14_000, 200),  # 700 beyond what the second left
        claude(0, 0, model="other"),  # another model: its own cache
        claude(13_300, 0),  # 10 minutes after the third: only the second and third's entries... expired
    ]
    got = unexplained([*usages, None], [0.0, 10.0, 20.0, 25.0, 620.0, 630.0])
    assert got[:3] == [Unexplained(12_000, 0), Unexplained(0, 0), Unexplained(700, 200)]
    assert got[3] == Unexplained(0, 0) and got[5] is None
    assert got[4] == Unexplained(13_300, 0)  # every earlier entry of its model outlived its 5 minutes


def test_a_write_read_only_in_part_counts_the_rest() -> None:
    got = unexplained([claude(1_000, 3_000), claude(2_500, 0)], [0.0, 60.0])
    assert got[0].unread_write_tokens == 1_500  # read up to 2,500 of the 4,000 it left
    late = unexplained([claude(1_000, 3_000), claude(2_500, 0)], [0.0, 400.0])
    assert late[0].unread_write_tokens == 3_000 and late[1].read_tokens == 2_500  # past the 5-minute TTL
