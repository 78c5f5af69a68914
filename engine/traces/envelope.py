"""A request body in a log envelope, as proxies and this project's server (`engine.serve --record`) write
them: `{"timestamp": ..., "session_id": ..., "body": {...}}` (or `"request"` for `"body"`), and what an
envelope may say besides:

- the time (`timestamp`, `ts`, `time`, `created_at`: finite seconds or ISO 8601, UTC without an offset) and
  the session (`session_id` / `session`, or `metadata.session_id`);
- `format`: the trace format of its body (`openai-chat`, `openai-responses`, `anthropic`), which then needs no
  detecting: a file may mix APIs, each body read by its own parser (a value that names no format is
  refused, naming the line);
- `usage`: the usage the response reported, in its API's form (the request's recorded usage), and
  `provider`: who reported it (`openai`, `anthropic`, `deepseek`, `gcp.gemini`), whose rule it is compared
  with; where the envelope names none it is inferred (`engine.traces.usage.provider_of`: DeepSeek's own
  fields or a `deepseek` model, Anthropic's cache fields or API, else OpenAI);
- `kvtestbed`: the report of the engine.serve that answered (its own `--record` writes it): the usage is
  then that server's (provider `kvtestbed`, compared with the local rule), with the prompt tokens it wrote
  to its cache (`cache_written_tokens`) as the writes on either API, whether the reply was cut at its token
  limit or by its client leaving (`finish_reason` `length` or `abort`: no end-of-turn token was generated, so
  none was cached), and its cache
  namespace, the served model name (`model`) and, under `--isolate-cache`, the client's (`cache_scope`);
- `steps`: that server's run and the engine steps that admitted the request and published its blocks
  (`ServedSteps`), so requests the engine batched in one step are replayed as it served them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from engine.traces.fields import FieldError, expect, token_count
from engine.traces.records import seconds
from engine.traces.request import ServedSteps
from engine.traces.usage import PROVIDERS, RecordedUsage, anthropic_usage, openai_usage, provider_of

TIME_KEYS = ("timestamp", "ts", "time", "created_at")
SESSION_KEYS = ("session_id", "session")
BODY_FORMATS = ("openai-chat", "openai-responses", "anthropic")
SERVER = "kvtestbed"  # the provider name of this project's server, and its report's key


@dataclass(frozen=True)
class Envelope:
    body: Any
    time: float | None = None
    session: str | None = None
    format: str | None = None  # the body's format, where the envelope names one
    usage: Any = None  # the response's usage object, where the envelope holds it
    server: dict[str, Any] | None = None  # engine.serve's report on the request
    provider: str | None = None  # who reported the usage, where the envelope names it
    steps: Any = None  # engine.serve's `steps`: when its engine admitted the request and published its blocks


def _timestamp(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    return seconds(value, "timestamp")


def unwrap(entry: Any) -> Envelope:
    """One entry of a trace file, envelope or bare body (whose own keys may give its time and session)."""
    if not isinstance(entry, dict):
        return Envelope(entry)
    body = next((entry[k] for k in ("body", "request") if isinstance(entry.get(k), (dict, list))), entry)
    meta = entry.get("metadata") if isinstance(entry.get("metadata"), dict) else {}
    when = _timestamp(next((entry[k] for k in TIME_KEYS if k in entry), None))
    session = next((str(d[k]) for d in (entry, meta) for k in SESSION_KEYS if d.get(k) is not None), None)
    if body is entry:  # a bare body: no envelope fields
        return Envelope(body, when, session)
    fmt = entry.get("format")
    if fmt is not None and fmt not in BODY_FORMATS:  # a typo would read the body in a format it did not name
        raise FieldError("format", f"expected one of {', '.join(BODY_FORMATS)}, got {fmt!r:.40}")
    server = expect(entry[SERVER], dict, SERVER) if entry.get(SERVER) is not None else None
    provider = entry.get("provider")
    if provider is not None and provider not in PROVIDERS:
        raise FieldError("provider", f"expected one of {', '.join(PROVIDERS)}, got {provider!r:.40}")
    return Envelope(body, when, session, fmt, entry.get("usage"), server, provider, entry.get("steps"))


def recorded_usage(envelope: Envelope, fmt: str, model: str | None) -> RecordedUsage | None:
    """The usage the envelope holds, read in the form of the API of `fmt`; None where it holds none."""
    if envelope.usage is None:
        return None
    server = envelope.server
    provider = SERVER if server is not None else envelope.provider or provider_of(envelope.usage, model, fmt)
    if fmt == "anthropic" or (
        isinstance(envelope.usage, dict) and "cache_read_input_tokens" in envelope.usage
    ):
        usage = replace(anthropic_usage(envelope.usage, model), provider=provider)
    else:
        usage = openai_usage(envelope.usage, model, provider=provider)
    if server is not None and usage.cache_write_tokens is None and "cache_written_tokens" in server:
        usage = replace(
            usage,
            cache_write_tokens=token_count(server["cache_written_tokens"], f"{SERVER}.cache_written_tokens"),
        )
    if server is not None and "miss_reason" in server:
        usage = replace(usage, miss=_server_miss(server))
    return usage


def reply_cut(envelope: Envelope) -> bool:
    """Whether the server says the reply ended before an end-of-turn token: cut at its token limit, or
    aborted when its client went away."""
    return envelope.server is not None and envelope.server.get("finish_reason") in ("length", "abort")


def cache_salt(envelope: Envelope, model: str | None) -> str:
    """The cache namespace the server kept the request in: its served model name, and the client's scope
    where the server isolated clients (`--isolate-cache`: `cache_scope`), as the server salts it."""
    if envelope.server is None:
        return ""
    name = envelope.server.get("model", model)
    name = name if isinstance(name, str) else ""
    scope = envelope.server.get("cache_scope")
    return f"{name}\0{scope}" if isinstance(scope, str) else name


def served_steps(envelope: Envelope) -> ServedSteps | None:
    """The engine steps the server recorded for the request (`steps`); None where the line holds none."""
    if envelope.steps is None:
        return None
    raw = expect(envelope.steps, dict, "steps")
    server = raw.get("server")
    if isinstance(server, bool) or not isinstance(server, int | float) or not math.isfinite(server):
        raise FieldError(
            "steps.server", f"expected when the server began recording (seconds), got {server!r:.40}"
        )
    published = []
    for k, pair in enumerate(expect(raw.get("published", []), list, "steps.published")):
        if not isinstance(pair, list) or len(pair) != 2:
            raise FieldError(f"steps.published[{k}]", f"expected [step, tokens], got {pair!r:.40}")
        published.append(
            (_step(pair[0], f"steps.published[{k}][0]"), token_count(pair[1], f"steps.published[{k}][1]"))
        )
    return ServedSteps(float(server), _step(raw.get("admitted"), "steps.admitted"), tuple(published))


def _step(value: Any, field_path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**63:
        raise FieldError(field_path, f"expected an engine step (a positive integer), got {value!r:.40}")
    return value


def _server_miss(server: dict[str, Any]) -> tuple[str | None, int]:
    """The server's own miss reason (engine.serve.miss_reason) and the tokens it cost: the prompt for a first
    request or a lost one, the expected tokens not served for an eviction, else the previous request's tokens
    after the change."""
    reason = server["miss_reason"]
    if reason is None:
        return None, 0
    expect(reason, str, f"{SERVER}.miss_reason")
    if reason in ("first_request", "previous_message_not_found"):
        return reason, token_count(server.get("prompt_tokens"), f"{SERVER}.prompt_tokens")
    if reason == "evicted":
        expected = token_count(server.get("expected_cached_tokens"), f"{SERVER}.expected_cached_tokens")
        return reason, max(expected - token_count(server.get("cached_tokens"), f"{SERVER}.cached_tokens"), 0)
    divergence = server.get("divergence")
    lost = divergence.get("lost_tokens", 0) if isinstance(divergence, dict) else 0
    return reason, token_count(lost, f"{SERVER}.divergence.lost_tokens")
