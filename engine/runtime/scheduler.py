"""`Scheduler`: which requests run in the next step, and how many of their tokens (vLLM v1's semantics).

A step is one batch. Running requests come first, in admission order, each with its pending tokens (one
when decoding, the next chunk of a prompt otherwise); then waiting requests are admitted in arrival order
(prefix lookup first, so a request computes only what the cache does not hold, including blocks another
request in flight published a step before) while the step has token budget (`max_num_batched_tokens`) and
room (`max_num_seqs`). A request gets as many of its pending tokens as the budget leaves: long prompts are
prefilled in chunks across steps, beside the other requests' decode tokens.

Decode tokens come first: a running request still computing its prompt leaves one token of the budget for
each decoding request after it. A step may hold prefills (`schedule(hold_prefills=True)`, when the engine's
time-share says so: engine/runtime/prefill_share.py): running requests still computing their prompt sit that
step out, and a waiting request whose uncached prompt the step cannot compute whole is admitted without
computing any of it (its prefix looked up, so its client hears of its admission; its first chunk waits for a
step without the hold), so requests that decode, and short requests, run at their own pace beside a long
prefill instead of one step per chunk.

Every request's K/V live in the pool's blocks. A private request (cache off) is admitted on the same path
under a salt of its own (`Request.salt`): its lookup misses, its blocks are hashed but never entered, so it
reads nothing cached, publishes nothing and leaves its blocks empty; it evicts a cached block only when no
empty one is left. A prefilled request (an approximate assembly's) has its K/V already: it takes blocks for
them, and the engine copies them in at admission.

When a running request needs a block and none is free, the most recently admitted request that can be
recomputed (not a prefilled one) and is not already placed in this step's work is preempted: its blocks are
released (their full blocks stay cached), and it goes back to the front of the queue with every token it
has, to be recomputed, mostly from the prefix cache, when it is admitted again. A prefilled request that
finds no such victim waits for room (the requests placed before it go on, and free blocks as they finish).
No waiting request is admitted in a step that preempted or left a running request waiting.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from engine.errors import CacheCapacityError
from engine.kv.block_manager import BlockManager
from engine.runtime.request import Request, Status


@dataclass
class ScheduledStep:
    work: list[tuple[Request, int]] = field(default_factory=list)  # (request, tokens to compute), in order
    admitted: list[Request] = field(
        default_factory=list
    )  # admitted this step (a prefilled one's K/V to copy)
    preempted: list[Request] = field(default_factory=list)


class Scheduler:
    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        self.blocks = blocks
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []  # in admission order: the last is preempted first
        self.preemptions = 0  # since the engine started

    def add(self, req: Request) -> None:
        """Queue a request; one the pool could never hold, even alone, is refused (a request that fits waits,
        or preempts others, for room)."""
        needed = self.blocks.blocks_for(req.capacity)
        if needed > self.blocks.num_blocks:
            raise CacheCapacityError(
                f"request needs {needed} KV blocks ({req.capacity} tokens at {self.blocks.block_size} per "
                f"block) but the cache holds {self.blocks.num_blocks}; raise cache_tokens/cache_gb or "
                "shorten the request"
            )
        self.waiting.append(req)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def uncached(self, req: Request) -> int:
        """The tokens a waiting request's admission would compute: those past its cached prefix (a prefilled
        one's pending tokens)."""
        if req.window is not None:
            return req.pending
        return (
            len(req.seq) - len(self.blocks.match(req.seq.token_ids, req.seq.salt)[0]) * self.blocks.block_size
        )

    def fits_a_step(self, req: Request) -> bool:
        """Whether one step computes a waiting request's prompt whole (no lookup when its length says so)."""
        return req.pending <= self.max_num_batched_tokens or self.uncached(req) <= self.max_num_batched_tokens

    def others_have_work(self) -> bool:
        """Whether a request would wait for a step that computes a long prompt's chunk: one running that decodes
        (its prompt computed), or one queued whose prompt one step computes whole."""
        decoding = any(r.seq.num_kv >= r.seq.num_prompt for r in self.running)
        return decoding or any(self.fits_a_step(r) for r in self.waiting)

    def schedule(self, hold_prefills: bool = False) -> ScheduledStep:
        """The next step's batch; with `hold_prefills`, running requests still computing their prompt are left
        out of it and only prompts it computes whole are admitted (unless nothing would run: then a step as
        without)."""
        step, budget = ScheduledStep(), self.max_num_batched_tokens
        decoders = sum(1 for r in self.running if r.seq.num_kv >= r.seq.num_prompt)  # one token each, first
        i, short = 0, False
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if req.seq.num_kv >= req.seq.num_prompt:
                decoders -= 1
                n = min(req.pending, budget)
            elif hold_prefills or budget <= decoders:
                i += 1  # held, or what the budget has left is the decoding requests' after it
                continue
            else:
                n = min(req.pending, budget - decoders)
            if not self._make_room(i, req.seq.num_kv + n, step):
                short = True  # preempted, or waits for room: nothing after it is placed in this step
                break
            step.work.append((req, n))
            budget -= n
            i += 1
        admit = not (short or step.preempted)
        while admit and self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            req = self.waiting[0]
            n = self._admit(req, budget, whole=hold_prefills)
            if n is None:
                break  # no room for its first chunk: it waits (and keeps its place)
            self.waiting.popleft()
            self.running.append(req)
            req.status = Status.RUNNING
            step.admitted.append(req)
            if n > 0:
                step.work.append((req, n))
                budget -= n
        if hold_prefills and not step.work and not step.preempted:
            again = self.schedule()
            again.admitted[:0] = step.admitted  # admitted above, without a token to compute then
            return again
        return step

    def finish(self, req: Request) -> None:
        """Take a finished or aborted request out of the queues and release its blocks."""
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)
            self.blocks.release(req.seq)
        req.status, req.window = Status.FINISHED, None

    def _admit(self, req: Request, budget: int, whole: bool = False) -> int | None:
        """Look up the cached prefix and take the blocks of the first chunk; the chunk's length, or None (and
        no change) when its blocks cannot be had. With `whole` (a step that holds prefills), a prompt whose
        uncached tokens the budget does not hold is admitted with none of them: its prefix is looked up and
        its cached blocks held, its first chunk waits for a step without the hold."""
        seq = req.seq
        if req.window is not None:  # prefilled: blocks for the K/V it has and its next token, no lookup
            n = min(req.pending, budget)
            if not self.blocks.fits([], seq.num_kv + n):
                return None
            self.blocks.grow(seq, seq.num_kv + n)
            return n
        matched = self.blocks.match(seq.token_ids, seq.salt)
        cached = len(matched[0]) * self.blocks.block_size
        n = min(len(seq) - cached, budget)
        if whole and n < len(seq) - cached:
            n = 0
        if not self.blocks.fits(matched[0], cached + n):
            return None
        self.blocks.admit(seq, not req.private, matched)  # a private request's lookup is not counted
        self.blocks.grow(seq, cached + n)
        return n

    def _make_room(self, i: int, num_tokens: int, step: ScheduledStep) -> bool:
        """Blocks for positions [0, num_tokens) of the running request `running[i]`, preempting the newest
        requests that can be recomputed, among it and those after it (the ones before it are in this step's
        work already), until they fit; False if it had to go, or (prefilled) must wait for room."""
        req = self.running[i]
        while not self.blocks.can_grow(req.seq, num_tokens):
            victim = next((r for r in reversed(self.running[i:]) if not r.prefilled), None)
            if victim is None and any(not r.prefilled for r in self.running[:i]):
                return False  # they free blocks as they finish
            if victim is None:
                raise CacheCapacityError(
                    "the KV cache is full of prefilled requests' blocks, which cannot be recomputed; "
                    "raise cache_tokens/cache_gb or run fewer assemblies at once"
                )
            self._preempt(victim)
            step.preempted.append(victim)
            if victim is req:
                return False
        self.blocks.grow(req.seq, num_tokens)
        return True

    def _preempt(self, req: Request) -> None:
        self.running.remove(req)
        self.blocks.release(req.seq)
        req.seq.num_kv = 0
        req.status = Status.WAITING
        req.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(req)
