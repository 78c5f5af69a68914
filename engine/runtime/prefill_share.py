"""`PrefillShare`: how the engine's time is shared between a long prefill and every other request.

A long prompt (more tokens than one step's budget, `max_num_batched_tokens`) is prefilled in chunks, each a
step that takes as long as its tokens do (minutes for 4,096 tokens of a 0.5B model on a CPU). Requests that
decode, or whose prompt one step computes whole (short requests), would wait for every chunk; so the
scheduler holds the long prefills for some steps (`Scheduler.schedule(hold_prefills=True)`: running prompts
sit out, and only prompts one step computes whole are admitted), and this class decides which steps, by a
time-share:

- after a step that computed a chunk of a prompt still unfinished, steps that hold the long prefills follow
  for as long as that chunk took (its duration is owed: the *debt*), while other requests have work;
- a long prompt that arrives while other requests have work waits, before its first chunk, for as long as
  that chunk is expected to take at the pace of the latest step that computed at least `PACE_MIN_TOKENS`
  prompt tokens (once per request; with no such step yet, it starts at once);
- every other step pays its duration back.

So a short request waits at most for the chunk in progress, is admitted in the next step, and then runs
without a chunk between its steps for at least as long as that chunk took: a reply that takes less time than
one chunk comes at its own pace. The long prefill always progresses: while others have work it gets at least
half the engine's time (a chunk, then at most as long without one), otherwise all of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.runtime.scheduler import ScheduledStep, Scheduler

PACE_MIN_TOKENS = 256  # a step with fewer prompt tokens is dominated by per-step costs: not a prefill pace


class PrefillShare:
    def __init__(self, scheduler: Scheduler, clock: Callable[[], float] = time.perf_counter) -> None:
        self.scheduler, self.clock = scheduler, clock
        self.debt_s = 0.0  # seconds owed to steps that hold the long prefills
        self.pace_s = 0.0  # seconds per token of the latest step with PACE_MIN_TOKENS prompt tokens

    def hold(self) -> bool:
        """Whether the next step holds the long prefills (and owes a fresh long prompt its wait)."""
        sched = self.scheduler
        if self.debt_s > 0:
            return sched.others_have_work()
        fresh = next((r for r in sched.waiting if not r.deferred and not sched.fits_a_step(r)), None)
        if fresh is None or self.pace_s == 0 or not sched.others_have_work():
            return False
        fresh.deferred = True
        self.debt_s = self.pace_s * min(sched.uncached(fresh), sched.max_num_batched_tokens)
        return True

    def after(self, step: ScheduledStep, elapsed_s: float) -> None:
        """Account a step that took `elapsed_s`: one that left a prompt unfinished sets the debt to its
        duration; any other pays its duration back."""
        prompt_tokens = sum(n for _, n in step.work if n > 1)
        if prompt_tokens >= PACE_MIN_TOKENS:
            self.pace_s = elapsed_s / sum(n for _, n in step.work)
        unfinished = any(r.finish_reason is None and r.seq.num_kv < r.seq.num_prompt for r, _ in step.work)
        self.debt_s = elapsed_s if unfinished else max(0.0, self.debt_s - elapsed_s)
