"""A trace request as the local model sees it: its prompt's token ids (tokenized incrementally per
session), the tokens of the reply that follows it, and where its messages and regions lie. Only the
tokenizer and the chat template are needed: no weights.

No text is rendered twice: a session's latest renderings are kept (by the messages, tools and options
rendered), so where the reply of the request a request continues ends is read off that request's reply
rendering, and what a rendering holds before its first message (`regions.prompt_head`) is worked out once
per first message and tools. A request that continues another costs its prompt, its reply and one
rendering per message it adds after that reply (each of a parallel call's results is one), however long
its session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.prompts.chat import Message, render_text
from engine.prompts.literal import ChatText, render_chat
from engine.prompts.regions import Head, Region, char_spans, common_prefix, prompt_head, token_regions
from engine.prompts.sampled import SampledUse, Splice, splices
from engine.traces.request import TraceRequest
from engine.traces.tokens import IncrementalEncoder, TokenizedText

RECENT = 3  # renderings kept per session: the latest request's prompt, its last message's end, its reply


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
        # session -> its latest renderings: (messages, tools, options, through render_chat, text)
        self.recent: dict[str, list[tuple[list[Message], Any, dict[str, Any], bool, ChatText]]] = {}
        self.heads: dict[str, tuple[Message, Any, Head]] = {}  # session -> its first message, tools, head

    def _render(
        self, session: str, messages: list[Message], tools: Any, chat: bool, **options: Any
    ) -> ChatText:
        """`render_chat` (`chat`), else `render_text` as a `ChatText`, or the session's same rendering
        made before (`render_chat`'s text is `render_text`'s where no control-token string was sent)."""
        recent = self.recent.setdefault(session, [])
        for msgs, tls, opts, via_chat, out in recent:
            usable = via_chat if chat else not (via_chat and out.literal)
            if (
                usable
                and opts == options
                and len(msgs) == len(messages)
                and msgs == messages
                and tls == tools
            ):
                return out
        if chat:
            out = render_chat(self.tokenizer, messages, tools, **options)
        else:
            out = ChatText(render_text(self.tokenizer, messages, tools, **options))
        recent.append((messages, tools, options, chat, out))
        del recent[: max(0, len(recent) - RECENT)]
        return out

    def render(
        self, req: TraceRequest, messages: list[Message] | None = None, **options: Any
    ) -> tuple[ChatText, tuple[Splice, ...], tuple[SampledUse, ...]]:
        """The text of the request's messages (or of `messages`: they and a reply), where the ids of its
        messages rendered as sampled go, and those messages' uses as made (engine/prompts/sampled.py)."""
        messages = req.messages if messages is None else messages
        chat = self._render(req.session, messages, req.tools, True, **options)
        spliced, uses = splices(
            self.tokenizer, messages, req.tools, req.as_sampled, chat.text, self.eos_ids, **options
        )
        return chat, spliced, uses

    def prompt(self, req: TraceRequest) -> TokenizedText:
        chat, spliced, _ = self.render(req, continue_final=req.continue_final)
        return self.encoder.encode(chat.text, req.session, literal=chat.literal, spliced=spliced)

    def reply(
        self, req: TraceRequest, prompt: TokenizedText, reply: Message, cut: bool = False, keep: bool = True
    ) -> list[int]:
        """The reply's tokens as a model would emit them (as the replay teacher-forces them): through the
        end-of-turn token, or without it when the reply was `cut` at its token limit (none was generated).
        `keep`: the rendering becomes the session's last text for the incremental tokenizer."""
        chat, spliced, _ = self.render(req, [*req.messages, reply], add_generation_prompt=False)
        full = self.encoder.encode(chat.text, req.session, keep=keep, literal=chat.literal, spliced=spliced)
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
                through = self._render(
                    req.session, req.messages[: i + 1], req.tools, False, add_generation_prompt=False
                )
                ends.append(common_prefix(through.text, prompt.text))
        self.ends[req.session] = (req.messages, prompt.text, req.tools, ends)
        return ends

    def spans(self, req: TraceRequest, prompt: TokenizedText, ends: list[int]) -> list[tuple[int, str, str]]:
        """The prompt's character spans (`regions.char_spans`), from the message ends known here."""
        known = self.heads.get(req.session)
        if known is None or known[0] != req.messages[0] or known[1] != req.tools:
            known = (req.messages[0], req.tools, prompt_head(self.tokenizer, req.messages, req.tools))
            self.heads[req.session] = known
        return char_spans(self.tokenizer, req.messages, req.tools, prompt.text, ends, known[2])

    def regions(self, req: TraceRequest, prompt: TokenizedText, ends: list[int]) -> list[Region]:
        """The prompt's regions, as `regions.render_prompt` labels them (from the message ends known here)."""
        return token_regions(self.spans(req, prompt, ends), prompt.offsets)
