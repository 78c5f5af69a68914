"""The questions of "where a fact sits" and how an answer is scored.

One question per asked record: how many tubs its order had, "number only". The prompt is one user message:
a line introducing the log, the log, a blank line, the question; the log comes first so every question of
one log shares its tokens (the prefix cache serves them). An answer is scored by the first whole number in
it once the asked order id is taken out: right (the record's tub count), a wrong number (and whose record
holds it, in this order: another asked record, a filler record, the asked record's own id or time, or
none), or not a number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.bench.workloads.delivery_log import DeliveryLog
from engine.prompts.chat import Message

INTRO = "Here is today's delivery log, one JSON record per line:\n"
NUMBER = re.compile(r"\d+")


def question(log: DeliveryLog, fact: int) -> str:
    return f"How many tubs were delivered for order {log.records[fact].order}? Answer with the number only."


def messages(log: DeliveryLog, fact: int) -> list[Message]:
    return [{"role": "user", "content": f"{INTRO}{log.text}\n\n{question(log, fact)}"}]


def log_offset(rendered: str, log: DeliveryLog) -> int:
    """Where the log's first character sits in the rendered prompt text."""
    at = rendered.find(INTRO + log.text)
    if at < 0:
        raise ValueError("the chat template changed the log's text")
    return at + len(INTRO)


@dataclass(frozen=True)
class Score:
    verdict: str  # right | wrong number | not a number
    number: int | None  # the number scored (None: not a number)
    number_at: int  # character of the answer where it starts (-1: none)
    source: str  # for a wrong number: another fact | a filler | its own id or time | no record; else ""
    holders: list[str]  # order ids of the records holding a wrong number (at most 5)


def score(answer: str, log: DeliveryLog, fact: int) -> Score:
    record = log.records[fact]
    masked = answer.replace(
        record.order, " " * len(record.order)
    )  # the id it was asked about is not an answer
    match = NUMBER.search(masked)
    if match is None:
        return Score("not a number", None, -1, "", [])
    number = int(match.group())
    if number == record.tubs:
        return Score("right", number, match.start(), "", [])
    holders = [i for i in log.holders(number) if i != fact]
    facts = [i for i in holders if i in log.facts]
    if facts:
        source, holders = "another fact", facts + [i for i in holders if i not in facts]
    elif holders:
        source = "a filler"
    elif match.group() == record.order.removeprefix("A-") or number in _clock(record.at):
        source = "its own id or time"
    else:
        source = "no record"
    return Score("wrong number", number, match.start(), source, [log.records[i].order for i in holders[:5]])


def _clock(at: str) -> tuple[int, ...]:
    return tuple(int(part) for part in at.split(":"))
