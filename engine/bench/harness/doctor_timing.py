"""`bench doctor --measure`: the original trace and each rewrite replayed through the model in one run,
turn by turn and interleaved (`Replayer`: the order rotates per pass, each conversation in a cache of its
own), so each rewrite's TTFT is paired with the original's pass by pass: the ratio's median [min-max]."""

from __future__ import annotations

import argparse

from engine.bench.args import open_engine
from engine.bench.harness.doctor_run import Diagnosis
from engine.bench.harness.replayer import Conversation, Replayer, Request, finished_turns
from engine.bench.reporting.replay_report import summarize_turns
from engine.traces.analysis import replies
from engine.traces.request import TraceRequest


def _conversation(name: str, requests: list[TraceRequest]) -> Conversation:
    following = replies(requests)
    asked = [Request(r.messages, r.tools) for r in requests]
    return Conversation(name, lambda t, _replies: asked[t], lambda t: following[t])


def time_arms(args: argparse.Namespace, d: Diagnosis) -> None:
    """Each arm's `ttft`: its summary row against the original (`summarize_turns`)."""
    arms = [d.original, *d.fixes, *d.costs, *([d.combined] if d.combined else [])]
    engine = open_engine(args)
    replayer = Replayer(engine, args.repeats, cold=False)
    turns = len(d.original.requests)
    conversations = [_conversation(a.name, a.requests) for a in arms]
    records, _ = finished_turns(lambda: replayer.run(conversations, turns, desc="doctor --measure"))
    rows = {row["conversation"]: row for row in summarize_turns(records, d.original.name)}
    for arm in arms:
        arm.ttft = rows.get(arm.name, {})
