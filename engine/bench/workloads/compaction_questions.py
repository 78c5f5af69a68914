"""What a compacted context still knows: ten questions asked at the end of the long conversation.

Four kinds, as in the budget chapter: five on rules and names (the system prompt and its pinned records),
two on values the user set early and changed later (`value updates`, written into two user turns of the
chat when the conversation is built with `updates=True`), two answered only in tool results (the first
stock row of a middle turn and of the second-to-last turn), and one on the last thing said (the order of the
final reply). An answer is right when it holds the expected value (case and thousands separators aside); a
changed value answered with its earlier value is `stale`; anything else is `wrong`.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from engine.bench.workloads.longchat import ChatTurn

KINDS = ("rules and names", "values later changed", "only in tool results", "the last thing said")
LEADS = ("Ana Ruiz", "Tomas Berg", "Mei Chen", "Joost de Vries", "Priya Nair", "Kofi Mensah")


@dataclass(frozen=True)
class Question:
    kind: str
    text: str
    expected: str
    stale: str = ""  # the earlier value of a changed one


@dataclass(frozen=True)
class Updates:
    """Two values set at turn `early` and changed at turn `late` (0-based turns)."""

    early: int
    late: int
    dock: tuple[int, int]
    lead: tuple[str, str]

    def note(self, t: int) -> str:
        """What the user adds to turn t's request ("" on other turns)."""
        if t == self.early:
            return f" Note: pickups go from dock {self.dock[0]}; the night-shift lead is {self.lead[0]}."
        if t == self.late:
            return f" Update: pickups now go from dock {self.dock[1]}; the night-shift lead is now {self.lead[1]}."
        return ""


def updates_for(turns: int, seed: int) -> Updates:
    """Set at a fifth of the conversation, changed four turns before its end (seeded apart from the chat)."""
    rng = random.Random(f"value updates {seed}")
    docks = rng.sample(range(2, 19), 2)
    leads = rng.sample(LEADS, 2)
    early = turns // 5
    return Updates(early, max(early + 1, turns - 4), (docks[0], docks[1]), (leads[0], leads[1]))


def _first_row(turn: ChatTurn) -> dict:
    return json.loads(str(turn.result["content"]).split("\n")[0])


def questions(chat: list[ChatTurn], updates: Updates) -> list[Question]:
    rows = [(t, _first_row(chat[t])) for t in (len(chat) // 2, len(chat) - 2)]
    last_order = re.search(r"order (\d+)", chat[-1].reply)
    assert last_order is not None, "every scripted reply names its order"
    return [
        Question(KINDS[0], "Refunds above how many EUR need approval?", "200"),
        Question(KINDS[0], "Which warehouse do we operate? Give its name as recorded.", "Rotterdam-2"),
        Question(KINDS[0], "What is our carrier contract id?", "DHL-2026-B"),
        Question(KINDS[0], "What is the budget in EUR?", "12000"),
        Question(KINDS[0], "By which transport mode must hazardous goods never be shipped?", "air"),
        Question(
            KINDS[1],
            "From which dock do pickups go now? Answer with the dock number.",
            str(updates.dock[1]),
            str(updates.dock[0]),
        ),
        Question(KINDS[1], "Who is the night-shift lead now?", updates.lead[1], updates.lead[0]),
        *(
            Question(
                KINDS[2],
                f"In the tool result of turn {t + 1}, what qty did {row['sku']} show in bin {row['bin']}?",
                str(row["qty"]),
            )
            for t, row in rows
        ),
        Question(KINDS[3], "Which order number did your last reply say was handled?", last_order.group(1)),
    ]


def _normal(text: str) -> str:
    return re.sub(r"(?<=\d)[,\u202f ](?=\d{3}\b)", "", text).lower()


def _holds(answer: str, value: str) -> bool:
    """The value as a whole word or number of the answer (so `2` is not found in `12`)."""
    return re.search(rf"(?<![\w-]){re.escape(value.lower())}(?![\w-])", _normal(answer)) is not None


def verdict(question: Question, answer: str) -> str:
    if _holds(answer, question.expected):
        return "right"
    if question.stale and _holds(answer, question.stale):
        return "stale"
    return "wrong"
