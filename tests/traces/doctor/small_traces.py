"""Small traces of one cause each, for the doctor's tests: a few requests of one session in the engine's
(OpenAI) message form."""

from __future__ import annotations

from dataclasses import replace

from engine.traces.request import TraceRequest

RULES = "You are a shop assistant.\nAnswer briefly.\nNever guess prices."
TOOLS = [
    {
        "type": "function",
        "function": {"name": n, "description": f"{n} tool", "parameters": {"type": "object"}},
    }
    for n in ("get_order", "track_parcel", "issue_refund")
]


def system(text: str) -> dict:
    return {"role": "system", "content": text}


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def conversation(turns: int) -> list[list[dict]]:
    """Turn t's non-system messages: the history (user, assistant pairs) and turn t's user message."""
    out, history = [], []
    for t in range(turns):
        out.append([*history, user(f"question {t}")])
        history += [user(f"question {t}"), assistant(f"answer {t}")]
    return out


def trace(
    systems: list[str], tools: list[list[dict]] | None = None, histories: list[list[dict]] | None = None
) -> list[TraceRequest]:
    histories = histories or conversation(len(systems))
    tools = tools or [TOOLS] * len(systems)
    return [
        TraceRequest([system(s), *h], t, timestamp=float(i), session="s")
        for i, (s, t, h) in enumerate(zip(systems, tools, histories, strict=True))
    ]


def clock_trace() -> list[TraceRequest]:
    """tau-bench's way: the current time as the system prompt's first line."""
    return trace([f"The current time is 2024-05-15 15:0{i}:00 EST.\n{RULES}" for i in range(4)])


def path_trace() -> list[TraceRequest]:
    return trace([f"{RULES}\nWorking directory: /home/ann/projects/app{i}/src" for i in range(3)])


def nonce_trace() -> list[TraceRequest]:
    nonces = ["a3f9c2e1", "7b0d44fe", "c81e9a07"]
    return trace([f"x-billing-header: cch={n};\n{RULES}" for n in nonces])


def counter_trace() -> list[TraceRequest]:
    return trace([f"{RULES}\nRemaining credits: {500 - 7 * i}" for i in range(3)])


def reordered_tools_trace() -> list[TraceRequest]:
    return trace([RULES] * 3, [TOOLS, TOOLS[::-1], [TOOLS[1], TOOLS[0], TOOLS[2]]])


def rerendered_trace() -> list[TraceRequest]:
    """The assistant's reasoning stripped from the history when it is sent again."""
    thought = assistant("<think>look it up</think>answer 0")
    histories = [
        [user("question 0")],
        [user("question 0"), thought, user("question 1")],
        [
            user("question 0"),
            assistant("answer 0"),
            user("question 1"),
            assistant("answer 1"),
            user("question 2"),
        ],
    ]
    return trace([RULES] * 3, histories=histories)


def window_trace() -> list[TraceRequest]:
    """A sliding window: the oldest exchange dropped from the third request on."""
    h = conversation(4)
    return trace([RULES] * 4, histories=[h[0], h[1], h[2][2:], h[3][4:]])


def model_swap_trace() -> list[TraceRequest]:
    reqs = trace([RULES, RULES])
    return [replace(reqs[0], model="model-a"), replace(reqs[1], model="model-b")]


def tool_change_trace() -> list[TraceRequest]:
    changed = [
        TOOLS[0],
        {**TOOLS[1], "function": {**TOOLS[1]["function"], "description": "track it"}},
        TOOLS[2],
    ]
    return trace([RULES, RULES], [TOOLS, changed])
