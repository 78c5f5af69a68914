"""The kv-edit workload: a prompt with one decision-relevant field, ordinary context after it, and a
question whose answer depends on the field; then the same prompt with the field changed.

Three fields (a profile city, remaining credits, the current time), each with a question that turns on it.
Pairs of (old, new) values are seeded; the answer's decision is the option it names (a city, yes or no).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from engine.bench.workloads.scenario import POLICIES
from engine.prompts.chat import Message

COT = " Think step by step first, then give the answer."
CITIES = [
    "Beijing",
    "Shanghai",
    "Paris",
    "Berlin",
    "Madrid",
    "Tokyo",
    "Cairo",
    "Lima",
    "Oslo",
    "Toronto",
    "Sydney",
    "Mumbai",
]


@dataclass(frozen=True)
class Field:
    name: str
    line: str  # the profile line, with {value}
    label: str  # how an erratum names it
    question: str
    options: tuple[str, ...]  # the decisions an answer can name


FIELDS = {
    "city": Field(
        "city",
        "User's city: {value}",
        "the user's city",
        "Which city should the courier deliver the parcel to? Answer with the city name only.",
        tuple(CITIES),
    ),
    "credits": Field(
        "credits",
        "Remaining credits: {value}",
        "the remaining credits",
        "A premium call costs 50 credits. Can the user afford a premium call now? Answer yes or no.",
        ("yes", "no"),
    ),
    "time": Field(
        "time",
        "Current time: {value}",
        "the current time",
        "The support desk is open from 09:00 to 17:00. Is the desk open right now? Answer yes or no.",
        ("yes", "no"),
    ),
}


@dataclass(frozen=True)
class Pair:
    field: Field
    old: str
    new: str


def pairs(n: int, seed: int) -> list[Pair]:
    """n seeded (old, new) value pairs, cycling through the fields; old != new, and for the yes/no fields
    the two values sit on opposite sides of the threshold, so the right decision flips."""
    rng, out = random.Random(seed), []
    for i in range(n):
        f = list(FIELDS.values())[i % len(FIELDS)]
        if f.name == "city":
            old, new = rng.sample(CITIES, 2)
        elif f.name == "credits":
            low, high = str(rng.randint(0, 49)), str(rng.randint(50, 400))
            old, new = (low, high) if rng.random() < 0.5 else (high, low)
        else:
            inside, outside = (
                f"{rng.randint(9, 16):02d}:{rng.randint(0, 59):02d}",
                f"{rng.choice([1, 3, 6, 19, 22]):02d}:{rng.randint(0, 59):02d}",
            )
            old, new = (inside, outside) if rng.random() < 0.5 else (outside, inside)
        out.append(Pair(f, old, new))
    return out


def context(policies: int, seed: int) -> str:
    """Ordinary downstream context: `policies` numbered shop policies in a seeded order."""
    order = random.Random(seed).sample(POLICIES, len(POLICIES))
    return "Follow these policies:\n" + "\n".join(
        f"{i + 1}. {order[i % len(order)]}" for i in range(policies)
    )


def messages(f: Field, value: str, downstream: str, cot: bool, erratum: str | None = None) -> list[Message]:
    """System: the profile field, then the downstream context; user: (an erratum and) the question."""
    system = f"You are a customer-support assistant.\n\nUser profile:\n{f.line.format(value=value)}\n\n{downstream}"
    question = f.question + (COT if cot else "")
    user = f"Correction: {f.label} is {erratum}, not {value}.\n\n{question}" if erratum else question
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def decision(text: str, options: tuple[str, ...]) -> str:
    """The option an answer names first ("-" when it names none). The first, not the last, also after
    "think step by step": short greedy continuations rarely reach a conclusion, and an answer that repeats
    an erratum names the new value first ("the city is Mumbai, not Cairo")."""
    hits = [(m.start(), o) for o in options for m in re.finditer(rf"\b{re.escape(o)}\b", text, re.IGNORECASE)]
    return min(hits)[1] if hits else "-"
