"""`StaticDecode`: a decode step over preallocated buffers per bucket (engine/kv/decode_buffers.py), the step a
CUDA graph captures: the host stages the rows and plans the backend's kernel outside it; inside, the model
runs on the bucket's device tensors with no host value, no host allocation and no shape that depends on
anything but the bucket.

On CUDA each bucket's step is captured once (`torch.cuda.CUDAGraph`, after two warm-up runs on a side stream,
which write the same K/V the step writes) and replayed every step; elsewhere the same static step runs
eagerly (what the CPU tests check against the eager `ModelRunner.run`). Backends without a static decode
(flash-attn) keep the eager step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from engine.kv.decode_buffers import BUCKETS, DecodeBuffers, bucket
from engine.kv.pool import KVCache
from engine.kv.sequence import SequenceState
from engine.kv.step import AttentionBackend, PagedAttention, StepContext
from engine.model.decoder import Decoder


class StaticStep:
    """One bucket: its buffers, its attention over them, and on CUDA its captured graph."""

    def __init__(self, buffers: DecodeBuffers, attention: PagedAttention) -> None:
        self.buffers, self.attention = buffers, attention
        self.graph: torch.cuda.CUDAGraph | None = None
        self.logits: torch.Tensor | None = None  # the graph's output, rewritten by every replay


class StaticDecode:
    def __init__(self, model: Decoder, kv: KVCache, attention: AttentionBackend) -> None:
        self.model, self.kv, self.backend = model, kv, attention
        self.device = kv.k.device
        self.steps: dict[tuple[int, int], StaticStep] = {}

    def run(self, seqs: Sequence[SequenceState]) -> torch.Tensor | None:
        """Float32 logits `[len(seqs), vocab]` of the sequences' next tokens (their K/V written), or None
        (nothing run) for a step this does not serve: one not of decode tokens alone (each sequence's last),
        more than the largest bucket, or a backend without a static decode. On CUDA the rows are the graph's
        output, rewritten by its next replay: the step reads them (samples, copies kept logits to the host)
        before another runs."""
        if not 0 < len(seqs) <= BUCKETS[-1] or any(len(s) != s.num_kv + 1 for s in seqs):
            return None
        step = self.prepare(seqs)
        if step is None:
            return None
        if self.device.type != "cuda":
            logits = self.forward(step)
        else:
            if step.graph is None:
                step.graph, step.logits = _capture(lambda: self.forward(step))
            step.graph.replay()
            logits = step.logits
        assert logits is not None
        return logits[: len(seqs)]

    def prepare(self, seqs: Sequence[SequenceState]) -> StaticStep | None:
        """The host's part, outside the captured region: the bucket, the staged rows, the kernel's plan."""
        bs = self.kv.block_size
        width = bucket(max(s.num_kv // bs + 1 for s in seqs))
        key = (bucket(len(seqs)), width)
        if key not in self.steps:
            buffers = DecodeBuffers(*key, bs, self.device)
            attention = self.backend.static_decode(buffers, self.kv, self.model.config.num_heads)
            if attention is None:
                return None
            self.steps[key] = StaticStep(buffers, attention)
        step = self.steps[key]
        step.buffers.fill(seqs)
        plan = getattr(step.attention, "plan", None)
        if plan is not None:  # a library's per-step plan (FlashInfer), on the host's page counts
            plan()
        return step

    def forward(self, step: StaticStep) -> torch.Tensor:
        """The captured region: every row through the model, every row's logits."""
        b = step.buffers
        ctx = StepContext([], self.kv, b.slots, step.attention, token_positions=b.positions)
        return self.model(b.ids, ctx, slice(None))


def _capture(fn: Callable[[], torch.Tensor]) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    """`fn` captured in a CUDA graph after two warm-up runs on a side stream (lazy initialization and
    library workspaces happen outside the capture); the graph and its output tensor."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out
