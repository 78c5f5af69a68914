"""Sessions at once, in order within each, Poisson releases, and a Ctrl-C that keeps what finished."""

from __future__ import annotations

import signal
import statistics
import threading
import time

import pytest

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


class Stream:
    """A stream in flight: it ends when the Ctrl-C closes it (OpenStreams.close_all), as a real one does."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def close(self) -> None:
        self.closed.set()


def test_ctrl_c_keeps_the_finished_requests() -> None:
    """Driven by the sending loop's own events, not a clock: the third request is in flight until the Ctrl-C
    closes its stream, however late the main thread gets to handle the interrupt."""
    calls, stream = [0], Stream()

    def send(i: int, streams: OpenStreams) -> Exchange:
        calls[0] += 1
        ex = Exchange(sent_s=time.perf_counter())
        if calls[0] == 3:
            streams.add(stream)
            signal.raise_signal(signal.SIGINT)  # the main thread gets the KeyboardInterrupt
            assert stream.closed.wait(60), "the Ctrl-C never closed the stream in flight"
        return ex

    out = send_all(trace(1, 6), send, concurrency=1, rate=None, seed=0)
    assert out.partial and [x.turn for x in out.sent] == [1, 2] and calls[0] == 3 and stream.closed.is_set()


def test_ctrl_c_while_sessions_are_still_being_submitted(monkeypatch) -> None:
    """A Ctrl-C that lands before the main thread starts waiting (here: during the submission of the sessions)
    still ends the run as partial, keeping what finished, instead of escaping send_all."""
    import engine.bench.harness.sending as sending

    submitted = [0]
    real = sending.ThreadPoolExecutor

    class Pool(real):
        def submit(self, *args, **kwargs):
            submitted[0] += 1
            if submitted[0] == 2:
                raise KeyboardInterrupt  # as the signal handler raises it in the main thread
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(sending, "ThreadPoolExecutor", Pool)
    try:
        out = send_all(trace(3, 2), lambda i, _: Exchange(sent_s=time.perf_counter()), 3, None, 0)
    except KeyboardInterrupt:
        pytest.fail("the Ctrl-C escaped send_all: the finished requests were lost")
    assert out.partial and all(x.request.session == "s0" for x in out.sent)
