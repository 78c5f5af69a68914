"""Write the shipped example traces: one short tool-calling agent session (ours), in each request-body
format, and a small generated hash-id (Mooncake-format) trace of agent traffic.

    python scripts/make_trace_examples.py   # -> engine/traces/examples/agent_session.*.json[l], agent_traffic.mooncake.jsonl

The session: a coding agent fixes a failing date-parsing test in six requests. Between requests 4 and 5 the
user pauses for 7 minutes (past Anthropic's 5-minute TTL and OpenAI's shortest retention), and request 6's
system prompt carries a refreshed clock line: the divergence `--analyze` should name. The Anthropic form
marks the system prompt and the last message with `cache_control` (the usual moving breakpoint).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from engine.traces.synthetic import synthetic_hash_trace

OUT = Path(__file__).resolve().parents[1] / "engine" / "traces" / "examples"
HASH_SESSIONS = 24  # sessions of the hash-id example
SESSION = "fix-date-parser"
START = dt.datetime(2026, 11, 30, 9, 3, 0, tzinfo=dt.timezone.utc)
SECONDS = [0, 9, 21, 40, 460, 475]  # when each request was sent: a 7-minute pause before request 5
RULES = [
    "Read a file before you edit it; never edit a file you have not read in this session.",
    "Run the narrowest test that covers your change first, then the module's whole test file.",
    "Keep changes minimal: fix the bug the user reported, not the neighbouring code you would write "
    "differently.",
    "Never delete or weaken a test to make it pass; if a test is wrong, say why and ask before changing it.",
    "Quote exact error messages when you report a failure, with the command that produced them.",
    "Prefer the standard library; add a dependency only when the user asks for it.",
    "Dates and times: parse with explicit formats, keep time zones, never compare naive and aware datetimes.",
    "When a tool call fails, read its error, change one thing, and try again at most twice before asking.",
    "Summarize what you changed in one short paragraph at the end, naming every file you touched.",
    "Do not print secrets, tokens or the contents of environment files, even if a tool returns them.",
]
SYSTEM = (
    "You are a careful software engineering agent working in a Python repository on the user's machine. "
    "You can read files, edit them and run the test suite through the tools below. Work step by step: "
    "understand the failure, find the cause, make the smallest fix, and prove it with the tests.\n\n"
    + "\n\n".join(
        f"## Rule {i + 1}\n{rule} "
        + " ".join(
            f"(Applies to every file type, including {kind} files.)"
            for kind in ("Python", "configuration", "test", "data")
        )
        for i, rule in enumerate(RULES)
    )
    + "\n\nRepository: dateparse-lite (a small library that parses human-written dates)."
    + "\nCurrent time: {clock}"
)
TOOLS = [
    ("read_file", "Read a UTF-8 text file of the repository.", {"path": {"type": "string"}}),
    ("run_tests", "Run pytest on a path or node id and return its output.", {"target": {"type": "string"}}),
    (
        "edit_file",
        "Replace one exact snippet of a file by another.",
        {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
    ),
]
SOURCE = 'def parse_iso(text: str) -> datetime:\n    return datetime.strptime(text, "%Y-%m-%d %H:%M")\n'
FAILURE = "FAILED tests/test_iso.py::test_parse_dates - ValueError: unconverted data remains: Z"
# After the first user message, in order: ("call", (assistant text, [(call id, tool, arguments)])),
# ("result", (call id, tool, output)), ("say", assistant text) or ("user", text)
STEPS: list[tuple[str, Any]] = [
    ("call", ("", [("call_1", "read_file", {"path": "dateparse/iso.py"})])),
    ("result", ("call_1", "read_file", SOURCE)),
    (
        "call",
        (
            "The format has no zone. Let me run the test.",
            [("call_2", "run_tests", {"target": "tests/test_iso.py"})],
        ),
    ),
    ("result", ("call_2", "run_tests", FAILURE)),
    (
        "call",
        ("", [("call_3", "edit_file", {"path": "dateparse/iso.py", "old": '%H:%M")', "new": '%H:%M%z")'})]),
    ),
    ("result", ("call_3", "edit_file", "ok: 1 replacement")),
    (
        "say",
        "Fixed: `parse_iso` now reads the zone (`%z`), so `...Z` parses as UTC. Touched dateparse/iso.py.",
    ),
    ("user", "Thanks. Also add a line to CHANGELOG.md about it."),
    (
        "call",
        (
            "",
            [
                (
                    "call_4",
                    "edit_file",
                    {
                        "path": "CHANGELOG.md",
                        "old": "## Unreleased\n",
                        "new": "## Unreleased\n- parse_iso keeps the time zone\n",
                    },
                )
            ],
        ),
    ),
    ("result", ("call_4", "edit_file", "ok: 1 replacement")),
]
# request n carries STEPS[:REQUEST_ENDS[n]]; STEPS[REQUEST_ENDS[n]] is its reply
REQUEST_ENDS = [0, 2, 4, 6, 8, 10]


def clock(n: int) -> str:
    return (START + dt.timedelta(minutes=8 * (n == 5))).strftime(
        "%Y-%m-%d %H:%M UTC"
    )  # refreshed on request 6


def chat_messages(n: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM.format(clock=clock(n))},
        {"role": "user", "content": "tests/test_iso.py fails on '2026-11-30 09:00Z'. Fix it."},
    ]
    for kind, data in STEPS[: REQUEST_ENDS[n]]:
        if kind == "call":
            calls = [
                {"id": i, "type": "function", "function": {"name": f, "arguments": json.dumps(a)}}
                for i, f, a in data[1]
            ]
            msgs.append({"role": "assistant", "content": data[0] or None, "tool_calls": calls})
        elif kind == "result":
            msgs.append({"role": "tool", "tool_call_id": data[0], "name": data[1], "content": data[2]})
        else:
            msgs.append({"role": "assistant" if kind == "say" else "user", "content": data})
    return msgs


def responses_body(n: int) -> dict[str, Any]:
    system, *rest = chat_messages(n)
    items: list[dict[str, Any]] = []
    for m in rest:
        if m["role"] == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]}
            )
            continue
        if m.get("content"):
            part = "output_text" if m["role"] == "assistant" else "input_text"
            items.append(
                {"type": "message", "role": m["role"], "content": [{"type": part, "text": m["content"]}]}
            )
        items += [
            {
                "type": "function_call",
                "call_id": c["id"],
                "name": c["function"]["name"],
                "arguments": c["function"]["arguments"],
            }
            for c in m.get("tool_calls", [])
        ]
    tools = [
        {"type": "function", "name": name, "description": d, "parameters": _schema(p)} for name, d, p in TOOLS
    ]
    return {"model": "gpt-4.1", "instructions": system["content"], "input": items, "tools": tools}


def anthropic_body(n: int) -> dict[str, Any]:
    system, *rest = chat_messages(n)
    messages: list[dict[str, Any]] = []
    for m in rest:
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"]}
            if (
                messages
                and messages[-1]["role"] == "user"
                and messages[-1]["content"][-1]["type"] == "tool_result"
            ):
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
            continue
        blocks = [{"type": "text", "text": m["content"]}] if m.get("content") else []
        blocks += [
            {
                "type": "tool_use",
                "id": c["id"],
                "name": c["function"]["name"],
                "input": json.loads(c["function"]["arguments"]),
            }
            for c in m.get("tool_calls", [])
        ]
        messages.append({"role": m["role"], "content": blocks})
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}  # the moving breakpoint
    tools = [{"name": name, "description": d, "input_schema": _schema(p)} for name, d, p in TOOLS]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "tools": tools,
        "system": [{"type": "text", "text": system["content"], "cache_control": {"type": "ephemeral"}}],
        "messages": messages,
    }


def _schema(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props)}


def chat_body(n: int) -> dict[str, Any]:
    tools = [
        {"type": "function", "function": {"name": name, "description": d, "parameters": _schema(p)}}
        for name, d, p in TOOLS
    ]
    return {"model": "gpt-4.1", "messages": chat_messages(n), "tools": tools}


def envelope(n: int, body: dict[str, Any]) -> dict[str, Any]:
    when = (START + dt.timedelta(seconds=SECONDS[n])).isoformat().replace("+00:00", "Z")
    return {"timestamp": when, "session_id": SESSION, "body": body}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    n = range(len(REQUEST_ENDS))
    (OUT / "agent_session.openai-chat.jsonl").write_text(
        "".join(json.dumps(envelope(i, chat_body(i))) + "\n" for i in n)
    )
    for name, body in (("openai-responses", responses_body), ("anthropic", anthropic_body)):
        (OUT / f"agent_session.{name}.json").write_text(
            json.dumps([envelope(i, body(i)) for i in n], indent=1) + "\n"
        )
    hashed = synthetic_hash_trace(HASH_SESSIONS, seed=0)
    (OUT / "agent_traffic.mooncake.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "timestamp": round(r.time_s * 1000),
                    "input_length": r.input_length,
                    "output_length": r.output_length,
                    "hash_ids": list(r.hash_ids),
                }
            )
            + "\n"
            for r in hashed.requests
        )
    )
    print(
        f"wrote {len(REQUEST_ENDS)} requests x 3 formats and {len(hashed.requests)} hash-id requests to {OUT}"
    )


if __name__ == "__main__":
    main()
