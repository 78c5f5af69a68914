"""The live page: the last requests as its script polls them (`RequestLog`), and the folder of its static
files (HTML, script, style; shipped with the package: no build step, nothing from a CDN)."""

from __future__ import annotations

import threading
from collections import deque
from pathlib import Path
from typing import Any

STATIC = Path(__file__).parent / "static"
KEPT = 500  # requests the page can show


class RequestLog:
    """The latest requests, numbered in the order they finished. Written by the engine thread, read by
    the page's poll."""

    def __init__(self, size: int = KEPT) -> None:
        self.lock = threading.Lock()
        self.entries: deque[dict[str, Any]] = deque(maxlen=size)
        self.count = 0

    def add(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.count += 1
            self.entries.append({"seq": self.count} | entry)

    def since(self, after: int) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.entries if e["seq"] > after]
