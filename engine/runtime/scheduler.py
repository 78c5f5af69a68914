"""`Scheduler`: which requests run in the next step, and how many of their tokens (vLLM v1's semantics).

A step is one batch. Running requests come first, in admission order, each with its pending tokens (one
when decoding, the next chunk of a prompt otherwise); then waiting requests are admitted in arrival order
(prefix lookup first, so a request computes only what the cache does not hold, including blocks another
request in flight published a step before) while the step has token budget (`max_num_batched_tokens`) and
room (`max_num_seqs`). A request gets as many of its pending tokens as the budget leaves: long prompts are
prefilled in chunks across steps, beside the other requests' decode tokens.

A step may hold prefills (`schedule(hold_prefills=True)`: the engine asks for it after a step that computed a
prompt chunk while other requests decoded or waited, until as much time went to steps without one): running
requests still computing their prompt sit that step out, so requests that decode, and short requests just
admitted, run at their own pace beside a long prefill instead of one token per chunk.

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

    def waiting_or_decoding(self) -> bool:
        """Whether any request would wait for a step that computes a long prompt chunk: one queued, or one
        running that decodes (its prompt computed)."""
        return bool(self.waiting) or any(r.seq.num_kv >= r.seq.num_prompt for r in self.running)

    def schedule(self, hold_prefills: bool = False) -> ScheduledStep:
        """The next step's batch; with `hold_prefills`, running requests still computing their prompt are left
        out of it (unless nothing else would run)."""
        step, budget = ScheduledStep(), self.max_num_batched_tokens
        i, short = 0, False
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            if hold_prefills and req.seq.num_kv < req.seq.num_prompt:
                i += 1
                continue
            n = min(req.pending, budget)
            if not self._make_room(i, req.seq.num_kv + n, step):
                short = True  # preempted, or waits for room: nothing after it is placed in this step
                break
            step.work.append((req, n))
            budget -= n
            i += 1
        admit = not (short or step.preempted)
        while admit and self.waiting and len(self.running) < self.max_num_seqs and budget > 0:
            req = self.waiting[0]
            n = self._admit(req, budget)
            if n == 0:
                break  # no room for its first chunk: it waits (and keeps its place)
            self.waiting.popleft()
            self.running.append(req)
            req.status = Status.RUNNING
            step.admitted.append(req)
            step.work.append((req, n))
            budget -= n
        if hold_prefills and not step.work and not step.preempted:
            return self.schedule()
        return step

    def finish(self, req: Request) -> None:
        """Take a finished or aborted request out of the queues and release its blocks."""
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)
            self.blocks.release(req.seq)
        req.status, req.window = Status.FINISHED, None

    def _admit(self, req: Request, budget: int) -> int:
        """Look up the cached prefix and take the blocks of the first chunk; the chunk's length, or 0 (and no
        change) when its blocks cannot be had."""
        seq = req.seq
        if req.window is not None:  # prefilled: blocks for the K/V it has and its next token, no lookup
            n = min(req.pending, budget)
            if not self.blocks.fits([], seq.num_kv + n):
                return 0
            self.blocks.grow(seq, seq.num_kv + n)
            return n
        matched = self.blocks.match(seq.token_ids, seq.salt)
        cached = len(matched[0]) * self.blocks.block_size
        n = min(len(seq) - cached, budget)
        if not self.blocks.fits(matched[0], cached + n):
            return 0
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
