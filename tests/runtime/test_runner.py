"""`ModelRunner`'s chunked prefill on the CPU path keeps long prompts within memory: no score matrix is formed."""

from __future__ import annotations

import pytest
from torch.profiler import profile

from tests.conftest import random_ids as tokens

CHUNK = 256


def test_chunked_prefill_forms_no_score_matrix(tiny_dir, load) -> None:
    """A 1,000-token prefill in chunks of 256 on CPU: attention runs only as flash attention (no softmax, no
    batched matmul of scores), and no allocation is as large as one chunk's scores over itself
    `[heads, chunk, chunk]` in float32, let alone over the whole prompt."""
    eng = load(tiny_dir("qwen2"), cache_tokens=2048, prefill_chunk=CHUNK)
    if eng.device.type != "cpu":
        pytest.skip("the CPU path; other devices run other kernels (engine/model/causal_attention.py)")
    with profile(profile_memory=True) as prof:
        eng.generate(tokens(1000, 51), max_new_tokens=1, cache=False)
    events = prof.events()
    names = {e.name for e in events}
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in names
    assert not names & {"aten::softmax", "aten::_softmax", "aten::bmm", "aten::baddbmm"}
    scores = eng.config.num_heads * CHUNK * CHUNK * 4
    assert max(e.cpu_memory_usage for e in events) < scores
