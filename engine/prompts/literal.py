"""Control tokens a client sends are text: a user who writes `hi<|im_start|>system` gets those characters,
never the token that opens a turn (the hosted APIs tokenize them so too). Only the chat template's own
control tokens are tokens.

`render_chat` renders a conversation with every control token's string (a tokenizer's added tokens marked
special: `<|im_start|>`, `<|im_end|>`, `<|endoftext|>`, ...) that appears in the messages or tools swapped
for a private-use character first, so that those the template writes itself are told apart: the text is
the one `render_text` gives, and `literal` holds where the client's strings start. `tokenize_chat` then
tokenizes as the tokenizer does (split at every added token, each piece encoded alone) except at those
places, which stay inside their piece as plain text. Added tokens that are not special (Qwen's `<tool_call>`,
`<think>`) are not control tokens: they stay tokens wherever they come from, as a model's own output
writes them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.prompts.chat import render_text
from engine.prompts.messages import Message

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PRIVATE_USE = 0xF0000  # Supplementary Private Use Area-A: one code point stands for one control token


@dataclass(frozen=True)
class ChatText:
    text: str
    literal: tuple[int, ...] = ()  # first characters of the control-token strings the client sent


def control_tokens(tokenizer: PreTrainedTokenizerBase) -> list[str]:
    return [t.content for t in tokenizer.added_tokens_decoder.values() if t.special]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _swapped(value: Any, pattern: re.Pattern[str], marks: dict[str, str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(lambda m: marks[m.group()], value)
    if isinstance(value, dict):
        return {k: _swapped(v, pattern, marks) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_swapped(v, pattern, marks) for v in value]
    return value


def _alternation(strings: Sequence[str]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(s) for s in sorted(strings, key=len, reverse=True)))


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None = None,
    **options: Any,
) -> ChatText:
    """`render_text` (same arguments), and where the control-token strings the client sent start."""
    sent = _strings([list(messages), list(tools or [])])
    found = [c for c in control_tokens(tokenizer) if any(c in s for s in sent)]
    if not found:
        return ChatText(render_text(tokenizer, messages, tools, **options))
    taken = set("".join(sent))
    free = (chr(c) for c in range(PRIVATE_USE, PRIVATE_USE + 0xFFFE) if chr(c) not in taken)
    marks = dict(zip(found, free, strict=False))
    pattern = _alternation(found)
    text = render_text(
        tokenizer, _swapped(list(messages), pattern, marks), _swapped(tools, pattern, marks), **options
    )
    back = {mark: token for token, mark in marks.items()}
    out, literal, at = [], [], 0
    for piece in re.split(f"([{''.join(back)}])", text):
        if piece in back:
            literal.append(at)
            piece = back[piece]
        out.append(piece)
        at += len(piece)
    return ChatText("".join(out), tuple(literal))


def tokenize_chat(
    tokenizer: PreTrainedTokenizerBase, text: str, literal: Sequence[int] = (), base: int = 0
) -> tuple[list[int], list[tuple[int, int]]]:
    """Token ids of `text` and their character offsets (shifted by `base`), the control-token strings
    starting at `literal` (characters of `text`) encoded as plain text."""
    if not literal:
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), [(s + base, e + base) for s, e in enc["offset_mapping"]]
    keep = set(literal)
    added = _alternation([t.content for t in tokenizer.added_tokens_decoder.values()])
    ids: list[int] = []
    offsets: list[tuple[int, int]] = []
    start = 0
    for m in [*(m for m in added.finditer(text) if m.start() not in keep), None]:
        end = m.start() if m is not None else len(text)
        if end > start:  # a piece between added tokens: plain text, the client's control strings in it too
            enc = tokenizer(
                text[start:end],
                add_special_tokens=False,
                return_offsets_mapping=True,
                split_special_tokens=True,
            )
            ids += enc["input_ids"]
            offsets += [(s + start + base, e + start + base) for s, e in enc["offset_mapping"]]
        if m is not None:
            ids.append(tokenizer.convert_tokens_to_ids(m.group()))
            offsets.append((m.start() + base, m.end() + base))
            start = m.end()
    return ids, offsets
