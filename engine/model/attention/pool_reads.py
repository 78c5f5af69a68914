"""How the torch backend reads a step's context from the pool: runs of consecutive blocks, read in place
(strided views, which the fused kernels take as they are), or pool slots gathered into one buffer; and CPU
decode rows read run by run (`RunReads`): their long runs in place, only their short ones gathered."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.devices import to_device
from engine.kv.pool import KVCache
from engine.kv.slots import padded
from engine.kv.step import SeqSpan

# A run holding less K/V than this (both, one layer) is gathered with its row's other short runs instead of
# read in place by a kernel call of its own, where the row has more than two runs and two or more short ones:
# about the memory a CPU copies in the time one more call and its log-sum-exp merge take (tens of
# microseconds). 256 KiB is 171 tokens of SmolLM2 in float32, 342 in bfloat16, 256 of Qwen2.5-0.5B in float32.
IN_PLACE_BYTES = 256 * 1024


def runs_of(table: list[int], end: int, block_size: int) -> list[tuple[int, int]]:
    """(first slot, length) of each run of consecutive blocks holding positions [0, end), in order (a fresh
    pool hands a prompt's blocks out in order: one run; a cached prefix and the blocks taken after it: two)."""
    runs: list[list[int]] = []
    for block in table[: -(-end // block_size)]:
        if runs and block == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([block, 1])
    out = [(first * block_size, count * block_size) for first, count in runs]
    if out:  # the last run ends at `end`
        out[-1] = (out[-1][0], end - sum(length for _, length in out[:-1]))
    return out


def slots(spans: Sequence[SeqSpan], ends: list[int], block_size: int, device: torch.device) -> torch.Tensor:
    """Pool slots of positions [0, ends[b]) of every sequence, `[sequences, max(ends)]`, built on the device
    from the block tables (one small transfer); past its end a row repeats its last position (never read
    unmasked, always written)."""
    width = -(-max(ends) // block_size)
    tables = to_device(padded([s.block_table[:width] for s in spans], width), torch.long, device)
    last = (to_device(ends, torch.long, device) - 1).clamp_(min=0)
    pos = torch.minimum(torch.arange(max(ends), device=device)[None, :], last[:, None])
    return tables.gather(1, pos // block_size) * block_size + pos % block_size


class RunReads:
    """CPU decode rows, each read run by run. A row of one or two runs of consecutive blocks (a fresh pool's
    prompt; a cached prefix and the blocks taken after it) reads them in place; a row of more reads its runs
    holding at least IN_PLACE_BYTES of K/V a layer in place and gathers its shorter ones, where it has two or
    more, in order into one segment. In-place runs are views of every layer's pool, made once a step (a
    layer's read is one index); all rows' gathered blocks are copied by one index per layer (K and V) into
    buffers made once a step, each row's segment a view of them made once. What a row reads depends on its
    own block table only, so a row reads the same alone or in any batch."""

    def __init__(self, runs: list[list[tuple[int, int]]], kv: KVCache, device: torch.device) -> None:
        bs, per_token = kv.block_size, 2 * kv.k[0, 0, 0].numel() * kv.k.element_size()
        pools = [p.view(p.shape[0], -1, *p.shape[-2:]) for p in (kv.k, kv.v)]  # [layers, slots, kv_heads, d]
        self.kv, self.in_place = kv, []
        blocks: list[int] = []  # every gathered block, row after row
        segments: list[tuple[int, int] | None] = []  # a row's (first gathered slot, tokens), or none
        for row in runs:
            short = [r for r in row if r[1] * per_token < IN_PLACE_BYTES]
            gather = short if len(row) > 2 and len(short) > 1 else []
            self.in_place.append(
                [
                    tuple(p[:, first : first + length].transpose(1, 2)[:, None] for p in pools)
                    for first, length in row
                    if (first, length) not in gather
                ]
            )
            segments.append((len(blocks) * bs, sum(n for _, n in gather)) if gather else None)
            blocks += [b for first, n in gather for b in range(first // bs, first // bs - (-n // bs))]
        self.gathered = len(blocks) * bs  # slots copied per layer (a partial last block whole)
        self.slots: torch.Tensor | None = None
        self.segments: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(runs)
        if blocks:
            starts = to_device([b * bs for b in blocks], torch.long, device)
            self.slots = (starts[:, None] + torch.arange(bs, device=device)).view(-1)
            self.buffers = tuple(p.new_empty(self.gathered, *p.shape[-2:]) for p in pools)
            for b, segment in enumerate(segments):
                if segment is not None:
                    first, n = segment
                    k, v = (buf[first : first + n][None].transpose(1, 2) for buf in self.buffers)
                    self.segments[b] = (k, v)

    def rows(self, layer: int) -> list[list[tuple[torch.Tensor, torch.Tensor]]]:
        """Each row's keys and values `[1, kv_heads, keys, head_dim]` in this layer: its in-place runs in
        order, then its gathered segment (copied here, for every row at once)."""
        if self.slots is not None:
            pool = (self.kv.k_slots[layer], self.kv.v_slots[layer])
            for p, buffer in zip(pool, self.buffers, strict=True):
                torch.index_select(p, 0, self.slots, out=buffer)
        return [
            [(k[layer], v[layer]) for k, v in runs] + ([segment] if segment is not None else [])
            for runs, segment in zip(self.in_place, self.segments, strict=True)
        ]
