"""Recorded against predicted, honestly: both served within the tolerance or both missed agree; a rule that
predicts nothing against a recorded read disagrees with its own reason; correlation and gaps per rule."""

from __future__ import annotations

import pytest

from engine.traces.agreement import PREDICTED_NONE, SHARES_APART, agreement, disagreements
from engine.traces.analysis import RECORDED, AnalyzedRequest
from engine.traces.miss_reasons import Miss
from engine.traces.providers.base import Served
from engine.traces.usage import RecordedUsage


def request(turn: int, read: int, predicted: int, why: str = "") -> AnalyzedRequest:
    usage = RecordedUsage("deepseek", "deepseek-chat", prompt_tokens=1000, cache_read_tokens=read)
    served = {"deepseek": Served(predicted, why_none=why)}
    miss = Miss("first_request", 1000) if turn == 1 else None
    return AnalyzedRequest(
        "s", turn, float(turn), 1000, 0, 1000, 0.0, 0, "", "", -1, "", "", 0,
        served=served, misses={RECORDED: miss, "deepseek": miss}, recorded=usage,
    )  # fmt: skip


def test_served_nothing_against_a_recorded_read_is_a_disagreement() -> None:
    records = [
        request(1, 0, 0),  # both read nothing: agree
        request(2, 960, 0, why="no stored unit is a whole prefix of it"),  # was counted as agreeing
        request(3, 900, 960),  # both read, 6 points apart: agree
        request(4, 900, 500),  # 40 points apart
        request(5, 700, 640),
    ]
    (row,) = agreement(records, ["deepseek"])
    assert row["agree"] == pytest.approx(3 / 5) and row["disagreements"] == 2
    assert row["median_share_gap"] == pytest.approx(6.0) and row["p90_share_gap"] == pytest.approx(96.0)
    assert row["share_correlation"] == pytest.approx(0.4626, abs=1e-4)  # numpy.corrcoef
    rows = disagreements(records, "deepseek")
    assert [(d["turn"], d["disagreement"]) for d in rows] == [(2, PREDICTED_NONE), (4, SHARES_APART)]
    assert rows[0]["rule_says"] == "no stored unit is a whole prefix of it"
    assert (rows[0]["recorded_share"], rows[0]["predicted_share"]) == (0.96, 0.0)
