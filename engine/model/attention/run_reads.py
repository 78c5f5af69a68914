"""CPU decode rows read run by run (`RunReads`), the batch's calls shared where its rows' reads coincide.

A row's reads depend on its own block table only: its runs of consecutive blocks (`runs_of`), each one read,
except that a row of more than two runs reads its short ones (under IN_PLACE_BYTES of K/V a layer, where it
has two or more) as one segment, gathered, after its long ones. Its output is its reads' CPU flash calls
merged in that order by their log-sum-exps.

Where those reads are served depends on the batch. Read i of every row is one pass; within a pass, reads of
equal length share a call: rows reading the same run of the pool (a cached prefix) read it in one call, its
view expanded over them (stride 0, no copy); short distinct reads (each row's own last blocks) are gathered
into one buffer, row after row, and read as one batch; the rest are read in place, a call each. What this
saves is each call's fixed cost (tens of microseconds); every row still reads its keys itself. The flash kernel
computes each (row, head) of a call apart, from the same keys in the same order, whatever the call's batch
and strides, and the merge is elementwise: **a row's output is bitwise the one its sequence's own step
computes**, alone or beside any others (tests/model/test_attention_backends.py). A 32-row step over a shared
1,024-token prefix makes 3 calls a layer instead of 63 (one row's own blocks follow the prefix in the pool).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import torch

from engine.devices import to_device
from engine.kv.pool import KVCache
from engine.model.attention.sdpa import attend
from engine.model.causal_attention import merge

# A run holding less K/V than this (both, one layer) is short: gathered with its row's other short runs
# where the row has more than two runs and two or more short ones, and gathered with other rows' reads of its
# length into one call. About the memory a CPU copies in the time one more call and its log-sum-exp merge take
# (tens of microseconds). 256 KiB is 171 tokens of SmolLM2 in float32, 342 in bfloat16, 256 of Qwen2.5-0.5B in
# float32.
IN_PLACE_BYTES = 256 * 1024

Run = tuple[int, int]  # (first slot, tokens)
Read = tuple[Run, ...]  # one run, or a segment of short runs gathered in order
Rows = torch.Tensor | slice | None  # some of a step's rows: an index, consecutive ones, or every one
Plan = tuple[list[int], Read | None]  # a call's rows and the run they read in place (None: gathered)


@dataclass(frozen=True)
class Call:
    """One flash call of a pass: the rows it serves (`index`: those rows of the step's queries, a slice where
    they are consecutive; None: every row) and their K/V `[rows, kv_heads, length, head_dim]`, of every layer
    (`per_layer`: index it by layer) or in the gather buffer, which each layer refills."""

    rows: list[int]
    index: Rows
    keys: torch.Tensor
    values: torch.Tensor
    per_layer: bool


@dataclass(frozen=True)
class Pass:
    """Every row's read i: its calls, the rows they serve (`rows`, ascending: an index, a slice where they are
    consecutive, None for every row) and the permutation from the calls' outputs, concatenated, to that
    order (None: already in it)."""

    calls: list[Call]
    rows: Rows
    order: torch.Tensor | None


def row_reads(runs: list[Run], per_token: int) -> list[Read]:
    """A row's reads, from its own runs only: each run, or (more than two runs, two or more of them short)
    its long runs and then one segment of its short ones."""
    short = [r for r in runs if r[1] * per_token < IN_PLACE_BYTES]
    if len(runs) > 2 and len(short) > 1:
        return [(r,) for r in runs if r not in short] + [tuple(short)]
    return [(r,) for r in runs]


class RunReads:
    """A CPU decode step's reads (see the module docstring): its passes, made once a step; the gathered
    blocks of every pass copied by one index per layer (K and V) into buffers made once a step."""

    def __init__(self, runs: list[list[Run]], kv: KVCache, device: torch.device) -> None:
        bs, per_token = kv.block_size, 2 * kv.k[0, 0, 0].numel() * kv.k.element_size()
        self.pools = [p.view(p.shape[0], -1, *p.shape[-2:]) for p in (kv.k, kv.v)]  # [layers, slots, kvh, d]
        self.kv, self.n, self.device = kv, len(runs), device
        self.reads = [row_reads(row, per_token) for row in runs]
        self.blocks: list[int] = []  # every gathered block, in buffer order
        gathered: list[tuple[list[int], int, int, int]] = []  # (rows, first slot, stride, length)
        plans = [self._plan(i, per_token, gathered) for i in range(max(len(r) for r in self.reads))]
        self.gathered = len(self.blocks) * bs  # slots copied per layer (a partial last block whole)
        self.slots: torch.Tensor | None = None
        self.buffers: tuple[torch.Tensor, torch.Tensor] | None = None
        if self.blocks:
            starts = to_device([b * bs for b in self.blocks], torch.long, device)
            self.slots = (starts[:, None] + torch.arange(bs, device=device)).view(-1)
            k, v = (p.new_empty(self.gathered, *p.shape[-2:]) for p in self.pools)
            self.buffers = (k, v)
        views = iter(self._buffer_views(gathered))
        self.passes = [self._pass([self._call(rows, read, views) for rows, read in plan]) for plan in plans]

    def _plan(self, i: int, per_token: int, gathered: list[tuple[list[int], int, int, int]]) -> list[Plan]:
        """Pass i's calls: per length, the rows reading one run (expanded), then the reads read alone in
        place, then the gathered ones (segments; short runs where two or more share the length), whose blocks
        it appends to the buffer's (`self.blocks`) and whose place to `gathered`."""
        bs, plans = self.kv.block_size, []
        by_length: dict[int, list[tuple[int, Read]]] = defaultdict(list)
        for b, reads in enumerate(self.reads):
            if len(reads) > i:
                by_length[sum(n for _, n in reads[i])].append((b, reads[i]))
        for length, members in by_length.items():
            same: dict[Read, list[int]] = defaultdict(list)  # rows reading one run of the pool
            for b, read in members:
                if len(read) == 1:
                    same[read].append(b)
            plans += [(rows, read) for read, rows in same.items() if len(rows) > 1]
            alone = [(b, r) for b, r in members if len(r) > 1 or len(same[r]) == 1]
            short = length * per_token < IN_PLACE_BYTES
            copy = [(b, r) for b, r in alone if len(r) > 1 or short]
            if len(copy) < 2:  # a short run alone in its length reads in place
                copy = [(b, r) for b, r in copy if len(r) > 1]
            plans += [([b], r) for b, r in alone if (b, r) not in copy]
            if copy:
                gathered.append(([b for b, _ in copy], len(self.blocks) * bs, -(-length // bs) * bs, length))
                plans.append(([b for b, _ in copy], None))
                for _, read in copy:
                    self.blocks += [
                        k for first, n in read for k in range(first // bs, (first - 1 + n) // bs + 1)
                    ]
        return plans

    def forward(self, layer: int, q: torch.Tensor) -> torch.Tensor:
        """Decode rows `[n, heads, head_dim]`: each row's reads in order, merged by their log-sum-exps."""
        if self.slots is not None and self.buffers is not None:
            for pool, buffer in zip(self.pools, self.buffers, strict=True):
                torch.index_select(pool[layer], 0, self.slots, out=buffer)
        queries = q[:, :, None]
        out = lse = None
        for i, p in enumerate(self.passes):
            parts = [
                attend(
                    select(queries, c.index),
                    c.keys[layer] if c.per_layer else c.keys,
                    c.values[layer] if c.per_layer else c.values,
                    None,
                    False,
                    True,
                )
                for c in p.calls
            ]
            o, lse_read = (torch.cat(x) if len(parts) > 1 else x[0] for x in zip(*parts, strict=True))
            assert lse_read is not None
            if p.order is not None:
                o, lse_read = o.index_select(0, p.order), lse_read.index_select(0, p.order)
            if out is None or lse is None:  # read 0: every row has one
                out, lse = o, lse_read
                continue
            seen = select(lse, p.rows)
            merged = merge(select(out, p.rows), seen, o, lse_read)
            last = i + 1 == len(self.passes)
            union = None if last else torch.logaddexp(seen, lse_read)  # the union's, for the next merge
            if p.rows is None:
                out, lse = merged, lse if union is None else union
            elif isinstance(p.rows, slice):
                out[p.rows] = merged
                if union is not None:
                    lse[p.rows] = union
            else:
                out.index_copy_(0, p.rows, merged)
                if union is not None:
                    lse.index_copy_(0, p.rows, union)
        assert out is not None
        return out.view(q.shape)

    def _buffer_views(
        self, gathered: list[tuple[list[int], int, int, int]]
    ) -> list[tuple[torch.Tensor, ...]]:
        """Each gathered call's K/V in the buffers: its rows' reads, `stride` slots apart, `length` each."""
        if self.buffers is None:
            return []
        return [
            tuple(
                buf[first : first + len(rows) * stride]
                .view(len(rows), stride, *buf.shape[1:])[:, :length]
                .transpose(1, 2)
                for buf in self.buffers
            )
            for rows, first, stride, length in gathered
        ]

    def _call(self, rows: list[int], read: Read | None, views) -> Call:  # noqa: ANN001
        index = self._rows(rows)
        if read is None:  # gathered
            keys, values = next(views)
            return Call(rows, index, keys, values, False)
        (first, length), m = read[0], len(rows)
        keys, values = (
            p[:, first : first + length].transpose(1, 2)[:, None].expand(-1, m, -1, -1, -1)
            for p in self.pools
        )
        return Call(rows, index, keys, values, True)

    def _pass(self, calls: list[Call]) -> Pass:
        served = [b for c in calls for b in c.rows]
        rows = sorted(served)
        at = {b: j for j, b in enumerate(served)}  # each row's place among the calls' outputs
        order = None if served == rows else to_device([at[b] for b in rows], torch.long, self.device)
        return Pass(calls, self._rows(rows), order)

    def _rows(self, rows: list[int]) -> Rows:
        """`rows` (ascending) as `Rows`: none made from host values where they are consecutive."""
        if rows == list(range(rows[0], rows[-1] + 1)):
            return None if len(rows) == self.n else slice(rows[0], rows[-1] + 1)
        return to_device(rows, torch.long, self.device)


def select(x: torch.Tensor, rows: Rows) -> torch.Tensor:
    """The rows of `x` that `rows` names."""
    if rows is None:
        return x
    return x[rows] if isinstance(rows, slice) else x.index_select(0, rows)
