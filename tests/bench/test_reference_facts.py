"""Token-level facts of the reference runs, pinned at a small size: prompt / cached / computed tokens per
turn of every layout (scripted replies), compaction events and cache breaks per policy, and the cached
tokens per step of every status-bar layout. They depend only on the SmolLM2 tokenizer and chat template,
the block size and the seeded workloads (not on the weights), so a tiny random model with SmolLM2's
tokenizer reproduces them; a change that moves one is seen here. The numbers are deterministic token
counts, not timings."""

from __future__ import annotations

import pytest

import engine
from engine.bench.commands import compaction, layout
from engine.bench.commands.statusbar import replay_status
from engine.bench.harness.replayer import Replayer
from engine.bench.workloads.agent_status import STATUS_LAYOUTS, sized_trajectory
from engine.bench.workloads.compaction_policies import POLICIES, extractive_summary
from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.longchat import build_long_chat
from engine.bench.workloads.scenario import build_scenario
from engine.loading.sources import resolve
from engine.loading.tokenizer import load_tokenizer
from tests.conftest import build_hf_model

# layout -> (prompt, cached, computed) tokens per turn; small scale, 3 turns, seed 0, scripted replies
LAYOUT_TOKENS = {
    "stable-first": [(665, 0, 665), (853, 672, 181), (1052, 864, 188)],
    "timestamp-first": [(664, 0, 664), (826, 16, 810), (999, 16, 983)],
    "dynamic-profile": [(664, 0, 664), (842, 176, 666), (1031, 176, 855)],
    "shuffled-tools": [(665, 0, 665), (853, 192, 661), (1052, 272, 780)],
    "sliding-window": [(665, 0, 665), (853, 672, 181), (891, 496, 395)],
    "text-format": [(647, 0, 647), (812, 640, 172), (988, 800, 188)],
}
# policy/prefix -> (compaction events, cache breaks, computed tokens, refused at turn); 5 turns, budget 512
COMPACTION = {
    "none/stable": (0, 0, 419, 3),
    "none/timestamp-first": (0, 1, 725, 3),
    "clear-then-summarize/stable": (4, 4, 1058, None),
    "clear-then-summarize/timestamp-first": (4, 4, 1659, None),
    "compact-every-turn/stable": (4, 4, 1091, None),
    "compact-every-turn/timestamp-first": (4, 4, 1600, None),
    "batch-at-threshold/stable": (4, 4, 1091, None),
    "batch-at-threshold/timestamp-first": (4, 4, 1600, None),
    "sliding-window/stable": (4, 4, 997, None),
    "sliding-window/timestamp-first": (4, 4, 1506, None),
}
# status layout -> cached tokens per step; 4 steps, S=128, R=64 (the sweep's smallest point)
STATUS_CACHED = {
    "status-replace": [0, 80, 192, 304],
    "status-append": [0, 240, 480, 720],
    "status-in-system": [0, 64, 64, 64],
    "no-status": [0, 144, 256, 368],
}


@pytest.fixture(scope="module")
def smol_tiny(tmp_path_factory: pytest.TempPathFactory) -> engine.Engine:
    """Random tiny weights under SmolLM2's tokenizer and chat template (eos 2, as SmolLM2)."""
    folder = tmp_path_factory.mktemp("smol-tiny")
    build_hf_model("llama", vocab_size=49152).save_pretrained(str(folder), safe_serialization=True)
    load_tokenizer(resolve("smollm2-135m").tokenizer_dir).save_pretrained(str(folder))
    return engine.load(str(folder), device="cpu", block_size=16, cache_tokens=1 << 14)


def test_layout_tokens_per_turn(smol_tiny) -> None:
    sc = build_scenario(smol_tiny.tokenizer, "small", seed=0, turns=3)
    convs = layout.conversations(sc, list(LAYOUTS), "scripted")
    records = Replayer(smol_tiny, repeats=1, cold=False).run(convs, len(sc.turns))
    got: dict[str, list[tuple[int, int, int]]] = {}
    for r in records:
        got.setdefault(r.conversation, []).append((r.prompt_tokens, r.cached_tokens, r.computed_tokens))
    assert got == LAYOUT_TOKENS


def test_compaction_events_and_breaks(smol_tiny) -> None:
    chat = build_long_chat(smol_tiny.tokenizer, 5, 60, 0)
    convs = compaction.conversations(smol_tiny, chat, list(POLICIES), 512, extractive_summary)
    replayer = Replayer(smol_tiny, repeats=1, cold=False)
    records = replayer.run(convs, 5)
    rows = compaction.policy_rows(records, replayer.refused, [c.name for c in convs])
    got = {
        r["conversation"]: (r["events"], r["cache_breaks"], r["computed_tokens"], r["refused_at_turn"])
        for r in rows
    }
    assert got == COMPACTION


def test_status_bar_cached_tokens_per_step(smol_tiny) -> None:
    traj = sized_trajectory(smol_tiny, 4, 128, 64)
    records = replay_status(Replayer(smol_tiny, 1, cold=False), traj, list(STATUS_LAYOUTS), "test")
    got: dict[str, list[int]] = {}
    for r in records:
        got.setdefault(r.conversation, []).append(r.cached_tokens)
    assert got == STATUS_CACHED
