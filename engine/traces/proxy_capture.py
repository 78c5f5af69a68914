"""Proxy captures with full bodies -> `TraceRequest`s, with the usage each response reported.

- claude-trace logs (`.claude-trace/log-*.jsonl`): one `{request: {timestamp, method, url, headers, body},
  response: {timestamp, status_code, headers, body | body_raw}, logged_at}` per line;
- HAR files (mitmproxy, browsers): `log.entries[]` with `startedDateTime`, `request.url`,
  `request.postData.text` and `response.status`, `response.content.text` (base64 where `encoding` says).

Only POSTs to the chat endpoints are taken, by the URL's path: `.../messages` (Anthropic Messages),
`.../chat/completions` (OpenAI Chat Completions), `.../responses` (OpenAI Responses); every other request
is counted and skipped, and so is a request whose response is not a success (the provider served nothing
from its cache for it). A response body is JSON or a server-sent event stream (the usage of
`message_start` / `message_delta`, of the last chunk carrying `usage`, or of `response.completed`).
Headers are never read. Each file is one session (side requests a harness interleaves, such as title or
quota calls, form chains of their own: `engine.traces.chains`). Numeric timestamps above 10^11 are read
as milliseconds, others as seconds.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from engine.errors import TraceError
from engine.traces.anthropic_messages import parse_anthropic
from engine.traces.fields import FieldError, JSONLimitError, expect, json_text, loads, refuse_lone_surrogates
from engine.traces.openai_chat import parse_chat_completions
from engine.traces.records import Read, counted, json_document, json_lines, seconds
from engine.traces.request import TraceRequest
from engine.traces.responses import parse_responses
from engine.traces.usage import RecordedUsage, anthropic_usage, openai_usage, provider_of

ENDPOINTS: dict[str, tuple[str, Callable[[Any], TraceRequest]]] = {  # path suffix -> (format, parser)
    "/messages": ("anthropic", parse_anthropic),
    "/chat/completions": ("openai-chat", parse_chat_completions),
    "/responses": ("openai-responses", parse_responses),
}
MILLISECONDS_ABOVE = 1e11


def epoch(value: Any, field_path: str) -> float:
    unit = 1e-3 if isinstance(value, (int, float)) and value > MILLISECONDS_ABOVE else 1.0
    return seconds(value, field_path, unit)


def endpoint(url: str) -> str | None:
    path = urlparse(url).path.rstrip("/")
    return next((suffix for suffix in ENDPOINTS if path.endswith(suffix)), None)


def _provider(url: str, fmt: str) -> str:
    host = urlparse(url).hostname or ""
    if fmt == "anthropic":
        return "anthropic"
    return "deepseek" if "deepseek" in host else "openai"


def _events(text: str) -> list[dict[str, Any]]:
    """The JSON payloads of a server-sent event stream's `data:` lines."""
    out = []
    for line in text.splitlines():
        if line.startswith("data:"):
            try:
                value = loads(line[5:].strip(), where="response")
            except json.JSONDecodeError:
                continue  # "[DONE]" and the like
            except JSONLimitError as e:
                raise FieldError("response", str(e)) from None
            if isinstance(value, dict):
                out.append(value)
    return out


def response_usage(body: Any, fmt: str, provider: str, model: str | None) -> RecordedUsage | None:
    """The usage a response reported (None when it reported none): a JSON body or an event stream."""
    events = _events(body) if isinstance(body, str) else []
    if isinstance(body, str) and not events:
        try:
            body = loads(body, where="response")
        except json.JSONDecodeError:
            return None
        except JSONLimitError as e:
            raise FieldError("response", str(e)) from None
    if isinstance(body, dict):
        usage = body.get("usage")
    elif fmt == "anthropic":
        return _anthropic_stream(events, model)
    else:
        completed = [e["response"] for e in events if e.get("type") == "response.completed"]
        found = [r.get("usage") for r in completed if isinstance(r, dict)] or [e.get("usage") for e in events]
        usage = next((u for u in reversed(found) if isinstance(u, dict)), None)
    if usage is None:
        return None
    if fmt == "anthropic":
        return anthropic_usage(usage, model)
    # a router's host names no provider: the usage's own fields and the model may (DeepSeek behind it)
    known = provider if provider != "openai" else provider_of(usage, model, fmt)
    return openai_usage(usage, model, provider=known)


def _anthropic_stream(events: list[dict[str, Any]], model: str | None) -> RecordedUsage | None:
    """`message_start`'s usage (input, cache reads and writes), the last `message_delta`'s output count."""
    start = next((e.get("message") for e in events if e.get("type") == "message_start"), None)
    if not isinstance(start, dict) or not isinstance(start.get("usage"), dict):
        return None
    usage = dict(start["usage"])
    for e in events:
        if (
            e.get("type") == "message_delta"
            and isinstance(e.get("usage"), dict)
            and "output_tokens" in e["usage"]
        ):
            usage["output_tokens"] = e["usage"]["output_tokens"]
    return anthropic_usage(usage, model)


class _Capture:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.requests: list[TraceRequest] = []
        self.skipped: Counter[str] = Counter()

    def add(
        self,
        body_field: str,
        method: Any,
        url: Any,
        when: float | None,
        body: Any,
        status: Any,
        response: Any,
    ) -> None:
        """One captured request: taken if it is a successful POST to a chat endpoint, else counted."""
        url = expect(url, str, "request.url")
        suffix = endpoint(url)
        if str(method).upper() != "POST" or suffix is None:
            self.skipped[f"{str(method).upper()} {urlparse(url).path}"] += 1
            return
        if not isinstance(status, int) or not 200 <= status < 300:
            self.skipped[f"responses with status {status}"] += 1
            return
        if isinstance(body, str):
            body = json_text(body, body_field)
        fmt, parse = ENDPOINTS[suffix]
        try:
            refuse_lone_surrogates(body)  # a body given as JSON text is decoded only here
            req = parse(body)
        except FieldError as e:
            raise FieldError(f"{body_field}.{e.field_path}", e.problem) from None
        usage = response_usage(response, fmt, _provider(url, fmt), req.model)
        self.requests.append(replace(req, timestamp=when, session=str(self.path), recorded=usage))

    def read(self) -> Read:
        return Read(self.requests, counted("captured requests", dict(self.skipped)))


def read_claude_trace(path: Path) -> Read:
    capture = _Capture(path)
    for n, raw in json_lines(path):
        try:
            pair = expect(raw, dict, "line")
            request = expect(pair.get("request"), dict, "request")
            response = pair.get("response") if isinstance(pair.get("response"), dict) else {}
            when = (
                epoch(request["timestamp"], "request.timestamp")
                if request.get("timestamp") is not None
                else None
            )
            answer = response.get("body", response.get("body_raw"))
            capture.add(
                "request.body",
                request.get("method"),
                request.get("url"),
                when,
                request.get("body"),
                response.get("status_code"),
                answer,
            )
        except FieldError as e:
            raise TraceError(f"{path}: line {n}: {e}") from None
    return capture.read()


def _content_text(content: dict[str, Any]) -> str | None:
    text = content.get("text")
    if text is None or content.get("encoding") != "base64":
        return text
    try:
        return base64.b64decode(text).decode()
    except (binascii.Error, UnicodeDecodeError) as e:
        raise FieldError("response.content.text", f"not valid base64 text: {e}") from None


def read_har(path: Path) -> Read:
    capture = _Capture(path)
    log = expect(json_document(path), dict, "HAR").get("log")
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(entries, list):
        raise TraceError(f"{path}: log.entries: expected a list (is this a HAR file?)")
    for i, entry in enumerate(entries):
        try:
            entry = expect(entry, dict, "entry")
            request = expect(entry.get("request"), dict, "request")
            response = entry.get("response") if isinstance(entry.get("response"), dict) else {}
            post = request.get("postData") if isinstance(request.get("postData"), dict) else {}
            content = response.get("content") if isinstance(response.get("content"), dict) else {}
            when = (
                seconds(entry["startedDateTime"], "startedDateTime") if entry.get("startedDateTime") else None
            )
            capture.add(
                "request.postData.text",
                request.get("method"),
                request.get("url"),
                when,
                post.get("text"),
                response.get("status"),
                _content_text(content),
            )
        except FieldError as e:
            raise TraceError(f"{path}: log.entries[{i}]: {e}") from None
    return capture.read()
