"""`--isolate-cache`: each client identity reads only the blocks it wrote (an in-process server over a tiny
random Qwen2, driven by the OpenAI SDK with two keys); `bench replay` reads the same namespaces back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import openai

import engine
from engine.serve.app import build_state
from engine.traces.envelope import cache_salt, unwrap
from tests.serve.in_process import serving

MODEL = "tiny"
MESSAGES = [
    {"role": "system", "content": "Alice's private notes: the vault code is 4417. " * 6},
    {"role": "user", "content": "What is the code?"},
]


def test_isolated_clients_read_only_their_own_blocks(tiny_dir: Callable[..., Path]) -> None:
    model = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    with serving(build_state(model, [MODEL], isolate_cache=True)) as server:

        def cached(key: str) -> tuple[int, str]:
            client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=60)
            reply = client.chat.completions.create(
                model=MODEL, messages=MESSAGES, max_tokens=1, temperature=0
            )
            return reply.usage.prompt_tokens_details.cached_tokens, reply.model_extra["kvtestbed"][
                "cache_scope"
            ]

        alice, alice_scope = cached("alice")
        mallory, mallory_scope = cached("mallory")
        again, again_scope = cached("alice")
    assert alice == 0 and mallory == 0 < again  # her blocks serve her, never him
    assert alice_scope == again_scope != mallory_scope and len(alice_scope) == 16


def test_replay_keeps_the_servers_namespaces() -> None:
    line = {"body": {}, "kvtestbed": {"model": "m", "cache_scope": "abc"}}
    assert cache_salt(unwrap(line), None) == "m\0abc"
    assert cache_salt(unwrap({"body": {}, "kvtestbed": {"model": "m", "cache_scope": None}}), None) == "m"
