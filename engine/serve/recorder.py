"""`--record FILE.jsonl`: one line per answered request, in the envelope `bench replay` reads
(`timestamp`, `session_id`, `body`), plus the trace format of the body (`format`), the response's `usage`
and its `kvtestbed` object. Opened for appending (nothing is overwritten); each line is flushed as it is
written, so a crash loses at most the requests in flight. A request its client abandoned is not recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import OutputError
from engine.serve.chat_request import ChatRequest

# How a response is recorded: (request, the usage it answered, its kvtestbed object).
Record = Callable[[ChatRequest, dict[str, Any], dict[str, Any]], None]


class Recorder:
    def __init__(self, path: Path) -> None:
        try:
            self.file = path.open("a", encoding="utf-8")
        except OSError as e:
            raise OutputError(f"--record {path}: cannot open for appending: {e.strerror or e}") from None
        self.path, self.lock = path, threading.Lock()

    def write(self, req: ChatRequest, usage: dict[str, Any], report: dict[str, Any]) -> None:
        line = {
            "timestamp": req.submitted,
            "session_id": report["session_id"],
            "format": req.api,
            "body": req.body,
            "usage": usage,
            "kvtestbed": report,
        }
        with self.lock:
            self.file.write(json.dumps(line, ensure_ascii=False) + "\n")
            self.file.flush()

    def close(self) -> None:
        self.file.close()
