"""Status-bar layouts break the prefix exactly where their definitions say, and the cost model is coherent."""

from __future__ import annotations

import math

import pytest

import engine
from engine.bench.commands.statusbar import replay_status, sweep_point
from engine.bench.harness.replayer import Replayer, reply_tokens
from engine.bench.workloads.agent_status import (
    STATUS_LAYOUTS,
    call_message,
    render_status,
    sized_trajectory,
    sizes,
    status_request,
)
from engine.bench.workloads.costs import (
    append_extra_tokens,
    break_even_between,
    replace_extra_tokens,
)
from engine.errors import InvalidArgumentError

BS = 16


@pytest.fixture(scope="module")
def run(tiny_dir):
    e = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", block_size=BS, cache_tokens=1 << 14)
    traj = sized_trajectory(e, steps=6, status_tokens=150, between_tokens=60)
    records = replay_status(Replayer(e, repeats=1, cold=False), traj, list(STATUS_LAYOUTS), "test")
    return e, traj, {name: [r for r in records if r.conversation == name] for name in STATUS_LAYOUTS}


def test_status_is_sized_and_counts_calls(run) -> None:
    e, traj, _ = run
    s, r = sizes(e, traj)  # as asked, give or take one TODO line or thought line
    assert 150 <= s < 150 + 12 and 60 <= r < 60 + 14
    last = render_status(traj, 6)
    assert "phone_call(+1-555-0100) 2" in last and "calls to phone_call: 2/3" in last
    assert render_status(traj, 0).startswith("<agent_status>") and "[x]" in last


def test_append_and_no_status_never_break_the_prefix(run) -> None:
    e, traj, by = run
    for name in ("status-append", "no-status"):
        for t, (prev, r) in enumerate(zip(by[name], by[name][1:], strict=False)):
            reply = reply_tokens(e, status_request(name, traj, t), call_message(traj, t))
            assert r.first_change == -1, name  # each request extends the previous one and its reply
            assert r.cached_tokens == (prev.prompt_tokens + len(reply) - 1) // BS * BS, name


def test_replace_breaks_only_where_the_previous_status_was(run) -> None:
    _, _, by = run
    recs = by["status-replace"]
    for prev, r in zip(recs[1:], recs[2:], strict=False):
        old_status = next(start for label, start, _ in prev.regions if label == "status")
        # the message now in its place starts with the same role marker: the change is at most one token later
        assert old_status <= r.first_change <= old_status + 1
        assert r.cached_tokens == r.first_change // BS * BS


def test_in_system_breaks_at_the_system_prompt(run) -> None:
    _, _, by = run
    for r in by["status-in-system"][1:]:
        assert r.change_region == "system" and r.first_change < 200
        assert r.cached_tokens <= r.first_change


def test_cost_model_is_consistent() -> None:
    s, n, alpha = 150, 8, 0.05
    r = break_even_between(s, n, alpha)
    assert math.isclose(append_extra_tokens(s, r, n, alpha), replace_extra_tokens(s, r, n, alpha))
    assert append_extra_tokens(s, 2 * r, n, alpha) < replace_extra_tokens(s, 2 * r, n, alpha)
    assert replace_extra_tokens(s, 100, 1, alpha) == 0  # a single update replaces nothing


def test_sizes_below_the_fixed_text_are_refused_not_raised(run) -> None:
    """S or R under what the trajectory's counts and tool call take alone would silently come out larger."""
    e, _, _ = run
    with pytest.raises(
        InvalidArgumentError, match=r"S=64 tokens is less than this trajectory can be: a status"
    ):
        sized_trajectory(e, steps=10, status_tokens=64, between_tokens=60)
    with pytest.raises(
        InvalidArgumentError, match=r"R=16 tokens .* a reply that is only its tool call takes"
    ):
        sized_trajectory(e, steps=4, status_tokens=150, between_tokens=16)


def test_one_pass_claims_no_sign(run) -> None:
    e, _, _ = run
    point = sweep_point(e, sized_trajectory(e, 4, 150, 60), (150, 60), repeats=1)
    assert point["passes"] == 1 and point["measured_verdict"] == "too few passes"
    assert point["status_tokens_asked"] == 150 and point["status_tokens"] >= 150
