"""How many tokens a reply may have: the request's `max_tokens`, the server's cap (`--max-tokens-cap`) and
what the model's context leaves after the prompt.

The prompt is never cut: one that leaves no room for a single new token is refused, in the words Anthropic
uses (`prompt is too long: N tokens > M maximum`, which clients such as Claude Code recognise). A
`max_tokens` over what the context leaves is clamped to it where the request's API allows that (Anthropic
Messages and the Responses API: Claude Code asks for 64,000), else refused as vLLM refuses it (Chat
Completions); over the cap it is clamped on every API. A request that sets no `max_tokens` gets the server's
default (`--default-max-tokens`), or, where its API has no default (the Responses API), up to the context's end.
Every limit the server imposes is reported (`Budget.note`, the `kvtestbed` object's `max_tokens`: `asked` is
null when the request set none): the cap, the default, and a clamp to the context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import ContextOverflowError


@dataclass(frozen=True)
class Budget:
    tokens: int  # new tokens the engine may generate
    note: dict[str, Any] | None = None  # {"asked", "granted", "by"} when max_tokens was clamped


def too_long(prompt_tokens: int, context: int, at_least: bool = False, how: str = "") -> ContextOverflowError:
    """The refusal of a prompt that leaves no room for one new token."""
    n = f"at least {prompt_tokens}" if at_least else str(prompt_tokens)
    return ContextOverflowError(
        f"prompt is too long: {n} tokens > {context - 1} maximum (the model's context is {context} tokens "
        f"and a reply needs at least one{how}; prompts are never truncated)"
    )


def reply_budget(
    prompt_tokens: int, asked: int | None, context: int, default: int | None, cap: int | None, clamp: bool
) -> Budget:
    """The reply's token budget; `default` when the request sets none (None: up to the context's end),
    `clamp`: a `max_tokens` over what the context leaves is clamped (else refused)."""
    left = context - prompt_tokens
    if left < 1:
        raise too_long(prompt_tokens, context)
    if asked is None:
        limits = [(left, None), (default, "--default-max-tokens"), (cap, "--max-tokens-cap")]
        granted, by = min(((n, b) for n, b in limits if n is not None), key=lambda limit: limit[0])
        return Budget(granted, {"asked": None, "granted": granted, "by": by} if by else None)
    granted, by = asked, None
    if cap is not None and granted > cap:
        granted, by = cap, "--max-tokens-cap"
    if granted > left:
        if not clamp:
            raise ContextOverflowError(
                f"prompt of {prompt_tokens} tokens + max_tokens {asked} exceeds the model's context of "
                f"{context} tokens; refused (prompts are never truncated)"
            )
        granted, by = left, "context"
    return Budget(granted, {"asked": asked, "granted": granted, "by": by} if by else None)
