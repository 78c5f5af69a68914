"""`ModelRunner`: one forward step of the decoder over a batch of requests' tokens.

A step's rows are the scheduled tokens of every request, pool-backed requests first (their new K/V go to the
pool at their block tables' slots, and to their windows), then private ones (their windows only). Attention
reads each request's window, or, for a pool-backed request whose window did not fit in memory, gathers its
context from the pool. Only the last row of each request that reaches the end of its tokens goes through the
LM head: those requests sample.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.kv.pool import KVCache
from engine.kv.step import SeqSpan, StepContext
from engine.kv.window import KVWindow
from engine.model.decoder import Decoder
from engine.runtime.request import Request


class ModelRunner:
    def __init__(self, model: Decoder, kv: KVCache, device: torch.device) -> None:
        self.model, self.kv, self.device = model, kv, device

    def run(self, work: Sequence[tuple[Request, int]]) -> tuple[list[Request], torch.Tensor]:
        """Compute each request's next `n` tokens (positions num_kv .. num_kv + n); the requests that sample,
        in row order, and their float32 logits `[len, vocab]`."""
        ordered = sorted(work, key=lambda w: w[0].private)  # stable: pool-backed first, each in work order
        ids: list[int] = []
        spans: list[SeqSpan] = []
        write_slots: list[torch.Tensor] = []
        sampling: list[Request] = []
        rows: list[int] = []
        for req, n in ordered:
            assert n >= 1, f"request {req.id} scheduled with {n} tokens"
            seq, start = req.seq, req.seq.num_kv
            ids += seq.token_ids[start : start + n]
            read = None
            if not req.private:
                write_slots.append(self.kv.slots(seq.block_table, start, start + n))
                if req.window is None and start > 0:
                    read = self.kv.slots(seq.block_table, 0, start + n)
            spans.append(SeqSpan(start, n, req.window, read))
            if start + n == len(seq):
                sampling.append(req)
                rows.append(len(ids) - 1)
        slots = (write_slots[0] if len(write_slots) == 1 else torch.cat(write_slots)) if write_slots else None
        ctx = StepContext(spans, self.kv, slots)
        if rows == [len(ids) - 1]:  # one request samples, from the last row (a solo step)
            pick: slice | torch.Tensor = slice(-1, None)
        else:  # no row (every prompt chunk ends before its prompt does), or several
            pick = torch.tensor(rows, dtype=torch.long, device=self.device) if rows else slice(0, 0)
        logits = self.model(self._tensor(ids), ctx, pick)
        for req, n in ordered:
            req.seq.num_kv += n
        return sampling, logits

    def run_isolating(
        self, work: Sequence[tuple[Request, int]]
    ) -> tuple[list[Request], torch.Tensor, list[tuple[Request, Exception]]]:
        """`run`, and where the batch's forward raises, each request's forward alone, so that a failure is the
        failing request's own: the requests that sample, their logits, and the requests that failed with
        their errors. A failed forward changes no request (`num_kv` advances only after a forward)."""
        try:
            return (*self.run(work), [])
        except Exception as error:  # noqa: BLE001 - retried one by one below; a lone failure is its own
            if len(work) == 1:
                return [], self._no_logits(), [(work[0][0], error)]
        sampling: list[Request] = []
        rows: list[torch.Tensor] = []
        failed: list[tuple[Request, Exception]] = []
        for req, n in work:
            try:
                alone, logits = self.run([(req, n)])
            except Exception as error:  # noqa: BLE001
                failed.append((req, error))
                continue
            sampling += alone
            rows.append(logits)
        return sampling, torch.cat(rows) if rows else self._no_logits(), failed

    def _no_logits(self) -> torch.Tensor:
        return torch.empty(0, self.model.config.vocab_size, device=self.device)

    def compute(
        self,
        token_ids: Sequence[int],
        window: KVWindow,
        start: int = 0,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One forward of `token_ids` into a private window: at positions start, start + 1, ... over its rows
        [0, start), or at scattered `positions` over whatever rows it holds (see SeqSpan). Float32 logits
        `[vocab]` of the last token."""
        span = SeqSpan(start, len(token_ids), window, positions=positions)
        return self.model(self._tensor(token_ids), StepContext([span]))[0]

    def _tensor(self, ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor(ids, dtype=torch.long, device=self.device)
