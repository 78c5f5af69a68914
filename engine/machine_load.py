"""What else the machine is doing: its load averages, and the ones read when `engine` was first imported.

`engine/__init__.py` imports this module before torch, so `AT_START` is the machine's load when a command
started, before its own start-up (imports, model loading) adds to it. A timing is a reference only from a
quiet machine: a 1-minute load below `QUIET` (0.5), nothing else runnable.
"""

from __future__ import annotations

import os

QUIET = 0.5  # 1-minute load average below which a machine counts as quiet


def load_averages() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages, or None where the platform has none."""
    try:
        return list(os.getloadavg())
    except (OSError, AttributeError):
        return None


AT_START = load_averages()
