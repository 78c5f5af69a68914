"""Prompt regions: which tokens of a rendered chat are the system prompt, the tools, each message, the
status bar, the latest user message, the generation prompt and the generated text.

Found without knowing the template: message i ends where the rendering of messages[:i+1] stops agreeing
with the full rendering (their longest common prefix); the tools are the characters that rendering the
first message with tools adds to rendering it without. Characters map to tokens by tokenizer offsets.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.chat import Message, render_text

STATUS_TAG = "<agent_status>"


@dataclass(frozen=True)
class Region:
    label: str  # e.g. "system", "tools", "user #3", "status", "latest user", "generated"
    kind: str  # system | tools | history | status | latest_user | template | generated
    start: int  # first token index
    end: int  # one past the last token index


@dataclass
class RenderedPrompt:
    token_ids: list[int]
    text: str
    regions: list[Region]

    def with_generated(self, generated: Sequence[int]) -> RenderedPrompt:
        """The prompt followed by generated tokens, which form a region of their own."""
        n = len(self.token_ids)
        tail = [Region("generated", "generated", n, n + len(generated))] if generated else []
        return RenderedPrompt(self.token_ids + list(generated), self.text, self.regions + tail)

    def region_at(self, index: int) -> Region:
        starts = [r.start for r in self.regions]
        return self.regions[bisect.bisect_right(starts, index) - 1]


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _labels(messages: Sequence[Message]) -> list[tuple[str, str]]:
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"
                     and not str(m.get("content", "")).lstrip().startswith(STATUS_TAG)), default=-1)  # fmt: skip
    out = []
    for i, m in enumerate(messages):
        if i == 0 and m["role"] == "system":
            out.append(("system", "system"))
        elif str(m.get("content") or "").lstrip().startswith(STATUS_TAG):
            out.append(("status", "status"))
        elif i == last_user:
            out.append(("latest user", "latest_user"))
        else:
            out.append((f"{m['role']} #{i}", "history"))
    return out


def render_prompt(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None = None,
    **template_options: Any,
) -> RenderedPrompt:
    """Render with the chat template (generation prompt included) and label every token with its region."""
    full = render_text(tokenizer, messages, tools, **template_options)
    # (char_start, label, kind) spans, in order
    spans: list[tuple[int, str, str]] = []
    cursor = 0
    for i, (label, kind) in enumerate(_labels(messages)):
        prefix = render_text(tokenizer, messages[: i + 1], tools, add_generation_prompt=False, **template_options)
        end = max(_common_prefix(prefix, full), cursor)
        spans.append((cursor, label, kind))
        cursor = end
    spans.append((cursor, "generation prompt", "template"))
    if tools:
        first = list(messages[:1])
        bare = render_text(tokenizer, first, None, add_generation_prompt=False, **template_options)
        with_tools = render_text(tokenizer, first, tools, add_generation_prompt=False, **template_options)
        a = _common_prefix(bare, with_tools)
        b = len(with_tools) - _common_prefix(bare[::-1], with_tools[::-1])
        first_label, first_kind = spans[0][1], spans[0][2]
        spans[1:1] = [(a, "tools", "tools"), (max(b, a), first_label, first_kind)]

    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    starts = [s for s, _, _ in spans]
    regions: list[Region] = []
    for t, (char_start, _) in enumerate(enc["offset_mapping"]):
        label, kind = spans[bisect.bisect_right(starts, char_start) - 1][1:]
        if regions and regions[-1].label == label and regions[-1].end == t:
            regions[-1] = Region(label, kind, regions[-1].start, t + 1)
        else:
            regions.append(Region(label, kind, t, t + 1))
    return RenderedPrompt(list(enc["input_ids"]), full, regions)
