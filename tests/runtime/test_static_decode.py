"""The static decode step (what a CUDA graph captures): its outputs equal the eager step's, in the CPU's
arrangement and in CUDA's (tests/cuda_layout.py), at batch sizes that fill a bucket and that pad it; and
inside it no value comes from the host and no shape depends on anything but the bucket."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from tests.conftest import random_ids as tokens
from tests.cuda_layout import arrange_as_cuda
from tests.precision import assert_same_greedy_run

BS = 16
HOST_OPS = ("_local_scalar_dense", "lift_fresh", "scalar_tensor", "_to_copy", "nonzero")


class Trace(TorchDispatchMode):
    """Every op run while open, with its output shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, list[tuple[int, ...]]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        shapes = [tuple(t.shape) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        self.ops.append((str(func), shapes))
        return out


@pytest.fixture(params=["cpu", "cuda"], ids=["CPU arrangement", "CUDA arrangement"])
def arrangement(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, device: torch.device
) -> None:
    if request.param == "cuda" and device.type == "cpu":
        arrange_as_cuda(monkeypatch)


def decoding(e, prompts: list[list[int]], steps: int) -> dict:
    """The greedy runs of `prompts` decoding together, `steps` tokens each."""
    ids = [e.add_request(p, max_new_tokens=steps, return_logits=True, ignore_eos=True) for p in prompts]
    done = {}
    for _ in range(4 * steps + 8):  # bounded
        done |= {o.request_id: o.generation for o in e.step() if o.finished}
        if len(done) == len(ids):
            break
    return [done[rid] for rid in ids]


@pytest.mark.parametrize("batch", [1, 3, 4], ids=["one", "three (padded to four)", "four"])
def test_static_decode_equals_the_eager_step(arrangement, tiny_dir, load, cache_tol, batch: int) -> None:
    """Contexts that cross block boundaries and table-width buckets while decoding (10 to 49 tokens)."""
    prompts = [tokens(10 + 5 * i, 80 + i) for i in range(batch)]
    eager = decoding(load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024), prompts, 24)
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    e.runner.use_static_decode(True)
    static = decoding(e, prompts, 24)
    sizes, widths = zip(*e.runner.static.steps, strict=True)
    assert set(sizes) == {1 << (batch - 1).bit_length()} and len(set(widths)) > 1  # crossed a width bucket
    for s, g in zip(static, eager, strict=True):
        assert_same_greedy_run(s.token_ids, s.logits, g.token_ids, g.logits, cache_tol)


def test_the_static_step_takes_nothing_from_the_host(tiny_dir, load) -> None:
    """Two decode steps of one bucket over different requests, contexts and block tables run the same ops
    with the same shapes, none of them reading a value back to the host or making a tensor from host data:
    the step a CUDA graph can capture and replay."""
    e = load(tiny_dir("qwen2"), block_size=BS, cache_tokens=1024)
    e.runner.use_static_decode(True)
    traces = []
    for prompts in (
        [tokens(20, 1), tokens(30, 2), tokens(25, 3)],
        [tokens(18, 4), tokens(28, 5), tokens(22, 6), tokens(31, 7)],
    ):
        reqs = [e.add_request(p, max_new_tokens=3) for p in prompts]
        while any(e.requests[r].seq.num_kv < len(e.requests[r].seq) - 1 for r in reqs if r in e.requests):
            e.step()  # the prompts' prefills: each request then decodes its next token
        seqs = [e.requests[r].seq for r in reqs]
        step = e.runner.static.prepare(seqs)
        with Trace() as trace:
            e.runner.static.forward(step)
        traces.append(trace.ops)
        for r in reqs:
            e.abort(r)
    assert traces[0] == traces[1]
    assert not [op for op, _ in traces[0] if any(host in op for host in HOST_OPS)]
