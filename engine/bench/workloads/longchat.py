"""A long, seeded agent conversation for compaction experiments.

Every turn: a user request, a tool call, a bulky tool result, and the assistant's reply. Some replies
carry durable lines (`DECISION ...`, `OPEN ...`, `ERROR ...`) that must survive any compaction
literally. Pinned records (rules and current values) are held by the application, outside the history.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.bench.workloads.sizing import lines_until
from engine.prompts.chat import Message

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

DURABLE = re.compile(r"^(DECISION|OPEN|ERROR) .+$", re.MULTILINE)
SYSTEM = (
    "You are the operations agent of a warehouse. Work through the user's requests with the tools; "
    "record decisions as DECISION lines, open questions as OPEN lines and failures as ERROR lines."
)
PINNED = [
    "RULE refunds above 200 EUR need approval",
    "RULE never ship hazardous goods by air",
    "VALUE warehouse=Rotterdam-2",
    "VALUE carrier_contract=DHL-2026-B",
    "VALUE budget_eur=12000",
]
REQUESTS = [
    "Check stock for SKU-{n}.",
    "Reserve 20 units of SKU-{n} for order {o}.",
    "Why is order {o} late?",
    "Plan the pickup for order {o}.",
    "Reconcile the invoice of order {o}.",
    "Audit the returns of SKU-{n}.",
]
DURABLE_LINES = [
    "DECISION ship order {o} with DHL express",
    "OPEN awaiting approval for refund on order {o}",
    "ERROR scanner timeout while counting SKU-{n}",
    "DECISION move SKU-{n} to aisle {a}",
    "OPEN supplier has not confirmed SKU-{n} restock",
]


@dataclass(frozen=True)
class ChatTurn:
    user: Message
    call: Message
    result: Message
    reply: str
    time: str


def durable_lines(text: str) -> list[str]:
    return [m.group(0) for m in DURABLE.finditer(text)]


def _stock_row(rng: random.Random, sku: int, order: int) -> str:
    bin_ = f"{rng.choice('ABCDEF')}{rng.randint(1, 99)}"
    return f'{{"sku": "SKU-{sku}", "bin": "{bin_}", "qty": {rng.randint(0, 500)}, "order": {order}}}'


def build_long_chat(
    tokenizer: PreTrainedTokenizerBase,
    turns: int = 50,
    result_tokens: int = 60,
    seed: int = 0,
    notes: Callable[[int], str] | None = None,
) -> list[ChatTurn]:
    """The seeded conversation; `notes(t)`, when given, is appended to turn t's user request (the value
    updates of `compaction --answers`), drawing nothing from the chat's own random stream."""
    rng = random.Random(seed)
    out = []
    for t in range(turns):
        n, o, a = rng.randint(1000, 9999), rng.randint(40000, 49999), rng.randint(1, 40)
        rows = lines_until(tokenizer, result_tokens, lambda _, n=n, o=o: _stock_row(rng, n, o))
        reply = f"Done: {rng.choice(REQUESTS).split()[0].lower()} for order {o} handled."
        if t % 4 == 1:  # a durable line every fourth turn
            reply += "\n" + rng.choice(DURABLE_LINES).format(n=n, o=o, a=a)
        tool = rng.choice(["stock_query", "order_status", "invoice_lookup"])
        call = {"type": "function", "function": {"name": tool, "arguments": {"id": str(o)}}}
        user = {
            "role": "user",
            "content": rng.choice(REQUESTS).format(n=n, o=o) + (notes(t) if notes else ""),
        }
        out.append(
            ChatTurn(
                user=user,
                call={"role": "assistant", "content": "", "tool_calls": [call]},
                result={"role": "tool", "content": "\n".join(rows)},
                reply=reply,
                time=f"2026-11-30 {8 + t // 60:02d}:{t % 60:02d}:{rng.randint(0, 59):02d} UTC",
            )
        )
    return out
