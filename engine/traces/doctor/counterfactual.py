"""What a model or system swap costs: it is not rewritten (another model, or another system prompt, asks
for something else, and a rewrite would change the request's meaning), but the trace as if it had not
happened is measured beside the original.

`without_swap`: in trace order, a request that swapped its model (or its system prompt) against the request
it is compared with takes that request's model (system messages), and so does every later request that
sent the same swapped value: the swap's cost is then every token it made the caches recompute. The
swapped-in values are lost in this trace: it is a measurement, never written or prescribed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from engine.traces.doctor.causes import Span, message_text
from engine.traces.doctor.moves import leading_system, with_messages
from engine.traces.request import TraceRequest


def _system_key(req: TraceRequest) -> str:
    return "\n".join(message_text(m) for m in leading_system(req.messages))


def without_swap(requests: Sequence[TraceRequest], spans: Sequence[Span]) -> list[TraceRequest]:
    swapped = {s.request: (s.region, s.compared) for s in spans if s.region in ("model", "system")}
    models: dict[str | None, str | None] = {}  # swapped-in model -> the one kept
    systems: dict[str, TraceRequest] = {}  # swapped-in system text -> the request whose system is kept
    out: list[TraceRequest] = []
    for i, req in enumerate(requests):
        key = _system_key(req)
        if i in swapped:
            region, p = swapped[i]
            if region == "model":
                models.setdefault(req.model, out[p].model)
            else:
                systems.setdefault(key, out[p])
        if req.model in models:
            req = replace(req, model=models[req.model])
        if key in systems:
            kept = leading_system(systems[key].messages)
            req = with_messages(req, [*kept, *req.messages[len(leading_system(req.messages)) :]])
        out.append(req)
    return out
