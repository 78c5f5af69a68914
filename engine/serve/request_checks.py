"""What a request is refused for on the preparation threads (engine/serve/preparation.py), before its stream
opens: every check `Engine.add_request` makes (the stop strings' bounds, the sampling arguments, a request the
KV cache could never hold) is made here too, so that a request whose stream has opened is not refused after
it; and a prompt known to take more tokens than the context, without tokenizing it
(engine/prompts/token_bound.py). The reply's budget and the context's exact check: engine/serve/reply_budget.py.
"""

from __future__ import annotations

from engine.arguments import stop_strings
from engine.errors import CacheCapacityError, InvalidArgumentError
from engine.prompts.token_bound import TokenBound
from engine.runtime.engine import Engine
from engine.runtime.request import SamplingParams
from engine.serve.chat_request import ANTHROPIC, ChatRequest
from engine.serve.errors import APIError
from engine.serve.reply_budget import too_long

STOP_FIELDS = {ANTHROPIC: "stop_sequences"}  # each API's name for stop strings (else OpenAI's `stop`)


def check_stop(req: ChatRequest) -> None:
    """The engine's bounds on stop strings (engine/arguments.py: how many, how long each), refused by the
    field's name in the request's API."""
    field = STOP_FIELDS.get(req.api, "stop")
    try:
        stop_strings(req.stop)
    except InvalidArgumentError as e:
        raise APIError(400, field + str(e).removeprefix("stop"), param=field) from None


def refuse_far_over(bound: TokenBound, context: int, text: str) -> None:
    """A prompt that takes more tokens than the context, known without tokenizing it, is refused."""
    fewest = bound.fewest_tokens(text)
    if fewest > context:
        raise too_long(
            fewest,
            context,
            at_least=True,
            how=f"; {len(text)} characters, at most {bound.max_chars} a token: refused before tokenizing",
        )


def check_engine(engine: Engine, req: ChatRequest, tokens: int, max_new: int) -> None:
    """What `Engine.add_request` would refuse, refused here, before a stream opens: the sampling
    arguments, and a request of `tokens` (prompt and reply) the KV cache could never hold."""
    SamplingParams.checked(max_new, req.temperature, req.top_p, req.seed, req.stop, False)
    blocks = engine.blocks
    needed = blocks.blocks_for(tokens)
    if engine.cache_enabled and needed > blocks.num_blocks:
        raise CacheCapacityError(
            f"request needs {needed} KV blocks ({tokens} tokens at {blocks.block_size} per block) but "
            f"the cache holds {blocks.num_blocks}; shorten the request or restart with more --cache-tokens"
        )
