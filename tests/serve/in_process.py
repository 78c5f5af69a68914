"""A server run in the test's own process (uvicorn in a thread, on a free loopback port), so that a test can
reach into its state: make a part fail, hold the engine's forward at a gate, drain it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from engine.runtime.engine import Engine
from engine.serve.app import ServerState, create_app
from engine.serve.http_protocol import JSONErrorsH11Protocol
from tests.serve.conftest import free_port


@dataclass
class InProcess:
    url: str
    state: ServerState
    server: uvicorn.Server


@contextmanager
def serving(state: ServerState) -> Iterator[InProcess]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(state), host="127.0.0.1", port=port, log_level="critical", http=JSONErrorsH11Protocol
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "in-process server did not start"
        time.sleep(0.05)
    try:
        yield InProcess(f"http://127.0.0.1:{port}", state, server)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


class Gate:
    """Holds the engine's forward passes while closed: a request is then admitted (its prefix looked up)
    but its prefill cannot end, for as long as a test needs, with no clock involved."""

    def __init__(self, engine: Engine) -> None:
        self.opened, self.held = threading.Event(), threading.Event()
        self.opened.set()
        run = engine.runner.run

        def gated(work):  # type: ignore[no-untyped-def]
            if not self.opened.is_set():
                self.held.set()
                assert self.opened.wait(timeout=300), "the test never opened the gate"
            return run(work)

        engine.runner.run = gated

    def close(self) -> None:
        self.held.clear()
        self.opened.clear()

    def open(self) -> None:
        self.opened.set()
