"""How torch's CPU threads wait: passively, unless the user chose.

torch runs its CPU kernels on OpenMP threads (GNU libgomp in the Linux wheels). Between parallel regions
libgomp's threads spin by default (about 300,000 iterations, a few milliseconds) before they sleep. A decode
step runs hundreds of small parallel regions, so on a machine whose cores other processes also use the
spinning threads burn the time slices the working thread needs: SmolLM2-135M decoded at 0.5 tokens/s in a
script's main thread beside other jobs against 4.3 with `OMP_WAIT_POLICY=PASSIVE` (a 2-core machine at load
8). A thread started later happened to run fast: libgomp shortens the spin once it manages more threads than
there are cores, which is why the server (its engine in a worker thread) never showed it.

libgomp reads its environment once, when torch loads it, so `wait_passively` must run before torch is
imported: `engine/__init__.py` calls it first, which covers every `python -m engine.*` command and
`import engine` (the Python API). A user's own `OMP_WAIT_POLICY`, `GOMP_SPINCOUNT` or `KMP_BLOCKTIME` is kept.
"""

from __future__ import annotations

import os
import sys
import warnings

WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def wait_passively(environ: os._Environ | dict[str, str] = os.environ) -> str:
    """Set OMP_WAIT_POLICY=PASSIVE where torch is not loaded yet and the user set no wait variable; say what
    was done: "passive", "user" (a wait variable was set) or "too late" (torch was imported first: warned)."""
    if any(name in environ for name in WAIT_VARIABLES):
        return "user"
    if "torch" in sys.modules:
        warnings.warn(
            "torch was imported before engine with OMP_WAIT_POLICY unset: its OpenMP threads spin between "
            "kernels, which slows the engine many times on a busy machine; import engine first or set "
            "OMP_WAIT_POLICY=PASSIVE (docs/devices.md#cpu-threads)",
            RuntimeWarning,
            stacklevel=3,
        )
        return "too late"
    environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return "passive"
