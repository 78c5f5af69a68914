"""Scripted replies (`engine.serve --replies agent|script:FILE`): what each reply says comes from a script,
not from sampling, so that a real agent finishes a real session on weights that never end a reply (synthetic
ones) or never call a tool. The reply's tokens are forced through the engine (`Engine.add_request(forced=)`):
its prefill and every decode step run as for a sampled reply, so TTFT, cached tokens and decode cost are the
engine's; only the token appended at each step is the script's.

- `agent`: a harmless tool call the client offered — `Glob` of the markdown files, else the shell's `ls`
  (Claude Code's `Bash`, Codex's `exec_command` or `shell`), else the first function offered, its required
  arguments filled from its schema — then, once a tool's result comes back, a short final answer. A request
  that offers no tools gets that answer.
- `script:FILE`: a JSON Lines file of replies: each line a string (the reply's text), an object
  `{"content": TEXT, "tool_calls": [{"name": NAME, "arguments": {...}}]}` (both rendered by the chat
  template and tokenized), or `{"token_ids": [ID, ...]}`: exactly these tokens, then the end-of-turn token
  (a reply as a model may sample it and no tokenizer writes it: a character the tokenizer's normalization
  rewrites, text cut into other tokens). A request whose conversation holds n assistant turns gets line n
  (cycling past the last), so a two-line file (a call, an answer) scripts every task of a session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import InvalidArgumentError
from engine.prompts.messages import Message

FINAL_ANSWER = "Done: the tool ran and its result is above. (A scripted reply: kvtestbed --replies agent.)"
NO_TOOLS_ANSWER = "A scripted reply (kvtestbed --replies agent)."
# (tool name, arguments) tried in order: read-only calls the clients that offer them know
KNOWN_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("Glob", {"pattern": "*.md"}),
    ("Bash", {"command": "ls", "description": "List the files in the working directory"}),
    ("exec_command", {"cmd": "ls"}),
    ("shell", {"command": ["ls"]}),
    ("shell_command", {"command": "ls"}),
)
SCHEMA_DEFAULTS = {"string": "example", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}


@dataclass(frozen=True)
class ReplyScript:
    name: str  # how the cache report and the record name it: "agent" or "script:FILE"
    replies: tuple[Message, ...] = ()  # a file's replies; empty: the agent script

    def reply(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> Message:
        """The assistant message that answers this conversation."""
        if self.replies:
            turns = sum(1 for m in messages if m["role"] == "assistant")
            return self.replies[turns % len(self.replies)]
        if messages and messages[-1]["role"] == "tool":
            return {"role": "assistant", "content": FINAL_ANSWER}
        call = harmless_call(tools or [])
        if call is None:
            return {"role": "assistant", "content": NO_TOOLS_ANSWER}
        return {"role": "assistant", "content": "", "tool_calls": [call]}


def harmless_call(tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A call of a known read-only tool among those offered, else of the first function, else None."""
    functions = {
        fn["name"]: fn for fn in (t.get("function", t) for t in tools) if isinstance(fn.get("name"), str)
    }
    for name, arguments in KNOWN_CALLS:
        if name in functions:
            return _call(name, arguments)
    if not functions:
        return None
    first = next(iter(functions.values()))
    schema = first.get("parameters") or first.get("input_schema") or {}
    properties = schema.get("properties") or {}
    arguments = {
        key: _example(properties.get(key) or {})
        for key in schema.get("required") or []
        if isinstance(key, str)
    }
    return _call(first["name"], arguments)


def _example(schema: dict[str, Any]) -> Any:
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    return SCHEMA_DEFAULTS.get(kind[0] if isinstance(kind, list) and kind else kind, "example")


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def parse_replies(value: str) -> ReplyScript | None:
    """--replies: `model` (None: the model writes them), `agent`, or `script:FILE` (read and checked now)."""
    if value == "model":
        return None
    if value == "agent":
        return ReplyScript("agent")
    if not value.startswith("script:"):
        raise InvalidArgumentError(f"--replies {value}: expected model, agent or script:FILE")
    path = Path(value.removeprefix("script:"))
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"--replies {value}: cannot read {path}: {e}") from None
    if not lines:
        raise InvalidArgumentError(f"--replies {value}: {path} holds no replies (one JSON value a line)")
    return ReplyScript(value, tuple(_reply(value, n, line) for n, line in enumerate(lines, 1)))


def _reply(flag: str, n: int, line: str) -> Message:
    """One line of a replies file as an assistant message (one clear line naming the line where it is wrong)."""
    try:
        item = json.loads(line)
    except json.JSONDecodeError as e:
        raise InvalidArgumentError(f"--replies {flag}: line {n} is not JSON: {e}") from None
    if isinstance(item, str):
        return {"role": "assistant", "content": item}
    ids = item.get("token_ids") if isinstance(item, dict) else None
    if isinstance(ids, list) and ids and all(type(i) is int and i >= 0 for i in ids):
        return {"role": "assistant", "content": "", "token_ids": ids}
    calls = item.get("tool_calls") if isinstance(item, dict) else None
    content = item.get("content", "") if isinstance(item, dict) else None
    ok_calls = isinstance(calls, list | type(None)) and all(
        isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("arguments", {}), dict)
        for c in calls or []
    )
    if not isinstance(content, str) or not ok_calls or not (content or calls):
        raise InvalidArgumentError(
            f"--replies {flag}: line {n} must be a string, "
            '{"content": TEXT, "tool_calls": [{"name": NAME, "arguments": {...}}]} with text or calls, '
            'or {"token_ids": [ID, ...]}'
        )
    message: Message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [_call(c["name"], c.get("arguments", {})) for c in calls]
    return message
