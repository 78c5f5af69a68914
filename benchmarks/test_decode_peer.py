"""One sequence's decode against llama.cpp on the same GGUF file (the bundled SmolLM2-135M Q4_1), with the
same prompt token ids, the same thread count and the same number of greedy tokens (`decode_peer`). Skipped
where llama-cpp-python is not installed (`pip install llama-cpp-python`: a C++ build of some minutes).

What each side's clock holds: the decode of `PEER_TOKENS` tokens after the first, each token sampled
greedily and turned into text. Ours: `Engine.generate` (the step loop: scheduling, one forward, sampling,
detokenizing), its `timing.decode_s` from the first token to the last. llama.cpp: `Llama.eval` of each
sampled token, `sample(temp=0)` and `detokenize`, timed from after the first token to the last. Prefills are
outside both clocks. The two sides alternate which goes first, round by round; the record keeps each side's
output tokens/s and the per-round ratio ours / llama.cpp (median and min-max), and prints one line. The record
has no "case" key, as the comparison scripts want (their ratios are within one model; this case runs its own).

The weights differ in form, not value: llama.cpp computes with the 4-bit blocks; ours with the same values
dequantized to float32 (about 8x the bytes read per token), which is what decode speed on a CPU turns on.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from typing import Any

import pytest
import torch

import engine
from benchmarks.harness import random_tokens
from engine.loading.sources import ALIASES, alias_path

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (an optional peer)")

PEER_MODEL = "smollm2-135m"
PEER_PROMPT = 512
PEER_TOKENS = 64
PEER_ROUNDS = 5


@pytest.fixture(scope="module")
def peers() -> tuple[Any, Any]:
    ours = engine.load(PEER_MODEL, "cpu", "float32", cache=False)
    theirs = llama_cpp.Llama(
        model_path=str(alias_path(PEER_MODEL)),
        n_ctx=PEER_PROMPT + PEER_TOKENS + 16,
        n_threads=torch.get_num_threads(),
        n_batch=PEER_PROMPT,
        verbose=False,
    )
    return ours, theirs


def ours_decode_s(ours: Any, prompt: list[int]) -> float:
    gen = ours.generate(prompt, max_new_tokens=PEER_TOKENS + 1, ignore_eos=True)
    assert len(gen.token_ids) == PEER_TOKENS + 1
    return gen.timing.decode_s


def llama_decode_s(theirs: Any, prompt: list[int]) -> float:
    theirs.reset()
    theirs.eval(prompt)
    token = theirs.sample(temp=0.0)  # the first token: the prefill's, outside the clock
    start = time.perf_counter()
    for _ in range(PEER_TOKENS):
        theirs.eval([token])
        token = theirs.sample(temp=0.0)
        theirs.detokenize([token])
    return time.perf_counter() - start


def test_decode_peer(benchmark, peers: tuple[Any, Any]) -> None:
    ours, theirs = peers
    prompt = random_tokens(PEER_PROMPT, seed=3, vocab=ours.config.vocab_size)
    sides = {"ours": lambda: ours_decode_s(ours, prompt), "llama.cpp": lambda: llama_decode_s(theirs, prompt)}
    orders, rounds = itertools.cycle([("ours", "llama.cpp"), ("llama.cpp", "ours")]), []

    def both() -> None:
        rounds.append({name: sides[name]() for name in next(orders)})

    both()  # untimed warm-up of both sides
    rounds.clear()
    benchmark.group = f"decode one sequence vs llama.cpp {PEER_MODEL}"
    benchmark.pedantic(both, rounds=PEER_ROUNDS, iterations=1)
    per_s = {name: [PEER_TOKENS / r[name] for r in rounds] for name in sides}
    ratios = [o / t for o, t in zip(per_s["ours"], per_s["llama.cpp"], strict=True)]
    benchmark.extra_info.update(
        peer="llama.cpp",
        model=PEER_MODEL,
        gguf=ALIASES[PEER_MODEL][1],
        device="cpu",
        dtype="float32",
        threads=torch.get_num_threads(),
        prompt_tokens=PEER_PROMPT,
        output_tokens=PEER_TOKENS,
        ours_tokens_per_s=statistics.median(per_s["ours"]),
        llama_cpp_tokens_per_s=statistics.median(per_s["llama.cpp"]),
        ratio=statistics.median(ratios),
        ratio_min=min(ratios),
        ratio_max=max(ratios),
        pairs=len(ratios),
        llama_cpp_version=llama_cpp.__version__,
        load_1min=os.getloadavg()[0],
    )
    print(
        f"\ndecode one sequence, {PEER_MODEL} ({PEER_TOKENS} tokens after {PEER_PROMPT}, "
        f"{torch.get_num_threads()} threads): ours {statistics.median(per_s['ours']):.1f} tokens/s, "
        f"llama.cpp {statistics.median(per_s['llama.cpp']):.1f}; ours / llama.cpp "
        f"{statistics.median(ratios):.2f} [{min(ratios):.2f}-{max(ratios):.2f}], n={len(ratios)}"
    )
