"""A deterministic, seeded multi-turn agent conversation: policies, tools, user tasks, tool calls, results.

Each turn t holds a user task U_t, the assistant's tool call A_t, the tool's result R_t and a scripted
final reply F_t; the request of turn t ends with [U_t, A_t, R_t] and asks the model for the reply.
Sizes are set in tokens of the model's own tokenizer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.bench.workloads.sizing import lines_until

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

POLICIES = [
    "Verify the customer's identity before disclosing any order details.",
    "Never promise delivery dates that the carrier has not confirmed.",
    "Refunds above 200 EUR need a supervisor's approval code.",
    "Quote prices in the customer's currency, with taxes shown separately.",
    "Escalate any report of a damaged item with photos to the claims team.",
    "Keep answers under five sentences unless the customer asks for detail.",
    "Do not store payment card numbers in notes or messages.",
    "Offer store credit only after a refund has been declined.",
    "Confirm the shipping address before re-sending a parcel.",
    "Log every tool call with its purpose in the case history.",
    "Use the customer's preferred name as recorded in their profile.",
    "Cancellations are free until the order leaves the warehouse.",
    "Warranty claims require the original order number.",
    "Apologise once for a delay; then focus on the next concrete step.",
    "Hazardous goods cannot be returned by post; arrange a courier pickup.",
    "Loyalty points expire after 18 months without a purchase.",
    "A replacement ships only after the returned item is scanned in.",
    "Do not speculate about the causes of a carrier delay.",
    "Gift orders never show prices on the packing slip.",
    "Price matching applies to identical items from listed retailers only.",
]
TOOL_NAMES = [
    ("get_order", "Look up an order by its number and return status, items and dates."),
    ("track_parcel", "Return the carrier's tracking events for a parcel."),
    ("issue_refund", "Refund an order line, fully or partially, to the original payment method."),
    ("update_address", "Change the shipping address of an order that has not shipped."),
    ("get_customer", "Return the customer's profile, tier and preferences."),
    ("search_products", "Search the catalogue by keyword, with price and stock."),
    ("create_ticket", "Open a support ticket for a team, with a summary and priority."),
    ("check_warranty", "Return warranty coverage for a product serial number."),
    ("schedule_pickup", "Book a courier pickup for a return."),
    ("apply_credit", "Add store credit to a customer account."),
    ("cancel_order", "Cancel an order that has not left the warehouse."),
    ("list_returns", "List the customer's open and closed returns."),
    ("get_invoice", "Return the invoice for an order as structured data."),
    ("price_match", "Check a competitor price against the price-match rules."),
    ("send_email", "Send a templated email to the customer."),
    ("loyalty_balance", "Return the customer's loyalty points and their expiry."),
]
TASKS = [
    "Where is my order {n}? It was supposed to arrive yesterday.",
    "Please refund the second item of order {n}, it arrived broken.",
    "Can you change the delivery address for order {n} to my office?",
    "Is the blender from order {n} still under warranty?",
    "I want to cancel order {n} before it ships.",
    "How many loyalty points do I have, and when do they expire? My last order was {n}.",
    "Can I get the invoice for order {n} for my expense report?",
    "A shop nearby sells the lamp from order {n} for less. Can you match it?",
]
SCALES: dict[str, dict[str, int]] = {
    # tokens of system policies, number of tools, turns, tokens per tool result, max reply tokens
    "small": {"system_tokens": 150, "tools": 3, "turns": 4, "result_tokens": 30, "reply_tokens": 16},
    "medium": {"system_tokens": 1000, "tools": 8, "turns": 8, "result_tokens": 150, "reply_tokens": 32},
    "large": {"system_tokens": 4000, "tools": 16, "turns": 10, "result_tokens": 500, "reply_tokens": 48},
}


@dataclass(frozen=True)
class Turn:
    task: str  # U_t, without time or profile: layouts decide where those go
    call: dict[str, Any]  # A_t: an assistant message with one tool call
    result: str  # R_t: the tool's output
    reply: str  # F_t: a scripted final answer
    time: str  # the current time at this request
    credits: int  # a per-request profile value (remaining credits)


@dataclass(frozen=True)
class Scenario:
    policies: str
    tools: list[dict[str, Any]]
    turns: list[Turn]
    reply_tokens: int
    seed: int


def _tool(name: str, description: str, rng: random.Random) -> dict[str, Any]:
    params = {"order_id": {"type": "string"}}
    extra = rng.choice(["reason", "amount", "priority", "note", "locale", "channel"])
    params[extra] = {"type": "string", "description": f"Optional {extra}."}
    parameters = {"type": "object", "properties": params, "required": ["order_id"]}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _result_line(rng: random.Random, order: int, i: int) -> str:
    sku, status = (
        rng.randint(1000, 9999),
        rng.choice(["packed", "shipped", "in transit", "delivered", "returned"]),
    )
    day, hour, minute = rng.randint(1, 29), rng.randint(0, 23), rng.randint(0, 59)
    updated = f"2026-11-{day:02d}T{hour:02d}:{minute:02d}Z"
    fields = f'"order": {order}, "line": {i + 1}, "sku": "SKU-{sku}", "status": "{status}"'
    return f'{{{fields}, "updated": "{updated}"}}'


def build_scenario(
    tokenizer: PreTrainedTokenizerBase,
    scale: str = "small",
    seed: int = 0,
    turns: int | None = None,
    **sizes: int,
) -> Scenario:
    """A scenario at one of the SCALES; keyword sizes (e.g. system_tokens=2000) override the scale's."""
    sizes = SCALES[scale] | sizes
    rng = random.Random(seed)
    policy_order = rng.sample(POLICIES, len(POLICIES))
    numbered = lines_until(
        tokenizer, sizes["system_tokens"], lambda i: f"{i + 1}. {policy_order[i % len(policy_order)]}"
    )
    policies = "You are the support agent of an online shop. Follow these policies:\n" + "\n".join(numbered)
    tools = [_tool(n, d, rng) for n, d in rng.sample(TOOL_NAMES, sizes["tools"])]
    out = _turns(tokenizer, tools, turns or sizes["turns"], sizes["result_tokens"], rng)
    return Scenario(policies, tools, out, sizes["reply_tokens"], seed)


def another_agent(
    tokenizer: PreTrainedTokenizerBase, sc: Scenario, seed: int, scale: str = "small"
) -> Scenario:
    """The same policies and tools (a fleet's shared prefix), with its own seeded tasks, results and times."""
    sizes = SCALES[scale]
    rng = random.Random(f"agent {seed}")
    return Scenario(
        sc.policies,
        sc.tools,
        _turns(tokenizer, sc.tools, len(sc.turns), sizes["result_tokens"], rng),
        sc.reply_tokens,
        seed,
    )


def _turns(
    tokenizer: PreTrainedTokenizerBase,
    tools: list[dict[str, Any]],
    n: int,
    result_tokens: int,
    rng: random.Random,
) -> list[Turn]:
    out: list[Turn] = []
    for t in range(n):
        order = rng.randint(10000, 99999)
        tool = rng.choice(tools)["function"]["name"]
        arguments = {"order_id": str(order)}
        call = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": arguments}}],
        }
        result = lines_until(tokenizer, result_tokens, lambda i, o=order: _result_line(rng, o, i))
        task = rng.choice(TASKS).format(n=order)
        outcome = rng.choice(["on its way", "ready", "done"])
        out.append(
            Turn(
                task=task,
                call=call,
                result="\n".join(result),
                reply=f"I checked order {order} with {tool}: it is {outcome}.",
                time=f"2026-11-30 09:{t * 3 % 60:02d}:{rng.randint(0, 59):02d} UTC",
                credits=500 - 7 * t,
            )
        )
    return out
