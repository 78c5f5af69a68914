"""A four-request billing trace in today's OpenAI-chat format: requests 2 and 3 extend the previous one,
request 3 carries request 2's reply, request 4 changes the system prompt."""

from __future__ import annotations

SYSTEM = "You are a billing assistant. " * 30
LOOKUP = {"name": "lookup", "arguments": '{"invoice": "INV-7"}'}  # OpenAI sends arguments as a JSON string
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "type": "function", "function": LOOKUP}],
}


def trace_turns() -> list[dict]:
    t1 = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What do I owe?"}]
    t2 = t1 + [CALL, {"role": "tool", "tool_call_id": "c1", "content": '{"due": 120}'}]
    t3 = t2 + [{"role": "assistant", "content": "You owe 120 EUR."}, {"role": "user", "content": "Pay it."}]
    t4 = [{"role": "system", "content": SYSTEM.replace("billing", "payments", 1)}] + t3[1:]
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    return [{"messages": m, "tools": tools} for m in (t1, t2, t3, t4)]
