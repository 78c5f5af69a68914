"""Prompts as `Engine` takes them -> token ids, checked against the model.

A prompt is raw text (encoded as is), chat messages (rendered with the model's chat template, ending in
the generation prompt) or token ids (used as they are, each checked against the vocabulary). Prompts are
never truncated: one that does not fit the context is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

from engine.chat import Message, render_text
from engine.config import ModelConfig
from engine.errors import ContextOverflowError, PromptError, TokenizerMissingError
from engine.regions import Region, RenderedPrompt, marked_text, render_prompt

Prompt = str | Sequence[Message] | Sequence[int]


def is_chat(prompt: Prompt) -> bool:
    """A non-empty list of dicts is chat messages; anything else is text or token ids."""
    return not isinstance(prompt, str) and len(prompt) > 0 and all(isinstance(m, dict) for m in prompt)


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
        text = render_text(self.tokenizer, messages, tools, **template_options)
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def ids(self, prompt: Prompt) -> list[int]:
        """A string is encoded as raw text; a list of dicts is chat; a list of ints is used as is."""
        if isinstance(prompt, str):
            ids = self.tokenizer(prompt).input_ids if prompt else []
        elif is_chat(prompt):
            ids = self.render(prompt)  # type: ignore[arg-type]
        else:
            ids = [int(t) for t in prompt]  # type: ignore[arg-type]
            bad = [t for t in ids if not 0 <= t < self.config.vocab_size]
            if bad:
                raise PromptError(
                    f"token id {bad[0]} is outside the vocabulary [0, {self.config.vocab_size})"
                )
        if not ids:
            raise PromptError("empty prompt")
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
