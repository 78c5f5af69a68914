"""`ModelRunner`'s chunked prefill on the CPU path keeps long prompts within memory: no score matrix is formed;
and a step's inputs live in buffers made once: a decode step makes no tensor from host values."""

from __future__ import annotations

import pytest
from torch.profiler import profile
from torch.utils._python_dispatch import TorchDispatchMode

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


class OpNames(TorchDispatchMode):
    """The name of every op run while open."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


# ops that make a tensor from host values, or a new index / mask, rather than compute on the step's rows
MADE_FROM_HOST = ("lift_fresh", "scalar_tensor", "arange", "zeros", "full", "masked_fill")


@pytest.mark.parametrize("batch", [1, 3])
def test_a_decode_step_makes_no_input_tensor(tiny_dir, load, batch: int) -> None:
    """Decode steps of one and of three requests (contexts in one run of blocks, and crossing blocks): the
    step's token ids, positions, write slots and sampled rows are written in place into the runner's buffer
    (the same memory step after step), and no op makes a tensor from host values or builds an index or a
    mask; a prompt chunk that outgrows the buffer gets a larger one."""
    e = load(tiny_dir("qwen2"), block_size=16, cache_tokens=2048)
    ids = [e.add_request(tokens(20 + 9 * i, 70 + i), max_new_tokens=8, ignore_eos=True) for i in range(batch)]
    for _ in range(4):  # the prefills and a first decode step
        e.step()
    work = [(e.requests[r], 1) for r in ids]
    buffer = e.runner.inputs.host.data_ptr()
    for _ in range(3):
        for req, _ in work:
            e.blocks.grow(req.seq, len(req.seq))  # as the scheduler does before a step
        with OpNames() as ops:
            sampling, logits = e.runner.run(work)
        assert sampling == [req for req, _ in work] and logits.shape[0] == batch
        assert not [op for op in ops.names if any(f"aten.{name}" in op for name in MADE_FROM_HOST)]
        assert e.runner.inputs.host.data_ptr() == buffer
        for req, _ in work:  # the tokens the step computed, as sampling would append them
            req.seq.token_ids.append(int(logits[0].argmax()))
    for r in ids:
        e.abort(r)
    e.generate(tokens(300, 90), max_new_tokens=1)  # 300 tokens: more than the buffer held
    assert e.runner.inputs.capacity >= 3 * 300 + 1
