"""Assistant turns rendered back as the model sampled them, not as the chat template re-renders them.

A server keeps each reply it gave out as the model wrote it (`SampledReply`): its text, the token ids it
sampled and the raw text of each tool call it parsed, by the call's id. When a later request carries that
reply back, its message is rendered from it (`SampledUse`), as an assistant message of that text and no
tool calls:

- `calls`: the message's tool calls came back unchanged (ids, names, arguments) but its text did not: its
  content, then each call's raw text (the template would write the calls in whitespace of its own);
- `text`: the whole reply came back unchanged: its text as the model wrote it;
- `tokens`: as `text`, and the sampled ids spliced into the prompt where that text lies, so the prompt
  holds the tokens the model sampled (the tokenizer may cut the same text otherwise, or normalize it: NFC
  turns a sampled U+F9C7 into U+5289). A splice is made only where the template writes the message's text
  verbatim and the ids decode to exactly that text: the prompt's text is never changed, only how it is cut
  into tokens (`splices`; a `tokens` use that fails either check is made as `text`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.errors import PromptError
from engine.prompts.chat import Message, render_text
from engine.prompts.literal import tokenize_chat

CALLS, TEXT, TOKENS = "calls", "text", "tokens"
HOW = (CALLS, TEXT, TOKENS)
MARKS = 0x100000  # Supplementary Private Use Area-B: one code point marks where one spliced text lies


@dataclass(frozen=True)
class SampledReply:
    request_id: str  # the request whose response gave it out
    text: str  # the reply's text as the response gave it out (a stop string cut)
    ids: Sequence[int]  # every token sampled, the end-of-turn token included (kept as 4-byte ints)
    raw_calls: dict[str, str]  # call id -> the text the model wrote for the call (whitespace before it too)

    def record(self) -> dict[str, Any]:
        """What `--record` keeps of it (engine/traces/as_sampled.py reads it back)."""
        calls = [{"id": i, "raw": raw} for i, raw in self.raw_calls.items()]
        return {"ids": list(self.ids), "text": self.text, "calls": calls}

    def content_ids(self, eos_ids: Sequence[int]) -> tuple[int, ...]:
        """The sampled ids without the end-of-turn token the template writes after the text itself."""
        return tuple(self.ids[:-1] if self.ids and self.ids[-1] in eos_ids else self.ids)


@dataclass(frozen=True)
class SampledUse:
    message: int  # index of the assistant message rendered from the reply
    reply: SampledReply
    how: str  # calls | text | tokens

    def body(self, message: Message) -> str:
        """The text the message is rendered as."""
        if self.how != CALLS:
            return self.reply.text
        content = message.get("content") or ""
        raws = "".join(self.reply.raw_calls[c["id"]] for c in message.get("tool_calls") or [])
        return content + raws if content else raws.lstrip()

    def record(self) -> dict[str, Any]:
        """What `--record` keeps of it (engine/traces/as_sampled.py reads it back)."""
        return {"message": self.message, "reply": self.reply.request_id, "as": self.how}


@dataclass(frozen=True)
class Splice:
    start: int  # characters of the prompt text
    end: int
    ids: tuple[int, ...]  # the tokens of text[start:end]


def substituted(messages: Sequence[Message], uses: Sequence[SampledUse]) -> list[Message]:
    """The messages with each used one replaced by an assistant message of its body."""
    out = list(messages)
    for use in uses:
        out[use.message] = {"role": "assistant", "content": use.body(messages[use.message])}
    return out


def splices(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    uses: Sequence[SampledUse],
    text: str,
    eos_ids: Sequence[int],
    **template_options: Any,
) -> tuple[tuple[Splice, ...], tuple[SampledUse, ...]]:
    """Where the `tokens` uses' ids go in `text`, the rendering of `messages` (already `substituted`), and
    the uses as made. Each spliced message is rendered once more with one private-use character for its
    text: the template wrote the text verbatim where, put back in place of the characters, the rendering is
    `text` again."""
    wanted = sorted((u for u in uses if u.how == TOKENS), key=lambda u: u.message)
    if not wanted:
        return (), tuple(uses)
    free = (chr(c) for c in itertools.count(MARKS) if chr(c) not in text)
    marks = {u.message: next(free) for u in wanted}
    marked = [{"role": "assistant", "content": marks[i]} if i in marks else m for i, m in enumerate(messages)]
    try:
        shape = render_text(tokenizer, marked, tools, **template_options)
    except PromptError:
        shape = ""
    found: dict[int, Splice] = {}
    if all(shape.count(mark) == 1 for mark in marks.values()):
        at, pieces, shift = 0, [], 0
        for i, k in sorted(((i, shape.index(mark)) for i, mark in marks.items()), key=lambda p: p[1]):
            body = messages[i]["content"]
            pieces += [shape[at:k], body]
            ids = next(u for u in wanted if u.message == i).reply.content_ids(eos_ids)
            found[i] = Splice(k + shift, k + shift + len(body), ids)
            at, shift = k + 1, shift + len(body) - 1
        if "".join(pieces) + shape[at:] != text:
            found = {}  # the template does not write the text verbatim
    kept = {
        i: s
        for i, s in found.items()
        if s.ids
        and tokenizer.decode(list(s.ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
        == text[s.start : s.end]
    }
    made = tuple(u if u.how != TOKENS or u.message in kept else replace(u, how=TEXT) for u in uses)
    return tuple(sorted(kept.values(), key=lambda s: s.start)), made


def tokenize_spliced(
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    literal: Sequence[int] = (),
    base: int = 0,
    spliced: Sequence[Splice] = (),
) -> tuple[list[int], list[tuple[int, int]]]:
    """`tokenize_chat` of `text` (the part of a prompt from character `base` on), each splice's characters
    (in `text`'s own coordinates, ascending) given its ids; the text between splices is tokenized piece by
    piece, as the prompt a reply was sampled after ends where the reply starts."""
    ids: list[int] = []
    offsets: list[tuple[int, int]] = []
    at = 0
    for s in [*spliced, None]:
        end = s.start if s is not None else len(text)
        piece_ids, piece_offsets = tokenize_chat(
            tokenizer, text[at:end], [p - at for p in literal if at <= p < end], base + at
        )
        ids += piece_ids
        offsets += piece_offsets
        if s is not None:
            ids += s.ids
            offsets += _offsets(tokenizer, s, base)
            at = s.end
    return ids, offsets


def _offsets(tokenizer: PreTrainedTokenizerBase, s: Splice, base: int) -> list[tuple[int, int]]:
    """Character offsets of a splice's tokens: each token's own text's length, within the splice (a token
    that ends inside a character counts as a character of its own, the splice's end caps them)."""
    size = s.end - s.start
    pieces = tokenizer.batch_decode(
        [[i] for i in s.ids], skip_special_tokens=False, clean_up_tokenization_spaces=False
    )
    ends = list(itertools.accumulate(len(p) for p in pieces))
    starts = [0, *ends[:-1]]
    out = [
        (base + s.start + min(a, size), base + s.start + min(b, size))
        for a, b in zip(starts, ends, strict=True)
    ]
    if out:
        out[-1] = (out[-1][0], base + s.end)
    return out
