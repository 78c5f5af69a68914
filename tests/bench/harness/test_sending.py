"""Sessions at once, in order within each, Poisson releases, and a Ctrl-C that keeps what finished."""

from __future__ import annotations

import signal
import statistics
import threading
import time

from engine.bench.harness.sending import release_times, send_all
from engine.bench.harness.streamed import Exchange, OpenStreams
from engine.traces.request import TraceRequest


def trace(sessions: int, turns: int) -> list[TraceRequest]:
    return [
        TraceRequest([{"role": "user", "content": f"{s}-{t}"}], session=f"s{s}")
        for t in range(turns)
        for s in range(sessions)
    ]


def test_poisson_releases_are_seeded_and_at_the_rate() -> None:
    times = release_times(2000, 50.0, seed=3)
    assert times == release_times(2000, 50.0, seed=3) != release_times(2000, 50.0, seed=4)
    gaps = [b - a for a, b in zip([0.0, *times], times, strict=False)]
    assert abs(statistics.mean(gaps) - 1 / 50) < 0.002 and times == sorted(times)
    assert release_times(3, None, 0) == [0.0, 0.0, 0.0]


def test_each_session_in_order_and_sessions_at_once() -> None:
    requests = trace(3, 4)
    live, most, lock = [0], [0], threading.Lock()

    def send(i: int, _: OpenStreams) -> Exchange:
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])
        time.sleep(0.02)
        with lock:
            live[0] -= 1
        return Exchange(sent_s=time.perf_counter())

    out = send_all(requests, send, concurrency=2, rate=None, seed=0)
    assert not out.partial and len(out.sent) == 12 and most[0] == 2
    for s in ("s0", "s1", "s2"):
        mine = [x for x in out.sent if x.request.session == s]
        assert [x.turn for x in mine] == [1, 2, 3, 4] and [x.index for x in mine] == sorted(
            x.index for x in mine
        )


def test_ctrl_c_keeps_the_finished_requests() -> None:
    calls = [0]

    def send(i: int, _: OpenStreams) -> Exchange:
        calls[0] += 1
        ex = Exchange(sent_s=time.perf_counter())
        if calls[0] == 3:
            signal.raise_signal(signal.SIGINT)  # the main thread gets the KeyboardInterrupt
            time.sleep(0.5)  # this request is still in flight when the run stops
        return ex

    out = send_all(trace(1, 6), send, concurrency=1, rate=None, seed=0)
    assert out.partial and [x.turn for x in out.sent] == [1, 2] and calls[0] == 3
