"""`bench replay --analyze` at scale: a synthetic agent session of R requests whose prompts start at N tokens
(FULL: 200 x 50k; QUICK: 20 x 8k; LONG: 64 x ~128k), analyzed with the Qwen2.5 tokenizer and chat template (no model): the
engine's block hashing plus every hosted rule. The timed unit is the whole analysis; no device is used.
Target: well under a minute for 200 x 50k on a CPU.
"""

from __future__ import annotations

import statistics

from benchmarks.harness import Shapes, cpu_benchmark
from engine.kv.block_manager import BlockManager
from engine.loading.tokenizer import load_tokenizer, qwen_tokenizer_dir
from engine.traces.analysis import Analyzer
from engine.traces.providers.anthropic import AnthropicRule
from engine.traces.providers.deepseek import DeepSeekRule
from engine.traces.providers.deepseek_2024 import DeepSeek2024Rule
from engine.traces.providers.gemini import GeminiRule
from engine.traces.providers.local import LocalRule
from engine.traces.providers.openai import OpenAIRule
from engine.traces.rendering import TraceRenderer
from engine.traces.synthetic import synthetic_session

QWEN_IM_END = 151645
BLOCK_SIZE = 16


def test_analyze_trace(benchmark, shapes: Shapes) -> None:
    requests, tokens = shapes.trace
    tokenizer = load_tokenizer(qwen_tokenizer_dir())
    trace = synthetic_session(tokenizer, requests, tokens)

    def analyze() -> list:
        blocks = BlockManager(2 * (tokens + 40 * requests) // BLOCK_SIZE, BLOCK_SIZE, b"bench")
        rules = [OpenAIRule(), AnthropicRule(), DeepSeekRule(), DeepSeek2024Rule(), GeminiRule()]
        return Analyzer(TraceRenderer(tokenizer, [QWEN_IM_END]), LocalRule(blocks), rules).run(trace)

    runs, cpu_s = cpu_benchmark(benchmark, analyze, shapes.budget_s, f"analyze {requests}x{tokens}")
    last = runs[-1]
    # no "case" key: the comparison scripts' ratios are between implementations on one device; this case has
    # neither (its absolute time is the number to watch, in the pytest-benchmark table)
    benchmark.extra_info |= {
        "cpu_s_median": statistics.median(cpu_s),
        "cpu_s": cpu_s,
        "analyze_requests": requests,
        "first_prompt_tokens": last[0].prompt_tokens,
        "last_prompt_tokens": last[-1].prompt_tokens,
    }
    print(f"analysis CPU time per run: median {statistics.median(cpu_s):.1f} s, runs {cpu_s}")
    assert len(last) == requests and last[0].prompt_tokens >= 0.95 * tokens
    assert all(r.cached_share > 0.99 for r in last[1:])  # an append-only session: everything but the tail
