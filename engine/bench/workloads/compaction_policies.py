"""Compaction policies for a conversation held against a token budget.

Invariants:
- the system prompt, the pinned records and the current exchange (the latest user turn and everything
  after it) are never compacted: only earlier turns are;
- every durable line present before a compaction is present, literally, after it, or the compaction
  is rejected with `CompactionError`;
- a request that does not fit the budget after compaction is refused (`CompactionError`), never cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.bench.workloads.longchat import durable_lines
from engine.errors import CompactionError
from engine.prompts.chat import Message


@dataclass(frozen=True)
class Policy:
    trigger: float | None  # compact when the request passes this share of the budget (None: never)
    target: float = 1.0  # ... down to this share
    clear_results: bool = False  # first replace old tool results with a marker
    fold_all: bool = False  # summarize every earlier turn at once rather than the oldest few
    drop: bool = False  # a window: folded turns are dropped (their durable lines still kept)


POLICIES = {
    "none": Policy(None),
    "clear-then-summarize": Policy(0.8, 0.8, clear_results=True, fold_all=True),
    "compact-every-turn": Policy(0.5, 0.5),
    "batch-at-threshold": Policy(0.8, 0.4),
    "sliding-window": Policy(0.8, 0.8, drop=True),
}

Summarizer = Callable[[str, list[list[Message]]], str]  # (previous prose, newly folded turns) -> prose


@dataclass
class History:
    """Earlier turns (user, call, result, reply), some folded into a summary at the front."""

    turns: list[list[Message]] = field(default_factory=list)
    folded: int = 0  # turns summarized or dropped so far
    notes: list[str] = field(default_factory=list)  # durable lines of folded turns, verbatim, in order
    prose: str = ""
    dropped: bool = False

    def messages(self) -> list[Message]:
        head: list[Message] = []
        if self.folded:
            tag = "notes" if self.dropped else "summary"
            body = [
                f"Turns 1-{self.folded} were {'dropped' if self.dropped else 'summarized'}.",
                *([self.prose] if self.prose else []),
                *self.notes,
            ]
            head = [{"role": "user", "content": f"<{tag}>\n" + "\n".join(body) + f"\n</{tag}>"}]
        return head + [m for turn in self.turns for m in turn]


def extractive_summary(previous: str, turns: list[list[Message]]) -> str:
    """Deterministic: the orders the folded turns touched (the last eight), nothing invented."""
    seen = re.findall(r"\d{5}", previous) + [
        o for turn in turns for m in turn for o in re.findall(r"order (\d{5})", str(m.get("content") or ""))
    ]
    recent = list(dict.fromkeys(reversed(seen)))[:8][::-1]
    return f"Orders handled earlier: {', '.join(recent)}." if recent else ""


def _text(messages: list[Message]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


class Compactor:
    def __init__(
        self,
        policy: str,
        budget: int,
        count: Callable[[list[Message]], int],
        summarizer: Summarizer = extractive_summary,
    ) -> None:
        self.name, self.policy, self.budget = policy, POLICIES[policy], budget
        self.count, self.summarizer = count, summarizer

    def fit(self, history: History, frame: Callable[[History], list[Message]]) -> str:
        """Compact `history` in place as the policy says; `frame` builds the full request around it.
        Returns what was done ("" for nothing)."""
        p, before = self.policy, self.count(frame(history))
        events = []
        if p.trigger is not None and before > p.trigger * self.budget:
            durable = durable_lines(_text(frame(history)))
            cleared = self._clear_results(history) if p.clear_results else 0
            if cleared:
                events.append(f"cleared {cleared} tool result{'s' * (cleared != 1)}")
            folded = self._fold(history, frame) if self.count(frame(history)) > p.target * self.budget else 0
            if folded:
                events.append(f"{'dropped' if p.drop else 'summarized'} {folded} turns")
            lost = [line for line in durable if line not in _text(frame(history))]
            if lost:
                raise CompactionError(f"{self.name} dropped durable line {lost[0]!r}; compaction rejected")
        after = self.count(frame(history))
        if after > self.budget:
            raise CompactionError(
                f"request of {after} tokens exceeds the budget of {self.budget} tokens under "
                f"policy {self.name}; refused, never cut"
            )
        return "; ".join(events) + (f" ({before} -> {after} tokens)" if events else "")

    def _clear_results(self, history: History) -> int:
        cleared = 0
        for turn in history.turns:
            for i, m in enumerate(turn):
                if m["role"] == "tool" and not str(m["content"]).startswith("[tool result cleared"):
                    turn[i] = {**m, "content": f"[tool result cleared: {len(str(m['content']))} characters]"}
                    cleared += 1
        return cleared

    def _fold(self, history: History, frame: Callable[[History], list[Message]]) -> int:
        """Fold the oldest turns (all of them with fold_all) until the request is under the target."""
        folded: list[list[Message]] = []
        while history.turns and (
            self.policy.fold_all or self.count(frame(history)) > self.policy.target * self.budget
        ):
            turn = history.turns.pop(0)
            folded.append(turn)
            history.notes += durable_lines(_text(turn))
            history.folded += 1
        if folded:
            history.dropped = self.policy.drop
            history.prose = "" if self.policy.drop else self.summarizer(history.prose, folded)
        return len(folded)
