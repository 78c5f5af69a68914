"""`--record FILE.jsonl`: one line per answered request, in the envelope `bench replay` reads
(`timestamp`, `session_id`, `body`), plus the trace format of the body (`format`), the response's `usage`
and its `kvtestbed` object, and what the replay needs to render prompts as the server did: the reply as its
model sampled it (`sampled`) and the messages rendered from earlier replies (`as_sampled`;
engine/traces/as_sampled.py); where the engine ran it, `steps`: this server's run (`server`, when recording
began) and its `CacheSteps` (the step whose lookup served its prompt, the steps that published its blocks),
so a replay serves requests batched in one step as the engine did. A Responses request continuing a kept
response is recorded as sent, with `continues` (the response, and the digest of the conversation put
first: engine/serve/recorded_body.py), and a kept response with its `output` items, which a later line
continues: the record grows with each turn's new input, not with the conversation. A request its client
abandoned is recorded once the engine had computed any of it (it filled the cache), its `kvtestbed` object
saying `aborted`: true.

- Nothing is overwritten: the file is opened for appending, and each line is written whole and at once
  (one write of the encoded line, newline last), so a crash loses at most the requests in flight.
- A torn last line (the process killed mid-write) is repaired on start: cut back to the last complete
  line, with one warning naming the file and the bytes dropped; the next line then starts on a line of
  its own instead of being glued to the fragment.
- Strict JSON: bodies hold no NaN or Infinity (engine/serve/json_body.py refuses them), and the encoder
  refuses them too (`allow_nan=False`). The fields that change nothing are bounded
  (engine/serve/recorded_body.py).
- A write that fails (a full disk: `OSError`) stops recording, with one warning; the partial line is cut
  off again where possible, and every request is still answered. `stopped` says why, for the page and
  `/metrics`.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, BinaryIO

from engine.errors import OutputError
from engine.runtime.outputs import Generation
from engine.serve.chat_request import ChatRequest
from engine.serve.recorded_body import as_sent, recorded_body

log = logging.getLogger("kvtestbed.serve")
CHUNK = 1 << 20  # bytes read at a time looking back for the last newline

# How a response is recorded: (request, its generation, the usage it answered, its kvtestbed object).
Record = Callable[[ChatRequest, Generation, dict[str, Any], dict[str, Any]], None]


class Recorder:
    def __init__(self, path: Path) -> None:
        try:
            self.file: BinaryIO = path.open("a+b", buffering=0)  # read too: the repair reads the tail
            regular = stat.S_ISREG(os.fstat(self.file.fileno()).st_mode)  # not a pipe or a device
            self.end = _repair(self.file, path) if regular else None  # the file's size, where known
        except OSError as e:
            raise OutputError(f"--record {path}: cannot open for appending: {e.strerror or e}") from None
        self.path, self.lock = path, threading.Lock()
        self.started = time.time()  # names this server's run: its engine counts steps from 1
        self.lines = 0  # written by this server
        self.stopped: str | None = None  # why recording stopped; None while it goes on

    def write(
        self, req: ChatRequest, generation: Generation, usage: dict[str, Any], report: dict[str, Any]
    ) -> None:
        body, continues = as_sent(req.body, req.notes.get("previous_response_id"))
        line = {
            "timestamp": req.submitted,
            "session_id": report["session_id"],
            "format": req.api,
            "body": recorded_body(body),
            "usage": usage,
            "kvtestbed": report,
        }
        if req.sampled is not None:  # the reply as sampled, and the messages rendered so: for the replay
            line["sampled"] = req.sampled.record()
        if req.as_sampled:
            line["as_sampled"] = [use.record() for use in req.as_sampled]
        if continues is not None:
            line["continues"] = continues
        if req.output is not None:
            line["output"] = req.output
        if generation.steps is not None:
            line["steps"] = {"server": self.started} | asdict(generation.steps)
        try:
            data = (json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n").encode()
        except ValueError:  # a non-finite number of the server's own making: a bug, not the client's
            log.exception("--record %s: request %s not recorded", self.path, req.request_id)
            return
        with self.lock:
            if self.stopped is None:
                self._append(data)

    def _append(self, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:  # an unbuffered write may take part of the line; the rest follows
                view = view[self.file.write(view) :]
        except OSError as e:
            self.stopped = f"writing {self.path} failed: {e.strerror or e}"
            log.warning(
                "recording stopped: %s after %d lines; requests are still answered, not recorded",
                self.stopped,
                self.lines,
            )
            if self.end is not None:
                try:
                    self.file.truncate(self.end)  # no torn line left behind (else the next start repairs it)
                except OSError:
                    pass
            return
        self.lines += 1
        if self.end is not None:
            self.end += len(data)

    def status(self) -> dict[str, Any]:
        """What the page shows: the file, the lines written, why recording stopped (null: it goes on)."""
        return {"path": str(self.path), "lines": self.lines, "stopped": self.stopped}

    def close(self) -> None:
        self.file.close()


def _repair(file: BinaryIO, path: Path) -> int:
    """Cut a torn last line: everything after the file's last newline (all of it when it has none).
    Returns the file's size after."""
    size = end = os.fstat(file.fileno()).st_size
    while end > 0:
        start = max(0, end - CHUNK)
        newline = os.pread(file.fileno(), end - start, start).rfind(b"\n")
        if newline >= 0:
            end = start + newline + 1
            break
        end = start
    if end < size:
        file.truncate(end)
        log.warning(
            "--record %s: its last line was torn (%d bytes after the last complete line, a write cut off); "
            "cut them off, the file ends with its last complete line",
            path,
            size - end,
        )
    return end
