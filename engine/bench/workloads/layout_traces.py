"""`bench layout`'s conversation written out as traces: one OpenAI Chat Completions JSONL file per layout,
one request body per turn (the scripted replies joining the history), a second apart, in one session per
file. What `bench doctor` is checked on: each breaking layout's cause, and how close its rewrite comes to
`stable-first`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.bench.workloads.layouts import LAYOUTS
from engine.bench.workloads.scenario import Scenario
from engine.traces.doctor.writing import chat_body, envelope_line

START_S = 1_800_000_000.0  # the first request's time (epoch seconds); the rest follow a second apart


def layout_bodies(sc: Scenario, layout: str) -> list[dict[str, Any]]:
    """Each turn's request under `layout`, with the scripted replies, as Chat Completions bodies."""
    replies = [turn.reply for turn in sc.turns]
    bodies = []
    for t in range(len(sc.turns)):
        req = LAYOUTS[layout](sc, t, replies)
        bodies.append(chat_body(req.messages, req.tools, "layout-agent"))
    return bodies


def write_layout_traces(sc: Scenario, layouts: list[str], folder: Path) -> dict[str, Path]:
    """One `<layout>.jsonl` per layout in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name in layouts:
        lines = [envelope_line(body, START_S + t, name) for t, body in enumerate(layout_bodies(sc, name))]
        out[name] = folder / f"{name}.jsonl"
        out[name].write_text("\n".join(lines) + "\n")
    return out
