"""`bench needle --facts`: only 48 distinct tub counts exist, so 49 to 64 asked records looped forever
drawing a 49th; the flag is capped and the log builder refuses what it cannot build."""

from __future__ import annotations

import pytest

from engine.bench.__main__ import main
from engine.bench.workloads.delivery_log import MAX_FACTS, TUBS, build_log
from tests.redteam.cli import one_error_line


def count(text: str) -> int:
    return len(text) // 4


@pytest.mark.parametrize("facts", ["49", "64", "1000"])
def test_more_facts_than_tub_counts_is_one_line(tmp_path, capsys, facts) -> None:
    line = one_error_line(capsys, main, ["needle", "--facts", facts, "--out", str(tmp_path / "run")])
    assert f"--facts: value must be at most 48, got {facts}" in line


def test_the_log_builder_refuses_more_facts_than_it_can_draw() -> None:
    assert MAX_FACTS == TUBS[1] - TUBS[0] + 1 == 48
    with pytest.raises(ValueError, match="between 1 and 48"):
        build_log(count, 20_000, "middle", 49, 0)
    log = build_log(count, 20_000, "middle", 48, 0)  # the most there are: distinct, and found
    assert len({log.records[i].tubs for i in log.facts}) == 48


def test_a_log_longer_than_the_order_numbers_is_refused() -> None:
    with pytest.raises(ValueError, match="at most 9,000 records"):
        build_log(count, 10**7, "top", 8, 0)  # needed ~300,000 distinct order numbers of 9,000: looped
