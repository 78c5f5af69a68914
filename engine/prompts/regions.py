"""Prompt regions: which tokens of a rendered chat are the system prompt, the tools, each message, the
status bar, the latest user message, the generation prompt and the generated text.

Found without knowing the template: message i ends where the rendering of messages[:i+1] stops agreeing
with the full rendering (their longest common prefix); the tools are the characters that rendering the
first message with tools adds to rendering it without; a system prompt the template writes on its own when
the first message is not a system message (Qwen2.5's and SmolLM2's do) is what rendering that message alone
has before the message's own rendering (what it adds after a system message). Characters map to tokens by
tokenizer offsets.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.prompts.chat import Message, render_text
from engine.prompts.literal import render_chat, tokenize_chat
from engine.prompts.messages import validate_messages, validate_tools

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

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


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest common prefix of two sequences of one type (strings, token-id lists), by
    bisection over slice comparisons: C speed on long prompts."""
    lo, hi = 0, min(len(a), len(b))
    while (
        lo < hi
    ):  # invariant: a[:lo] == b[:lo], and they differ before hi + 1 unless hi is the shorter length
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def marked_text(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int], index: int, width: int) -> str:
    """The text of `width` tokens either side of token `index`, the spot marked with ⟂."""
    before, after = ids[max(0, index - width) : index], ids[index : index + width]
    return f"{tokenizer.decode(before)}⟂{tokenizer.decode(after)}"


def _common_suffix(a: str, b: str) -> int:
    return common_prefix(a[::-1], b[::-1])


def _default_system_end(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    **template_options: Any,
) -> int:
    """Characters of the system prompt written before a first message that is not one (0: none): the
    template's default, or the one `render_text` adds to carry tools a template cannot place."""
    if messages[0]["role"] == "system":
        return 0
    system: Message = {"role": "system", "content": "S"}

    def render(msgs: list[Message]) -> str:
        return render_text(tokenizer, msgs, tools, add_generation_prompt=False, **template_options)

    alone, system_only, after_system = (
        render(list(messages[:1])),
        render([system]),
        render([system, messages[0]]),
    )
    own = after_system[common_prefix(system_only, after_system) :]  # the first message's own rendering
    # A template that renders the first message differently after a system message: no default found.
    return len(alone) - len(own) if alone.endswith(own) else 0


def _tools_span(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]],
    **template_options: Any,
) -> tuple[int, int]:
    """Characters [a, b) that rendering the first message with tools adds to rendering it without."""
    first = list(messages[:1])
    bare = render_text(tokenizer, first, None, add_generation_prompt=False, **template_options)
    with_tools = render_text(tokenizer, first, tools, add_generation_prompt=False, **template_options)
    a = common_prefix(bare, with_tools)
    return a, max(len(with_tools) - _common_suffix(bare, with_tools), a)


def _labels(messages: Sequence[Message]) -> list[tuple[str, str]]:
    users = [
        i
        for i, m in enumerate(messages)
        if m["role"] == "user" and not str(m.get("content", "")).lstrip().startswith(STATUS_TAG)
    ]
    last_user = max(users, default=-1)
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


def message_end(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    i: int,
    tools: Sequence[dict[str, Any]] | None,
    full: str,
    **template_options: Any,
) -> int:
    """Characters of `full` (the whole rendered prompt) that rendering messages[:i+1] agrees with."""
    prefix = render_text(tokenizer, messages[: i + 1], tools, add_generation_prompt=False, **template_options)
    return common_prefix(prefix, full)


Head = tuple[int, tuple[int, int] | None]  # (end of the default system prompt, the tools' characters)


def prompt_head(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    **template_options: Any,
) -> Head:
    """What a rendering holds before its first message: the default system prompt's end (0: none) and the
    tools' characters (None: no tools). It depends on the first message and the tools only."""
    tools_span = _tools_span(tokenizer, messages, tools, **template_options) if tools else None
    default_end = _default_system_end(tokenizer, messages, tools, **template_options)
    if default_end and tools_span:  # the tools sit inside the default system prompt
        default_end = max(default_end, tools_span[1])
    return default_end, tools_span


def char_spans(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    full: str,
    ends: Sequence[int] | None = None,
    head: Head | None = None,
    **template_options: Any,
) -> list[tuple[int, str, str]]:
    """(first character, label, kind) of every region of the rendered prompt `full`, in order. `ends`, each
    message's `message_end`, and `head` (`prompt_head`) may be passed where they are known already."""
    default_end, tools_span = (
        head if head is not None else prompt_head(tokenizer, messages, tools, **template_options)
    )
    spans: list[tuple[int, str, str]] = [(0, "default system", "system")] if default_end else []
    cursor = default_end
    for i, (label, kind) in enumerate(_labels(messages)):
        end = (
            ends[i]
            if ends is not None
            else message_end(tokenizer, messages, i, tools, full, **template_options)
        )
        spans.append((cursor, label, kind))
        cursor = max(end, cursor)
    spans.append((cursor, "generation prompt", "template"))
    if tools_span:  # split the first span (the system prompt) around the tools
        a, b = tools_span
        spans[1:1] = [(a, "tools", "tools"), (b, *spans[0][1:])]
    return spans


def render_prompt(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None = None,
    **template_options: Any,
) -> RenderedPrompt:
    """Render with the chat template (generation prompt included) and label every token with its region."""
    messages, tools = validate_messages(messages), validate_tools(tools)  # multi-part content joined
    chat = render_chat(tokenizer, messages, tools, **template_options)
    spans = char_spans(tokenizer, messages, tools, chat.text, **template_options)
    ids, offsets = tokenize_chat(tokenizer, chat.text, chat.literal)  # a message's control strings are text
    return RenderedPrompt(ids, chat.text, token_regions(spans, offsets))


def token_regions(spans: Sequence[tuple[int, str, str]], offsets: Sequence[tuple[int, int]]) -> list[Region]:
    """Tokens (by their character offsets) grouped into the regions of `char_spans`."""
    starts = [s for s, _, _ in spans]
    regions: list[Region] = []
    for t, (char_start, _) in enumerate(offsets):
        label, kind = spans[bisect.bisect_right(starts, char_start) - 1][1:]
        if regions and regions[-1].label == label and regions[-1].end == t:
            regions[-1] = Region(label, kind, regions[-1].start, t + 1)
        else:
            regions.append(Region(label, kind, t, t + 1))
    return regions


def token_span(
    spans: Sequence[tuple[int, str, str]], offsets: Sequence[tuple[int, int]], index: int
) -> tuple[str, str]:
    """(label, kind) of the region of `token_regions` that token `index` lies in (past the last token: the
    last token's), found without grouping every token."""
    starts = [s for s, _, _ in spans]
    _, label, kind = spans[bisect.bisect_right(starts, offsets[min(index, len(offsets) - 1)][0]) - 1]
    return label, kind
