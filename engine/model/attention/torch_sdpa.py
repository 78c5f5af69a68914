"""The torch backend: paged attention from PyTorch's own kernels, on every device (the CPU's exact path; on
CUDA the fallback where no paged kernel library is installed, on MPS the only one).

A step's sequences are laid out as a padded batch `[sequences, longest span]` (a view when every span has
the same length, as in a decode step or a batch of equal chunks; else one index gathers the rows and one
scatters the output back). Per layer, a fixed number of calls serves the whole batch, whatever its size
(but for `runs`):

- `causal` (every span starts at 0: cold prefills): one causal call over the step's own new K/V; the pool
  is not read;
- `gathered` (every decode step off the CPU): the keys [0, start + length) of every sequence gathered
  from the pool through its block table into one `[sequences, kv_heads, longest, head_dim]` buffer (reused
  by every layer of the step), then one masked call (off the CPU: the mask folded for the query heads once
  per step; one sequence's chunk lower-right causal with `enable_gqa`, no mask made);
- `split` (a CPU prefill after a cached prefix): the cached context [0, start) gathered as above and read
  by one call without a causal mask (one sequence's query heads folded into its rows per KV head), the new
  keys by one causal call, both returning their log-sum-exps, merged exactly (`merge`): the work of the FLOP
  model, where one masked call over all keys would compute every (query, key) score and skip none;
- `runs` (every CPU decode step): each sequence's query over its runs of consecutive blocks, merged by
  log-sum-exp (`RunReads`): long runs read in place, a row's short ones (of more than two runs) gathered
  into one segment; rows reading one run (a shared prefix) read it in one call, short reads of equal length
  gathered into one call. A row's output is bitwise the same alone or beside any others;
- `padded` (a CPU prefill of one sequence after a short prefix, `padding_pays`): one causal call over its
  keys [0, start + length), its query rows placed after `start` rows of zeros: the cold prefill's kernel
  work and rounding (bitwise equal to it), start x start / 2 scores wasted.

Every gathered index points at a position its sequence has written (padding repeats its last one), so a
masked key is finite and weighs exactly 0. The memory a request adds is one layer's gather, for one step; a
step of one sequence whose blocks are consecutive reads them in place instead (strided views of the pool,
which the fused kernels take as they are).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn.attention.bias import CausalBias, causal_lower_right

from engine.devices import to_device
from engine.kv.decode_buffers import DecodeBuffers
from engine.kv.pool import KVCache
from engine.kv.step import SeqSpan
from engine.model.attention.pool_reads import runs_of, slots
from engine.model.attention.run_reads import RunReads
from engine.model.attention.sdpa import attend
from engine.model.attention.torch_decode import TorchDecode
from engine.model.causal_attention import merge

# Pad while start^2 <= PADDED_CROSSOVER x length (padding_pays): one Qwen2.5-0.5B layer, float32, 2 CPU threads
# (scripts/warm_crossover.py, CPU time on a loaded machine): padded / split 0.88 at 16 cached before 1,008
# new tokens, 1.04-1.17 at 64-128, 1.30 at 256.
PADDED_CROSSOVER = 4


class TorchBackend:
    name = "torch"

    def __init__(self, device: torch.device, arrangement: str | None = None) -> None:
        """`arrangement`: the device type whose kernels the calls are arranged for (default: `device`'s own;
        the tests run CUDA's on a CPU, tests/cuda_layout.py)."""
        self.device = device
        cpu = (arrangement or device.type) == "cpu"
        self.split = cpu  # a fused kernel returning log-sum-exps under a mask: CPU flash
        self.native_gqa = cpu  # CPU flash broadcasts KV heads; elsewhere query heads fold
        self.description = (
            "torch SDPA: one call per layer for the batch over K/V gathered through the block "
            + (
                "tables (a prefill after a cached prefix: context and new keys merged by log-sum-exp)"
                if self.split
                else "tables, masked"
            )
        )

    def plan(self, spans: Sequence[SeqSpan], kv: KVCache) -> TorchPlan:
        return TorchPlan(spans, kv, self.device, self.split, self.native_gqa)

    def static_decode(self, buffers: DecodeBuffers, kv: KVCache, num_heads: int) -> TorchDecode:
        return TorchDecode(buffers, kv, self.native_gqa)


class TorchPlan:
    """A step's attention: its indices and masks built once (one transfer each), run per layer."""

    def __init__(
        self, spans: Sequence[SeqSpan], kv: KVCache, device: torch.device, split: bool, native_gqa: bool
    ) -> None:
        self.kv, self.dtype, self.native_gqa = kv, kv.k.dtype, native_gqa
        lengths, starts = [s.length for s in spans], [s.start for s in spans]
        self.n, self.width = len(spans), max(lengths)
        self.pad = self.unpad = None
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None  # the gathered K/V, reused per layer
        if any(n != self.width for n in lengths):
            first = [sum(lengths[:b]) for b in range(self.n)]
            grid = [
                [f + min(i, n - 1) for i in range(self.width)] for f, n in zip(first, lengths, strict=True)
            ]
            self.pad = to_device(grid, torch.long, device).view(-1)
            rows = [b * self.width + i for b, n in enumerate(lengths) for i in range(n)]
            self.unpad = to_device(rows, torch.long, device)
        if not any(starts):
            self.mode = "causal"
            return
        if split and self.n == 1 and padding_pays(starts[0], lengths[0]):
            self.mode, self.start = "padded", starts[0]
        else:
            self.mode = "gathered" if self.width == 1 or not split else "split"
        ends = [s + (n if self.mode != "split" else 0) for s, n in zip(starts, lengths, strict=True)]
        self.runs = [runs_of(s.block_table, e, kv.block_size) for s, e in zip(spans, ends, strict=True)]
        self.run = self.runs[0][0] if self.n == 1 and len(self.runs[0]) == 1 else None
        if self.width == 1 and split:
            self.mode = "runs"  # CPU decode rows, each over its runs: long ones in place, short ones gathered
            self.reads = RunReads(self.runs, kv, device)
            return
        self.slots = slots(spans, ends, kv.block_size, device) if self.run is None else None
        self.folded: torch.Tensor | None = None  # off the CPU: the mask with query heads folded into rows
        # none for one decode row, or for equal contexts (one sequence among them)
        self.mask: torch.Tensor | CausalBias | None = None
        if self.mode == "gathered" and self.n == 1 and self.width > 1 and not native_gqa:
            self.mask = causal_lower_right(self.width, ends[0])  # query i sees [0, start + i]: no mask made
        elif self.mode == "gathered":  # query i of sequence b sees keys [0, start_b + i]
            if len(set(ends)) > 1 or self.width > 1:
                queries = torch.arange(self.width, device=device)
                first = to_device(starts, torch.long, device)
                keys = torch.arange(max(ends), device=device)
                visible = keys[None, None, :] <= (first[:, None, None] + queries[None, :, None])
                self.mask = _additive(visible[:, None], self.dtype)
        else:  # the cached context [0, start_b); a sequence with none gets weight 0 in the merge
            if len(set(ends)) > 1:
                keys = torch.arange(max(ends), device=device)
                visible = keys[None, :] < to_device(ends, torch.long, device)[:, None]
                self.mask = _additive(visible[:, None, None], self.dtype)
            self.no_context = (
                to_device([s == 0 for s in starts], torch.bool, device)[:, None, None]
                if 0 in starts
                else None
            )

    def forward(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if self.mode == "runs":
            return self.reads.forward(layer, q)
        qb, native = self._batched(q), self.native_gqa
        if self.mode == "causal":
            out = attend(qb, self._batched(k), self._batched(v), None, True, native)[0]
        elif self.mode == "gathered":
            out = attend(qb, *self._gather(layer), self._folded(q.shape[1]), False, native)[0]
        elif self.mode == "padded":  # the rows of a cold prefill of [0, start + length): its kernel's work
            padded = torch.cat((q.new_zeros(self.start, *q.shape[1:]), q))[None].transpose(1, 2)
            out = attend(padded, *self._gather(layer), None, True, native)[0][:, :, self.start :]
        else:
            o_ctx, lse_ctx = self._context(layer, qb)
            o_new, lse_new = attend(qb, self._batched(k), self._batched(v), None, True, native)
            if self.no_context is not None:
                lse_ctx = lse_ctx.masked_fill(self.no_context, float("-inf"))
            out = merge(o_ctx, lse_ctx, o_new, lse_new)
        rows = out.transpose(1, 2).reshape(self.n * self.width, *q.shape[1:])
        return rows if self.unpad is None else rows.index_select(0, self.unpad)

    def _context(self, layer: int, qb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The split step's attention over the cached context [0, start), no causal mask. One sequence's
        query heads are folded into its rows per KV head, `[1, kv_heads, group x length, head_dim]`: CPU flash
        reads the context's K/V once per block of rows where it read them once per head (Qwen2.5-0.5B's 64
        queries over 8,192 keys: 0.85x the time in float32, 0.91-1.0x in bfloat16; 2 AMX cores). The same
        scores and sums, blocked otherwise: equal to float rounding. A batch keeps its heads apart, so that a
        row's blocking does not depend on its neighbours' lengths."""
        keys, values = self._gather(layer)
        if self.n > 1:
            return attend(qb, keys, values, self.mask, False, self.native_gqa)
        b, heads, t, d = qb.shape
        out, lse = attend(qb.reshape(b, keys.shape[1], -1, d), keys, values, None, False, self.native_gqa)
        return out.reshape(b, heads, t, d), None if lse is None else lse.reshape(b, heads, t)

    def _folded(self, heads: int) -> torch.Tensor | CausalBias | None:
        """The step's mask as the kernels take it: on the CPU as it is (its flash kernel broadcasts KV heads);
        elsewhere with the query heads of each KV head folded into its rows, `[sequences, 1, group x width,
        keys]`, made at the first layer and reused by the others."""
        if self.native_gqa or self.mask is None or isinstance(self.mask, CausalBias):
            return self.mask
        if self.folded is None:
            b, keys, group = self.n, self.mask.shape[-1], heads // self.kv.k.shape[-2]
            rows = self.mask.expand(b, 1, self.width, keys)[:, :, None].expand(b, 1, group, self.width, keys)
            self.folded = rows.reshape(b, 1, group * self.width, keys)
        return self.folded

    def _batched(self, x: torch.Tensor) -> torch.Tensor:
        """Step rows `[T, heads, head_dim]` as the padded batch `[sequences, heads, width, head_dim]`."""
        if self.pad is not None:
            x = x.index_select(0, self.pad)
        return x.view(self.n, self.width, *x.shape[1:]).transpose(1, 2)

    def _gather(self, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The layer's keys and values at `slots`, `[sequences, kv_heads, keys, head_dim]`, into buffers
        allocated at the first layer and reused by the others."""
        pool = (self.kv.k_slots[layer], self.kv.v_slots[layer])
        if self.run is not None:  # one sequence in consecutive blocks: read in place (a strided view)
            first, length = self.run
            return pool[0][first : first + length][None].transpose(1, 2), pool[1][first : first + length][
                None
            ].transpose(1, 2)
        if self.buffers is None:
            assert self.slots is not None
            self.buffers = tuple(p.new_empty(self.slots.numel(), *p.shape[1:]) for p in pool)  # type: ignore[assignment]
        assert self.buffers is not None and self.slots is not None
        shape = (*self.slots.shape, *pool[0].shape[1:])
        out = []
        for p, buffer in zip(pool, self.buffers, strict=True):
            torch.index_select(p, 0, self.slots.view(-1), out=buffer)
            out.append(buffer.view(shape).transpose(1, 2))
        return out[0], out[1]


def padding_pays(start: int, length: int) -> bool:
    """Whether a prefill of `length` tokens after `start` cached ones runs as one causal call over all its
    keys, its query rows front-padded to the cold prefill's (the same kernel work as cold, bitwise equal, plus
    start x start / 2 wasted scores), rather than split into a context call, a causal call and their merge."""
    return length > 1 and start * start <= PADDED_CROSSOVER * length


def _additive(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A boolean mask as the additive one (0 or -inf, in the queries' dtype) the CPU flash kernel takes."""
    return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(
        ~visible, float("-inf")
    )
