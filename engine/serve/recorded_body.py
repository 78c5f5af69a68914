"""What `--record` keeps of a request body: everything the prompt and the replay are made of, as sent; the
fields documented to change nothing, bounded. A value over its bound is recorded as its digest,
`{"kvtestbed_digest": "sha256:HEX", "bytes": N}` (N: the bytes of its compact UTF-8 JSON, which the hex
digests), so a client's 20 MB `metadata` costs the record a hundred bytes, not 20 MB per request, and two
records still tell whether it changed.

- top-level fields (`NO_EFFECT`): verbatim up to `FIELD_BYTES` (OpenAI's own metadata limit, 16 pairs of
  64 + 512 characters, stays verbatim), else the digest;
- Responses `input` items no prompt renders (`reasoning`, `web_search_call`: the replay drops them too): the
  item's `type` and its digest (a Codex reasoning item carries tens of kilobytes of encrypted content);
- `cache_control` markers, wherever they stand: `type` and `ttl` (which the replay reads) always; any other
  key verbatim while the marker is within `MARKER_BYTES`, else those keys as one digest beside them;
- a Responses request continuing a kept response (`as_sent`): the body as sent, its `previous_response_id`
  and only the new input, the line referring to the conversation the server put first by its id and digest
  (engine/traces/response_chain.py rebuilds it from the earlier lines).
"""

from __future__ import annotations

from typing import Any

from engine.traces.response_chain import compact, digest
from engine.traces.responses import DROPPED

NO_EFFECT = ("metadata", "store", "service_tier", "safety_identifier", "client_metadata")
FIELD_BYTES = 16 << 10
MARKER_BYTES = 256
MARKER_KEYS = ("type", "ttl")  # what engine/traces/request.py ttl_of reads


def recorded_body(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the record keeps it; the body itself is never changed (what changes is copied)."""
    out = dict(body)
    for name in NO_EFFECT:
        if name in out and len(compact(out[name])) > FIELD_BYTES:
            out[name] = digest(out[name])
    if isinstance(out.get("input"), list):
        out["input"] = [_unrendered(item) for item in out["input"]]
    return _markers(out)


def _unrendered(item: Any) -> Any:
    if isinstance(item, dict) and item.get("type") in DROPPED:
        return {"type": item["type"]} | digest(item)
    return item


def _markers(value: Any) -> Any:
    """`value` with every `cache_control` marker in it bounded; the same object when none needed it.
    Recursive: bodies nest at most engine/serve/json_body.py's MAX_DEPTH levels."""
    if isinstance(value, list):
        items = [_markers(v) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    if not isinstance(value, dict):
        return value
    changed = {k: _marker(v) if k == "cache_control" else _markers(v) for k, v in value.items()}
    return changed if any(changed[k] is not v for k, v in value.items()) else value


def _marker(marker: Any) -> Any:
    if not isinstance(marker, dict) or len(compact(marker)) <= MARKER_BYTES:
        return marker
    kept = {k: v for k, v in marker.items() if k in MARKER_KEYS and isinstance(v, str) and len(v) <= 16}
    return kept | digest({k: v for k, v in marker.items() if k not in kept})


def as_sent(
    body: dict[str, Any], previous: dict[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """A Responses body as its client sent it, and its line's `continues` reference. Where the server put the
    conversation of the response it continues before the new input (`previous`: the parse's note, `{"id",
    "items"}`), the body gets its `previous_response_id` back and only the new input, and the reference names
    the response, the items put first and their digest (their compact JSON, as the store holds them): the
    record stays linear in a chain's length. Any other body: itself, and None."""
    if previous is None:
        return body, None
    items, n = body["input"], previous["items"]
    sent = body | {"previous_response_id": previous["id"], "input": items[n:]}
    return sent, {"id": previous["id"], "items": n} | digest(items[:n])
