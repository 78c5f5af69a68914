"""Send a trace's requests to a live server: each session's requests in order, each one's body the trace's
own (so the next request carries the trace's recorded reply, never the server's), sessions at once.

Two arrival modes, as the serving benchmarks have them. Closed loop (`concurrency`): up to N sessions in
flight, each sending its next request when the previous one finished; sessions start in the order of their
first request. Open loop (`rate`): the trace's requests, in its order, are released at the times of a Poisson
process of `rate` requests per second (exponential gaps, seeded; released within MAX_RELEASE_S, else the
rate is refused); a request waits for its release time and
for the previous request of its session (at most MAX_OPEN_SESSIONS sessions are in flight: a trace of more
starts the later ones as earlier ones end, their requests then late). A Ctrl-C closes the streams in flight
and keeps the requests that finished (`Sending.partial`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from engine.bench.harness.streamed import Exchange, OpenStreams
from engine.errors import InvalidArgumentError
from engine.traces.request import TraceRequest

MAX_RELEASE_S = 86_400  # open loop: the last request's release at most a day after the start
POLL_S = 0.2  # how often the main thread looks up from waiting (so a Ctrl-C is seen at once)
MAX_OPEN_SESSIONS = (
    256  # open loop: sessions in flight at most (one thread each); later ones wait for a thread
)


@dataclass
class Sent:
    index: int  # the request's place in the trace's order
    turn: int  # 1-based within its session
    request: TraceRequest
    exchange: Exchange
    started_s: float  # sent, seconds after the run started


@dataclass
class Sending:
    sent: list[Sent] = field(default_factory=list)  # in the order they were sent
    partial: bool = False


def release_times(n: int, rate: float | None, seed: int) -> list[float]:
    """Seconds after the start at which each of `n` requests may go: all at 0 without a rate, else the
    arrivals of a Poisson process of `rate` per second."""
    if rate is None:
        return [0.0] * n
    rng, t, out = random.Random(seed), 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    if not t <= MAX_RELEASE_S:  # 1e-300 per second: a sleep that overflows, or a run that never ends
        raise InvalidArgumentError(
            f"--request-rate {rate:g}: the {n} requests would be released over {t:.3g} s, past "
            f"{MAX_RELEASE_S:,} s (a day): give a higher rate"
        )
    return out


def send_all(
    requests: list[TraceRequest],
    send: Callable[[int, OpenStreams], Exchange],
    concurrency: int,
    rate: float | None,
    seed: int,
) -> Sending:
    """Every request sent by `send` (given its index), sessions at once (`concurrency` of them, or all of them at `rate`)."""
    sessions: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        sessions.setdefault(r.session, []).append(i)
    releases = release_times(len(requests), rate, seed)
    out, lock, stop, streams = Sending(), threading.Lock(), threading.Event(), OpenStreams()
    start = time.perf_counter()

    def run_session(indices: list[int]) -> None:
        for turn, i in enumerate(indices, 1):
            if stop.wait(max(0.0, releases[i] - (time.perf_counter() - start))) or stop.is_set():
                return
            ex = send(i, streams)
            if stop.is_set():  # closed by the Ctrl-C: not a finished request
                return
            with lock:
                out.sent.append(Sent(i, turn, requests[i], ex, ex.sent_s - start))

    workers = min(len(sessions), MAX_OPEN_SESSIONS if rate is not None else concurrency)
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="session")
    try:  # from the first submission on: a Ctrl-C that lands while later sessions are submitted is one too
        futures = [pool.submit(run_session, indices) for indices in sessions.values()]
        while True:
            done, pending = wait(futures, timeout=POLL_S, return_when=FIRST_EXCEPTION)
            for f in done:
                f.result()  # a bug in a worker surfaces here
            if not pending:
                break
    except KeyboardInterrupt:
        out.partial = True
        stop.set()
        streams.close_all()
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
    out.sent.sort(key=lambda s: s.started_s)
    return out


def body_for(body: dict[str, Any], model: str, max_tokens: int, temperature: float) -> dict[str, Any]:
    """The trace request's body with what a live request also needs: model, token limit, sampling."""
    return body | {"model": model, "max_tokens": max_tokens, "temperature": temperature}
