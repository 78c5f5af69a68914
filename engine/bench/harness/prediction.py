"""What a server's prefix cache should have served, predicted from what was actually sent and received.

A server caches request n's prompt plus the reply *it* generated (every token but the last, whose K/V is never
computed), not the trace's recorded reply that request n+1 carries. So each request, in the order it was sent,
is rendered and tokenized with `--model`'s tokenizer (which must be the served model's) and served by the
project's own `BlockManager` (as `--analyze` drives it) at `--block-size` granularity, and then its streamed
reply is cached after it: the reply's text and tool calls rendered by the chat template through the end-of-turn
token, or without it when the reply was cut at its token limit (the server never generated one). A request
that failed before its first token is not fed (the server cached nothing it can be credited with); one that
failed mid-stream is fed its prompt only.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from engine.bench.harness.streamed import Exchange
from engine.devices import resolve_device, resolve_dtype
from engine.kv.block_manager import BlockManager
from engine.kv.pool import KVCache
from engine.loading.sources import ModelSource
from engine.traces.providers.base import RulePrompt
from engine.traces.providers.local import LocalRule
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest

CUT_AT_LIMIT = {"length", "max_tokens"}  # OpenAI's and Anthropic's finish reasons for a reply cut short


@dataclass(frozen=True)
class Predicted:
    prompt_tokens: int
    cached_tokens: int | None  # None: the request failed before its first token (not fed)


class Predictor:
    def __init__(self, renderer: TraceRenderer, local: LocalRule) -> None:
        self.renderer, self.local = renderer, local

    def feed(self, req: TraceRequest, ex: Exchange) -> Predicted:
        """Serve `req` as sent, then cache the reply the server streamed for it; call in sending order."""
        prompt = self.renderer.prompt(req)
        if ex.error and ex.ttft_s is None:
            return Predicted(len(prompt.ids), None)
        reply: list[int] = []
        if not ex.error:
            reply = self.renderer.reply(req, prompt, ex.reply(), ex.finish_reason in CUT_AT_LIMIT)
        served = self.local.serve(RulePrompt(prompt.ids, 0.0, reply_ids=reply))
        return Predicted(len(prompt.ids), served.cached_tokens)


def prediction_blocks(args: argparse.Namespace, source: ModelSource) -> BlockManager:
    """The predicting cache: --block-size, capacity --cache-tokens / --cache-gb (else the engine's default),
    sized as the server's cache should be (match them), never allocated."""
    dtype = resolve_dtype(args.dtype, resolve_device(args.device))
    num_blocks = KVCache.blocks_in_budget(
        source.config, args.block_size, dtype, tokens=args.cache_tokens, gb=args.cache_gb
    )
    return BlockManager(num_blocks, args.block_size, b"endpoint-prediction")
