"""Prompts as `Engine` takes them -> token ids, checked against the model.

A prompt is raw text (encoded as is), chat messages (rendered with the model's chat template, ending in
the generation prompt) or token ids (used as they are, each checked against the vocabulary). Prompts are
never truncated: one that does not fit the context is refused.
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.arguments import string
from engine.errors import ContextOverflowError, PromptError, TokenizerMissingError
from engine.model.config import ModelConfig
from engine.prompts.chat import Message
from engine.prompts.literal import render_chat, tokenize_chat
from engine.prompts.regions import Region, RenderedPrompt, marked_text, render_prompt

Prompt = str | Sequence[Message] | Sequence[int]


def is_chat(prompt: Prompt) -> bool:
    """A non-empty list of dicts is chat messages; anything else is text or token ids."""
    return isinstance(prompt, list | tuple) and len(prompt) > 0 and all(isinstance(m, dict) for m in prompt)


@dataclass(frozen=True)
class Encoded:
    """A prompt's token ids and the host time spent getting them (not part of TTFT)."""

    ids: list[int]
    render_s: float = 0.0  # chat template -> text (chat prompts only)
    tokenize_s: float = 0.0  # text -> token ids (text and chat prompts)


class PromptEncoder:
    def __init__(self, tokenizer: PreTrainedTokenizerBase | None, model_id: str, config: ModelConfig) -> None:
        self.loaded_tokenizer = tokenizer  # None: the model folder has no tokenizer (token ids only)
        self.model_id, self.config = model_id, config

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        if self.loaded_tokenizer is None:
            raise TokenizerMissingError(
                f"{self.model_id} has no tokenizer files; use token ids, or add tokenizer.json to the folder"
            )
        return self.loaded_tokenizer

    def render(
        self, messages: Sequence[Message], tools: Sequence[dict] | None = None, **template_options: Any
    ) -> list[int]:
        """Token ids of messages rendered with the model's chat template, ending in the generation prompt."""
        return self.render_timed(messages, tools, **template_options).ids

    def render_timed(
        self, messages: Sequence[Message], tools: Sequence[dict] | None = None, **template_options: Any
    ) -> Encoded:
        """`render`, with the template and the tokenizer timed apart."""
        t0 = time.perf_counter()
        chat = render_chat(self.tokenizer, messages, tools, **template_options)
        t1 = time.perf_counter()
        ids, _ = tokenize_chat(
            self.tokenizer, chat.text, chat.literal
        )  # a message's control strings are text
        return Encoded(ids, t1 - t0, time.perf_counter() - t1)

    def ids(self, prompt: Prompt) -> list[int]:
        """A string is encoded as raw text; a list of dicts is chat; a list of ints is used as is."""
        return self.encode(prompt).ids

    def encode(self, prompt: Prompt) -> Encoded:
        """`ids`, with the time spent rendering and tokenizing."""
        if isinstance(prompt, str):
            t0 = time.perf_counter()
            ids = self.tokenizer(string("prompt", prompt, PromptError)).input_ids if prompt else []
            encoded = Encoded(ids, 0.0, time.perf_counter() - t0)
        elif is_chat(prompt):
            encoded = self.render_timed(prompt)  # type: ignore[arg-type]
        else:
            if not isinstance(prompt, list | tuple | range):
                raise PromptError(
                    "prompt must be text, a list of chat messages (dicts) or a list of token ids (ints); "
                    f"got {type(prompt).__name__}"
                )
            ids = self._token_ids(prompt)
            encoded = Encoded(ids)
        if not encoded.ids:
            raise PromptError("empty prompt")
        return encoded

    def _token_ids(self, prompt: list | tuple | range) -> list[int]:
        """A list of token ids, checked: ints (plain ones by their type alone, the common case, with no
        abstract-base-class check per id: that was most of a warm request's host time at 8k cached tokens),
        inside the vocabulary."""
        if all(type(t) is int for t in prompt):
            ids = list(prompt)
        else:
            wrong = next(
                (t for t in prompt if isinstance(t, bool) or not isinstance(t, numbers.Integral)), None
            )
            if wrong is not None:
                raise PromptError(
                    f"a prompt list holds chat messages (dicts) or token ids (ints); got {wrong!r:.60}"
                )
            ids = [int(t) for t in prompt]
        vocab = self.config.vocab_size
        if ids and (min(ids) < 0 or max(ids) >= vocab):
            bad = next(t for t in ids if not 0 <= t < vocab)
            raise PromptError(f"token id {bad} is outside the vocabulary [0, {vocab})")
        return ids

    def rendered(self, prompt: Prompt | RenderedPrompt) -> RenderedPrompt:
        """Token ids and regions of a prompt: chat messages get their template regions, raw text or token
        ids are one region."""
        if isinstance(prompt, RenderedPrompt):
            return prompt
        if is_chat(prompt):
            return render_prompt(self.tokenizer, prompt)  # type: ignore[arg-type]
        ids = self.ids(prompt)
        text = prompt if isinstance(prompt, str) else ""
        return RenderedPrompt(ids, text, [Region("prompt", "text", 0, len(ids))])

    def check_context(self, prompt_len: int, max_new_tokens: int) -> None:
        """Refuse (never truncate) a request that does not fit the model's context."""
        limit = self.config.max_position_embeddings
        if prompt_len + max_new_tokens > limit:
            raise ContextOverflowError(
                f"prompt of {prompt_len} tokens + max_new_tokens {max_new_tokens} exceeds the model's "
                f"context of {limit} tokens; refused (prompts are never truncated)"
            )

    def text(self, ids: list[int]) -> str:
        """Generated ids as text ("" without a tokenizer: token ids in, token ids out)."""
        if self.loaded_tokenizer is None:
            return ""
        return self.loaded_tokenizer.decode(ids, skip_special_tokens=True)

    def divergence_context(self, ids: list[int], index: int, width: int = 24) -> str:
        """The prompt text around the first token not served from cache, marked with ⟂."""
        if self.loaded_tokenizer is None or index >= len(ids):
            return ""
        return marked_text(self.loaded_tokenizer, ids, index, width)
