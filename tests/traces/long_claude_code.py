"""A long Claude Code 2.1 project written from the format, for the reader's and the analysis' cost at scale:
a session of user prompts, each answered by a run of responses (thinking, text, one to three tool calls, a
line per block, the first a streaming partial), tool results of varied size (parallel ones written out of
call order, each hanging off its call's line, some through a hook's progress record), attachments,
`turn_duration` records, subagents' sidechains in `subagents/` (a Task call's result in the main session),
and automatic compaction (a boundary and a summary) once the chain's text passes `context_chars`, as Claude
Code compacts near its context limit. Deterministic for a seed.

Run as a script to write one: `python -m tests.traces.long_claude_code FOLDER LINES [CONTEXT_CHARS]`.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

from tests.traces.agent_common import anthropic_usage, tool_result, write_jsonl
from tests.traces.write_claude_code import ClaudeCode21

CONTEXT_CHARS = 300_000  # ~75k tokens of transcript text between compactions (plus the unrecorded prompt)
WORDS = "parse format date time zone offset value error test fixture module import return check list".split()


def _code(rng: random.Random, chars: int) -> str:
    """Source-like text of about `chars` characters."""
    lines, n = [], 0
    while n < chars:
        name, arg = rng.choice(WORDS), rng.choice(WORDS)
        line = f"    def {name}_{rng.randrange(1000)}(self, {arg}: str) -> str:  # {rng.choice(WORDS)}"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


class _Writer:
    """The records of the main session and its subagents, with the chain's text counted for compaction."""

    def __init__(self, folder: Path, seed: int, context_chars: int) -> None:
        self.folder, self.rng, self.context_chars = folder, random.Random(seed), context_chars
        self.main = ClaudeCode21("session-long")
        self.sides: list[ClaudeCode21] = []
        self.t, self.calls, self.responses, self.chain_chars = 1.0, 0, 0, 0

    def lines(self) -> int:
        return len(self.main.rows) + sum(len(s.rows) for s in self.sides)

    def _tick(self, seconds: float) -> float:
        self.t += seconds
        return self.t

    def _response(self, s: ClaudeCode21, blocks: list[dict[str, Any]]) -> list[str]:
        """One response (a line per block); the uuids of its lines."""
        self.responses += 1
        before = len(s.rows)
        read = self.chain_chars // 4
        s.response(self._tick(2.0), f"msg_{self.responses:06d}", blocks, anthropic_usage(read, 200))
        self.chain_chars += sum(len(json.dumps(b)) for b in blocks)
        return [r["uuid"] for r in s.rows[before:]]

    def _call(self, name: str, **args: Any) -> dict[str, Any]:
        self.calls += 1
        return {"type": "tool_use", "id": f"toolu_{self.calls:06d}", "name": name, "input": args}

    def _step(self, s: ClaudeCode21, parallel: int) -> None:
        """A response with `parallel` tool calls and their results, written out of call order."""
        rng = self.rng
        calls = [self._call("Read", file_path=f"src/{rng.choice(WORDS)}_{k}.py") for k in range(parallel)]
        thinking = {"type": "thinking", "thinking": _sentence(rng, 12), "signature": "sig"}
        blocks = [thinking] if rng.random() < 0.3 else []
        lines = self._response(s, [*blocks, {"type": "text", "text": _sentence(rng, 10)}, *calls])[-parallel:]
        order = list(range(parallel))
        rng.shuffle(order)
        for k in order:
            content = _code(rng, rng.choice((200, 600, 1500, 4000)))
            if parallel > 1 and rng.random() < 0.3:  # through a hook's progress record
                s._add("progress", self._tick(0.1), parent=lines[k], data={"type": "hook_progress"})
                s.user(
                    self._tick(0.2), tool_result(calls[k]["id"], content), sourceToolAssistantUUID=lines[k]
                )
            else:
                parent = lines[k] if parallel > 1 else ""
                s.user(self._tick(0.3), tool_result(calls[k]["id"], content), parent=parent)
            self.chain_chars += len(content)

    def _subagent(self) -> None:
        """A Task call whose subagent runs a few steps in a sidechain file of its own."""
        agent = f"a{len(self.sides):04d}"
        call = self._call("Task", description="search", prompt=_sentence(self.rng, 8))
        self._response(self.main, [call])
        side = ClaudeCode21("session-long", isSidechain=True, agentId=agent)
        side.prefix = f"agent-{agent}"
        side.user(self._tick(0.5), call["input"]["prompt"])
        saved = self.chain_chars
        for _ in range(self.rng.randrange(1, 4)):
            self._step(side, 1)
        self._response(side, [{"type": "text", "text": _sentence(self.rng, 15)}])
        self.chain_chars = saved
        self.sides.append(side)
        self.main.user(self._tick(0.5), tool_result(call["id"], _sentence(self.rng, 30)))

    def _compact(self) -> None:
        s = self.main
        boundary = s._add(
            "system",
            self._tick(5.0),
            parent=None,
            subtype="compact_boundary",
            content="Conversation compacted",
            logicalParentUuid=s.last,
            compactMetadata={"trigger": "auto", "preTokens": self.chain_chars // 4},
        )
        summary = "This session is being continued from a previous conversation. " + _sentence(self.rng, 60)
        s.user(self._tick(0.1), summary, parent=boundary, isCompactSummary=True)
        self.chain_chars = len(summary)

    def turn(self) -> None:
        """A user prompt, the agent's steps, its final answer."""
        s, rng = self.main, self.rng
        s.other("queue-operation", self.t, operation="enqueue", content="next")
        prompt = _sentence(rng, rng.randrange(5, 40))
        s.user(self._tick(rng.choice((5.0, 30.0, 400.0))), prompt, promptId=f"p{self.responses}")
        self.chain_chars += len(prompt)
        if rng.random() < 0.3:
            s.attachment(self._tick(0.1), {"type": "edited_text_file", "filename": "a.py", "snippet": "x"})
        for _ in range(rng.randrange(1, 8)):
            if rng.random() < 0.1:
                self._subagent()
            else:
                self._step(s, rng.choice((1, 1, 1, 2, 3)))
            if self.chain_chars > self.context_chars:
                self._compact()
        self._response(s, [{"type": "text", "text": _sentence(rng, 25)}])
        s._add("system", self._tick(0.1), subtype="turn_duration", durationMs=9000)

    def write(self) -> Path:
        write_jsonl(self.folder / "session-long.jsonl", self.main.rows)
        for side in self.sides:
            write_jsonl(self.folder / "session-long" / "subagents" / f"{side.prefix}.jsonl", side.rows)
        return self.folder


def long_claude_code_project(
    folder: Path, lines: int, seed: int = 0, context_chars: int = CONTEXT_CHARS
) -> Path:
    """A project of at least `lines` transcript lines (main session and subagents together)."""
    writer = _Writer(folder, seed, context_chars)
    while writer.lines() < lines:
        writer.turn()
    return writer.write()


if __name__ == "__main__":
    where, count = Path(sys.argv[1]), int(sys.argv[2])
    chars = int(sys.argv[3]) if len(sys.argv) > 3 else CONTEXT_CHARS
    long_claude_code_project(where, count, context_chars=chars)
    print(f"wrote {where}")
