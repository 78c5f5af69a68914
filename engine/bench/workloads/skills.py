"""The kv-compose workload: "skill" blocks (instructions an agent loads on demand), each precomputed alone
right after the chat template's preamble, and prompts that include 1-4 of them in seeded orders, with a
short fresh note between some of them, followed by a question.

Prompts are token-level concatenations (preamble + blocks + notes + tail), so the spliced prompt and its
exact recompute are the same token ids.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from engine.prompts.chat import render_text

SYSTEM = "You are an agent with the following skills loaded. Use them when they apply.\n\n"
SKILLS = {
    "refunds": [
        "Refunds go to the original payment method within 5 business days.",
        "Refunds above 200 EUR need a supervisor's approval code.",
        "Partial refunds are allowed per order line, never per unit.",
        "A refund closes the return case; log the amount and the reason.",
    ],
    "shipping": [
        "Parcels ship from Rotterdam on weekdays before 16:00.",
        "Express delivery reaches most EU addresses the next business day.",
        "Address changes are possible until the parcel is handed to the carrier.",
        "A parcel without tracking updates for 5 days counts as lost.",
    ],
    "warranty": [
        "Electronics carry a 24-month warranty from the delivery date.",
        "Warranty claims require the original order number and the serial number.",
        "Damage from drops or liquids is not covered by the warranty.",
        "Repairs take 10 business days; a loan device is offered for phones.",
    ],
    "loyalty": [
        "Members earn 1 point per euro spent, 2 points during promotions.",
        "Points expire after 18 months without a purchase.",
        "100 points are worth 5 EUR of store credit.",
        "Gold members get free express shipping on every order.",
    ],
    "privacy": [
        "Never read out a full card number; the last four digits are enough.",
        "Identity is verified with the order number and the postcode.",
        "Data export requests are answered within 30 days.",
        "Do not discuss another customer's order, even with a family member.",
    ],
}
QUESTIONS = [
    "A customer asks what to do next about order 48213. Answer in one sentence.",
    "Summarise which of your skills apply to a late, damaged parcel. Answer briefly.",
]


@dataclass(frozen=True)
class Layout:
    skills: tuple[str, ...]  # in prompt order
    notes: tuple[bool, ...]  # whether a fresh note precedes each skill block
    question: str


def skill_text(name: str, repeat: int) -> str:
    """A skill block: its rules, `repeat` times over (numbered), so a block's size can be scaled."""
    rules = SKILLS[name] * repeat
    return f"## Skill: {name}\n" + "\n".join(f"{i + 1}. {r}" for i, r in enumerate(rules)) + "\n\n"


def template_parts(tokenizer: PreTrainedTokenizerBase, question: str) -> tuple[str, str]:
    """The chat template's text before the skill blocks (preamble + system opening) and after them."""
    marker = "\x00SKILLS\x00"
    text = render_text(
        tokenizer, [{"role": "system", "content": SYSTEM + marker}, {"role": "user", "content": question}]
    )
    before, after = text.split(marker)
    return before, after


def layouts(n: int, seed: int) -> list[Layout]:
    """n seeded layouts with 1-4 skills (cycling the count), in random order, each block preceded by a fresh
    note with probability 1/2 (so blocks land at varied positions)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        names = tuple(rng.sample(list(SKILLS), 1 + i % 4))
        out.append(Layout(names, tuple(rng.random() < 0.5 for _ in names), rng.choice(QUESTIONS)))
    return out


def note(i: int) -> str:
    return f"(Note {i + 1}: the customer is on the phone; keep it short.)\n\n"
