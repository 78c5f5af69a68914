"""A trace request as the local model sees it: its prompt's token ids (tokenized incrementally per
session), the tokens of the reply that follows it, and where its messages and regions lie. Only the
tokenizer and the chat template are needed: no weights."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.prompts.chat import Message
from engine.prompts.literal import render_chat
from engine.prompts.regions import Region, char_spans, common_prefix, message_end, token_regions
from engine.traces.request import TraceRequest
from engine.traces.tokens import IncrementalEncoder, TokenizedText


def reply_tail(prompt: Sequence[int], full: Sequence[int], eos_ids: Sequence[int]) -> list[int] | None:
    """What a model emits for a reply: the tokens that rendering the conversation with the reply (no
    generation prompt) adds after the prompt, through the first end-of-turn token; None when that
    rendering does not extend the prompt (the template rewrites earlier turns)."""
    if list(full[: len(prompt)]) != list(prompt):
        return None
    tail = list(full[len(prompt) :])
    end = next((i for i, t in enumerate(tail) if t in eos_ids), len(tail) - 1)
    return tail[: end + 1]


class TraceRenderer:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, eos_ids: Sequence[int]) -> None:
        self.tokenizer, self.eos_ids = tokenizer, tuple(eos_ids)
        self.encoder = IncrementalEncoder(tokenizer)
        # session -> (messages, prompt text, tools, message ends) of its latest request
        self.ends: dict[str, tuple[list[Message], str, Any, list[int]]] = {}

    def prompt(self, req: TraceRequest) -> TokenizedText:
        chat = render_chat(self.tokenizer, req.messages, req.tools, continue_final=req.continue_final)
        return self.encoder.encode(chat.text, req.session, literal=chat.literal)

    def reply(
        self, req: TraceRequest, prompt: TokenizedText, reply: Message, cut: bool = False, keep: bool = True
    ) -> list[int]:
        """The reply's tokens as a model would emit them (as the replay teacher-forces them): through the
        end-of-turn token, or without it when the reply was `cut` at its token limit (none was generated).
        `keep`: the rendering becomes the session's last text for the incremental tokenizer."""
        chat = render_chat(self.tokenizer, [*req.messages, reply], req.tools, add_generation_prompt=False)
        full = self.encoder.encode(chat.text, req.session, keep=keep, literal=chat.literal)
        tail = reply_tail(prompt.ids, full.ids, self.eos_ids)
        if tail is None:
            content = self.tokenizer(str(reply.get("content") or ""), add_special_tokens=False).input_ids
            tail = content + list(self.eos_ids[:1])
        return tail[:-1] if cut and tail and tail[-1] in self.eos_ids else tail

    def message_ends(self, req: TraceRequest, prompt: TokenizedText) -> list[int]:
        """Character where each message's rendering ends in the prompt (`regions.message_end`). Kept per
        session: a message whose predecessors and itself are unchanged, and whose end lies strictly inside
        the text shared with the session's previous prompt, ends where it ended there."""
        prev = self.ends.get(req.session)
        shared = common_prefix(prev[1], prompt.text) if prev is not None and prev[2] == req.tools else -1
        ends: list[int] = []
        for i, message in enumerate(req.messages):
            same = prev is not None and len(ends) == i and i < len(prev[0]) and prev[0][i] == message
            if same and prev[3][i] < shared and (i == 0 or ends[-1] == prev[3][i - 1]):
                ends.append(prev[3][i])
            else:
                prev = None  # from here on, every end is found by rendering
                ends.append(message_end(self.tokenizer, req.messages, i, req.tools, prompt.text))
        self.ends[req.session] = (req.messages, prompt.text, req.tools, ends)
        return ends

    def regions(self, req: TraceRequest, prompt: TokenizedText, ends: list[int]) -> list[Region]:
        """The prompt's regions, as `regions.render_prompt` labels them (from the message ends known here)."""
        spans = char_spans(self.tokenizer, req.messages, req.tools, prompt.text, ends)
        return token_regions(spans, prompt.offsets)
