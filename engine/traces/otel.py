"""OpenTelemetry GenAI spans (OTLP JSON: one export document, or one per line as the collector's file
exporter writes them) -> `TraceRequest`s, one per inference span.

Taken: spans whose `gen_ai.operation.name` is `chat`, `text_completion` or `generate_content` (or that
carry GenAI usage or input attributes without naming an operation); other spans (tool executions, agent
invocations, embeddings, non-GenAI spans) are counted and skipped. Read per span (semantic conventions,
Development status, checked 2026-12-01):

- content: `gen_ai.system_instructions` (parts), `gen_ai.input.messages` (`{role, parts: [{type: text |
  tool_call | tool_call_response | reasoning}]}`), `gen_ai.tool.definitions`, as JSON strings or
  structured values; also the older flattened `gen_ai.prompt.<i>.role` / `.content`. `reasoning` parts are
  dropped; other part types (blobs, files, URIs) are refused by name;
- usage: `gen_ai.usage.input_tokens` (the inclusive prompt), `gen_ai.usage.output_tokens`,
  `gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`, and the deprecated
  `gen_ai.usage.prompt_tokens`, `gen_ai.usage.completion_tokens`, `gen_ai.usage.cache_read_input_tokens`,
  `gen_ai.usage.cache_creation_input_tokens`;
- `gen_ai.provider.name` (older `gen_ai.system`), `gen_ai.response.model` / `gen_ai.request.model`, the
  session from `gen_ai.conversation.id` (else the trace id), the time from `startTimeUnixNano`.

Content capture is opt-in: a span without input messages is a usage-only request (its recorded figures
and recorded miss reasons only). Spans do not carry Anthropic's `cache_control`: an Anthropic span whose
usage shows cache reads or writes is modelled with automatic caching (5 minutes) at its last block.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import TraceError
from engine.traces.fields import FieldError, expect, json_text, token_count
from engine.traces.openai_chat import parse_chat_completions
from engine.traces.records import Read, counted, json_document, json_lines, read_text, seconds
from engine.traces.request import FIVE_MINUTES, TraceRequest
from engine.traces.usage import RecordedUsage

INFERENCE = ("chat", "text_completion", "generate_content")
USAGE = {  # normalized field -> attribute names, the current spelling first
    "prompt_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
    "output_tokens": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
    "cache_read_tokens": ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens"),
    "cache_write_tokens": (
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
    ),
}
FLAT = re.compile(r"^gen_ai\.prompt\.(\d+)\.(role|content)$")


def any_value(value: Any) -> Any:
    """An OTLP AnyValue as a Python value."""
    if not isinstance(value, dict):
        return value
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:  # int64 as a decimal string in OTLP JSON
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            raise FieldError("intValue", f"expected an integer, got {value['intValue']!r:.40}") from None
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return {
            kv["key"]: any_value(kv.get("value")) for kv in (value["kvlistValue"] or {}).get("values", [])
        }
    return None


def _json(value: Any, key: str) -> Any:
    return json_text(value, f"attributes[{key}]") if isinstance(value, str) else value


def _text(parts: Any, where: str) -> tuple[list[str], list[dict], list[dict]]:
    """(texts, tool calls, tool responses) of a message's parts."""
    texts, calls, results = [], [], []
    for j, part in enumerate(expect(parts, list, where)):
        at = f"{where}[{j}]"
        kind = expect(part, dict, at).get("type")
        if kind == "text":
            texts.append(expect(part.get("content"), str, f"{at}.content"))
        elif kind == "tool_call":
            args = part.get("arguments", {})
            fn = {"name": expect(part.get("name"), str, f"{at}.name"), "arguments": args}
            calls.append({"id": str(part.get("id", f"call_{j}")), "type": "function", "function": fn})
        elif kind == "tool_call_response":
            response = part.get("response", part.get("result"))
            content = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
            results.append({"role": "tool", "tool_call_id": str(part.get("id", "")), "content": content})
        elif kind != "reasoning":
            raise FieldError(
                f"{at}.type", f"{kind!r} parts are not supported (text, tool_call, tool_call_response)"
            )
    return texts, calls, results


def _messages(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """Chat Completions messages of a span's content attributes ([] when it has none)."""
    out: list[dict[str, Any]] = []
    if "gen_ai.system_instructions" in attrs:
        system = _json(attrs["gen_ai.system_instructions"], "gen_ai.system_instructions")
        texts = [system] if isinstance(system, str) else _text(system, "gen_ai.system_instructions")[0]
        out.append({"role": "system", "content": "\n".join(texts)})
    if "gen_ai.input.messages" in attrs:
        for i, m in enumerate(
            expect(
                _json(attrs["gen_ai.input.messages"], "gen_ai.input.messages"), list, "gen_ai.input.messages"
            )
        ):
            where = f"gen_ai.input.messages[{i}]"
            texts, calls, results = _text(expect(m, dict, where).get("parts", []), f"{where}.parts")
            if texts or calls or not results:
                out.append(
                    {"role": m.get("role"), "content": "\n".join(texts)}
                    | ({"tool_calls": calls} if calls else {})
                )
            out += results
        return out
    flat = sorted((int(g[1]), g[2], v) for k, v in attrs.items() if (g := FLAT.match(k)))
    rows: dict[int, dict[str, Any]] = {}
    for i, field, value in flat:
        rows.setdefault(i, {})[field] = value
    return out + [rows[i] for i in sorted(rows)]


def _usage(attrs: dict[str, Any], provider: str, model: str | None) -> RecordedUsage | None:
    found = {}
    for name, keys in USAGE.items():
        value = next((attrs[k] for k in keys if k in attrs), None)
        if value is not None:
            found[name] = token_count(value, f"attributes[{keys[0]}]")
    return RecordedUsage(provider, model, **found) if found else None


def _span(span: dict[str, Any], skipped: Counter[str]) -> TraceRequest | None:
    attrs = {
        a.get("key"): any_value(a.get("value"))
        for a in expect(span.get("attributes", []), list, "attributes")
    }
    operation = attrs.get("gen_ai.operation.name")
    genai = any(k in attrs for keys in USAGE.values() for k in keys) or "gen_ai.input.messages" in attrs
    if operation not in INFERENCE and not (operation is None and genai):
        skipped[str(operation or span.get("name", "unnamed"))] += 1
        return None
    model = attrs.get("gen_ai.response.model", attrs.get("gen_ai.request.model"))
    provider = str(attrs.get("gen_ai.provider.name", attrs.get("gen_ai.system", "unknown")))
    usage = _usage(attrs, provider, model)
    when = (
        seconds(span["startTimeUnixNano"], "startTimeUnixNano", 1e-9)
        if span.get("startTimeUnixNano")
        else None
    )
    session = str(attrs.get("gen_ai.conversation.id") or span.get("traceId") or "")
    messages = _messages(attrs)
    if not messages:
        return TraceRequest([], None, when, session, model=model, missing=("content",), recorded=usage)
    body: dict[str, Any] = {"model": model, "messages": messages}
    if "gen_ai.tool.definitions" in attrs:
        tools = expect(
            _json(attrs["gen_ai.tool.definitions"], "gen_ai.tool.definitions"),
            list,
            "gen_ai.tool.definitions",
        )
        body["tools"] = [
            t
            if "function" in t
            else {"type": "function", "function": {k: v for k, v in t.items() if k != "type"}}
            for t in tools
        ]
    req = parse_chat_completions(body)
    cached = (
        usage is not None
        and provider == "anthropic"
        and bool(usage.cache_read_tokens or usage.cache_write_tokens)
    )
    return replace(
        req,
        timestamp=when,
        session=session,
        recorded=usage,
        missing=() if "gen_ai.tool.definitions" in attrs else ("tools",),
        auto_cache_ttl_s=FIVE_MINUTES if cached else None,
    )


def _spans(doc: Any) -> Iterator[tuple[str, Any]]:
    """Every span of one OTLP JSON document with where it stands; a level of the wrong type is a FieldError
    naming it."""
    for r, rs in enumerate(
        expect(expect(doc, dict, "document").get("resourceSpans") or [], list, "resourceSpans")
    ):
        at = f"resourceSpans[{r}]"
        rs = expect(rs, dict, at)
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
        for s, scope in enumerate(expect(scopes, list, f"{at}.scopeSpans")):
            at_s = f"{at}.scopeSpans[{s}]"
            for k, span in enumerate(
                expect(expect(scope, dict, at_s).get("spans") or [], list, f"{at_s}.spans")
            ):
                yield f"{at_s}.spans[{k}]", span


def read_otel(path: Path) -> Read:
    text = read_text(path)
    try:
        documents = [(1, json_document(path, text))]
    except TraceError:
        documents = json_lines(path, text)
    out, skipped = [], Counter()
    for line, doc in documents:
        try:
            for at, span in _spans(doc):
                try:
                    req = _span(expect(span, dict, "span"), skipped)
                except FieldError as e:
                    raise TraceError(f"{path}: line {line}: {at}: {e}") from None
                if req is not None:
                    out.append(req)
        except FieldError as e:  # a level above the spans
            raise TraceError(f"{path}: line {line}: {e}") from None
    return Read(out, counted("spans", dict(skipped)))
