"""`ModelRunner`: one forward step of the decoder over a batch of requests' tokens.

A step's rows are the scheduled tokens of every request, in the order of the work. Every request's K/V live
in the pool: each layer writes the step's new K/V once at the requests' block-table slots, and one attention
dispatch (the engine's `AttentionBackend`, planned once per step) reads every sequence's context through its
block table. Only the last row of each request that reaches the end of its tokens goes through the LM head:
those requests sample. The step's token ids, positions, write slots and sampled rows are written in place
into buffers made once (`StepInputs`): a decode step builds no list and makes no tensor for them. `compute`
is the other kind of forward: into a private window, for the approximate
experiments of engine/approx only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.kv.pool import KVCache
from engine.kv.slots import slots_of
from engine.kv.step import AttentionBackend, SeqSpan, StepContext, WindowSpan
from engine.kv.window import KVWindow
from engine.model.decoder import Decoder
from engine.runtime.request import Request
from engine.runtime.static_decode import StaticDecode
from engine.runtime.step_inputs import StepInputs


class ModelRunner:
    def __init__(
        self, model: Decoder, kv: KVCache, device: torch.device, attention: AttentionBackend
    ) -> None:
        self.model, self.kv, self.device, self.attention = model, kv, device, attention
        self.inputs = StepInputs(device)  # the eager step's inputs, reused step after step
        # decode steps over preallocated buffers per bucket (captured as CUDA graphs on CUDA); off: eager
        self.static: StaticDecode | None = None

    def use_static_decode(self, on: bool) -> None:
        """Run decode steps (every request computing its last token) as static steps (engine/runtime/
        static_decode.py: CUDA graphs on CUDA), or eagerly."""
        self.static = StaticDecode(self.model, self.kv, self.attention) if on else None

    def run(self, work: Sequence[tuple[Request, int]]) -> tuple[list[Request], torch.Tensor]:
        """Compute each request's next `n` tokens (positions num_kv .. num_kv + n); the requests that sample,
        in row order, and their float32 logits `[len, vocab]`."""
        if self.static is not None:
            logits = self.static.run([req.seq for req, _ in work])
            if logits is not None:  # a decode step: every request computed its last token and samples
                for req, _ in work:
                    req.seq.num_kv += 1
                return [req for req, _ in work], logits
        n = sum(k for _, k in work)
        # the step's token ids, positions, write slots and sampled rows, written in place (step_inputs.py)
        values = self.inputs.reserve(3 * n + len(work))
        spans: list[SeqSpan] = []
        sampling: list[Request] = []
        bs, i = self.kv.block_size, 0
        for req, k in work:
            assert k >= 1, f"request {req.id} scheduled with {k} tokens"
            seq, start = req.seq, req.seq.num_kv
            if k == 1:  # a decode token (or a prompt's last): three values, no list
                values[i], values[n + i] = seq.token_ids[start], start
                values[2 * n + i] = seq.block_table[start // bs] * bs + start % bs
            else:
                values[i : i + k] = seq.token_ids[start : start + k]
                values[n + i : n + i + k] = range(start, start + k)
                values[2 * n + i : 2 * n + i + k] = slots_of(seq.block_table, start, start + k, bs)
            spans.append(SeqSpan(start, k, seq.block_table))
            i += k
            if start + k == len(seq):
                values[3 * n + len(sampling)] = i - 1
                sampling.append(req)
        meta = self.inputs.on_device(3 * n + len(sampling))
        ctx = StepContext(
            spans,
            self.kv,
            write_slots=meta[2 * n : 3 * n],
            attention=self.attention.plan(spans, self.kv),
            token_positions=meta[n : 2 * n],
        )
        if len(sampling) == 1 and values[3 * n] == n - 1:  # one request samples, from the last row
            pick: slice | torch.Tensor = slice(-1, None)
        else:  # no row (every prompt chunk ends before its prompt does), or several
            pick = meta[3 * n :] if sampling else slice(0, 0)
        logits = self.model(meta[:n], ctx, pick)
        for req, k in work:
            req.seq.num_kv += k
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
        span = WindowSpan(window, start, len(token_ids), positions)
        return self.model(self._tensor(token_ids), StepContext.windowed(span))[0]

    def _tensor(self, ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor(ids, dtype=torch.long, device=self.device)
