"""Prompt layouts: how one scenario turn becomes the chat messages sent on that turn.

The baseline, `stable-first`, keeps the system prompt and tools fixed and puts the per-request values
(current time, remaining credits) in the newest user message. Every other layout changes exactly one
thing, so that only the variable under test differs: same task, same content, the user's request in
the same place (last user message, followed by the tool call and its result).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from engine.bench.workloads.request import Request
from engine.bench.workloads.scenario import Scenario, Turn
from engine.prompts.chat import Message

WINDOW_MESSAGES = 6  # sliding-window: history messages kept


def _user(turn: Turn, time: bool = True, profile: bool = True) -> Message:
    lines = [turn.task]
    if time:
        lines.append(f"Current time: {turn.time}")
    if profile:
        lines.append(f"Profile: remaining credits {turn.credits}")
    return {"role": "user", "content": "\n\n".join(lines)}


def _exchange(turn: Turn, user: Message) -> list[Message]:
    """The request's tail: the user's task, the assistant's tool call and the tool's result."""
    return [user, turn.call, {"role": "tool", "content": turn.result}]


def _history(
    sc: Scenario, t: int, replies: list[str], user: Callable[[Turn], Message] = _user
) -> list[Message]:
    msgs: list[Message] = []
    for turn, reply in zip(sc.turns[:t], replies[:t], strict=True):
        msgs += _exchange(turn, user(turn)) + [{"role": "assistant", "content": reply}]
    return msgs


def _system(text: str) -> Message:
    return {"role": "system", "content": text}


def _request(sc: Scenario, t: int, replies: list[str], system: str, **user_options: bool) -> Request:
    """System prompt `system`, the history, then this turn's exchange; user messages built with
    `user_options`."""

    def user(turn: Turn) -> Message:
        return _user(turn, **user_options)

    history = _history(sc, t, replies, user)
    return Request([_system(system), *history, *_exchange(sc.turns[t], user(sc.turns[t]))], sc.tools)


def stable_first(sc: Scenario, t: int, replies: list[str]) -> Request:
    return _request(sc, t, replies, sc.policies)


def timestamp_first(sc: Scenario, t: int, replies: list[str]) -> Request:
    return _request(sc, t, replies, f"Current time: {sc.turns[t].time}\n{sc.policies}", time=False)


def dynamic_profile(sc: Scenario, t: int, replies: list[str]) -> Request:
    system = f"{sc.policies}\nProfile: remaining credits {sc.turns[t].credits}"
    return _request(sc, t, replies, system, profile=False)


def _shuffled(sc: Scenario, t: int) -> list[dict]:
    """A seeded order of the tools for request t, never the same as request t-1's (for 2+ tools)."""
    order = list(sc.tools)
    for i in range(t + 1):
        rng, previous = random.Random(sc.seed * 1000 + i), order
        while order == previous and len(sc.tools) > 1:
            order = rng.sample(sc.tools, len(sc.tools))
    return order


def shuffled_tools(sc: Scenario, t: int, replies: list[str]) -> Request:
    return Request(stable_first(sc, t, replies).messages, _shuffled(sc, t))


def sliding_window(sc: Scenario, t: int, replies: list[str]) -> Request:
    history = _history(sc, t, replies)
    start = max(0, len(history) - WINDOW_MESSAGES)
    while start < len(history) and history[start]["role"] == "tool":  # never keep a result without its call
        start += 1
    return Request(
        [_system(sc.policies), *history[start:], *_exchange(sc.turns[t], _user(sc.turns[t]))], sc.tools
    )


def _as_text(m: Message) -> str:
    if m.get("tool_calls"):
        fn = m["tool_calls"][0]["function"]
        return f"ASSISTANT: [calls {fn['name']} {json.dumps(fn['arguments'])}]"
    return f"{'TOOL' if m['role'] == 'tool' else m['role'].upper()}: {m['content']}"


def text_format(sc: Scenario, t: int, replies: list[str]) -> Request:
    tail = stable_first(sc, t, replies).messages[1:]
    return Request(
        [_system(sc.policies), {"role": "user", "content": "\n".join(_as_text(m) for m in tail)}], sc.tools
    )


LAYOUTS: dict[str, Callable[[Scenario, int, list[str]], Request]] = {
    "stable-first": stable_first,
    "timestamp-first": timestamp_first,
    "dynamic-profile": dynamic_profile,
    "shuffled-tools": shuffled_tools,
    "sliding-window": sliding_window,
    "text-format": text_format,
}
