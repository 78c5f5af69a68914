"""The example traces shipped inside the package (made by scripts/make_trace_examples.py): one short
tool-calling agent session of ours in every request-body format, and a small generated hash-id
(Mooncake-format) trace of agent traffic. `example:<format>` names one wherever a trace
path is taken, so an installed package can try them in one line."""

from __future__ import annotations

from pathlib import Path

from engine.errors import TraceError

EXAMPLES_DIR = Path(__file__).parent / "examples"
EXAMPLES = {
    "openai-chat": EXAMPLES_DIR / "agent_session.openai-chat.jsonl",
    "openai-responses": EXAMPLES_DIR / "agent_session.openai-responses.json",
    "anthropic": EXAMPLES_DIR / "agent_session.anthropic.json",
    "mooncake": EXAMPLES_DIR / "agent_traffic.mooncake.jsonl",
}
PREFIX = "example:"


def trace_path(name: str | Path) -> Path:
    """A trace path as given, or the shipped example that `example:<format>` names."""
    text = str(name)
    if not text.startswith(PREFIX):
        return Path(name)
    fmt = text.removeprefix(PREFIX)
    if fmt not in EXAMPLES:
        raise TraceError(
            f"no shipped example {text!r}; choose from {', '.join(PREFIX + f for f in EXAMPLES)}"
        )
    return EXAMPLES[fmt]
