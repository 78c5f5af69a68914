"""One streamed request to a live server through the official SDK of its API (`openai` Chat Completions or
`anthropic` Messages), timed as the serving benchmarks (`vllm bench serve`, SGLang's `bench_serving`) time it.

The clock starts just before the SDK sends the request. TTFT ends at the first chunk that carries output: an
OpenAI choice delta with content or a tool call (a role-only chunk carries none), an Anthropic
`content_block_delta`. Inter-token latencies are the gaps between later output chunks; end-to-end ends at
the stream's last event. What the server reports (usage, llama.cpp's `timings`, the `kvtestbed` object) is
read by `reported.py`. The reply is kept as the server streamed it (text and tool calls), so the prediction
can cache exactly what the server saw. A request that has not finished `timeout_s` after it was sent is
abandoned (`error: timeout`), and so is one whose reply passes `MAX_REPLY_CHARS` (text, tool-call names and
arguments: an endless stream was kept in memory until the timeout); a server error is kept on the exchange,
never raised.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.bench.harness.endpoint import probe_failures
from engine.bench.harness.reported import Reported, from_anthropic, from_openai
from engine.prompts.messages import Message

MAX_REPLY_CHARS = 4 * 2**20  # ~1M tokens at 4 characters a token: past any context a replayed trace fits


@dataclass
class Exchange:
    """What one request sent and got back; times in seconds from `sent_s` (perf_counter)."""

    sent_s: float = 0.0
    ttft_s: float | None = None
    itl_s: list[float] = field(default_factory=list)
    e2e_s: float | None = None
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # OpenAI form, arguments as parsed JSON
    finish_reason: str | None = None  # as the API names it
    reported: Reported = field(default_factory=Reported)
    error: str = ""  # "" when the request succeeded

    def reply(self) -> Message:
        """The server's reply as an assistant message (what it generated, as a template renders it)."""
        return {"role": "assistant", "content": self.text} | (
            {"tool_calls": self.tool_calls} if self.tool_calls else {}
        )


class ReplyTooLong(Exception):
    """The reply passed `MAX_REPLY_CHARS`."""


class Timer:
    """Stamps output chunks against the send time, and enforces the request's deadline and reply size."""

    def __init__(self, ex: Exchange, timeout_s: float) -> None:
        self.ex, self.timeout_s, self.most_chars = ex, timeout_s, MAX_REPLY_CHARS
        self.start = self.last = time.perf_counter()
        self.chars = 0
        ex.sent_s = self.start

    def kept(self, text: str | None) -> str:
        """`text` (a piece of the reply), counted against the reply's size."""
        self.chars += len(text or "")
        if self.chars > self.most_chars:
            raise ReplyTooLong
        return text or ""

    def output(self) -> None:
        now = time.perf_counter()
        if self.ex.ttft_s is None:
            self.ex.ttft_s = now - self.start
        else:
            self.ex.itl_s.append(now - self.last)
        self.last = now

    def check(self) -> None:
        if time.perf_counter() - self.start > self.timeout_s:
            raise TimeoutError

    def end(self) -> None:
        self.ex.e2e_s = time.perf_counter() - self.start


def _arguments(text: str) -> Any:
    """Tool-call arguments as sent: a JSON object where they parse, else the raw string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _create(create: Callable[..., Any], body: dict[str, Any], **fixed: Any) -> Any:
    """`create(**body)`, with the fields this SDK release does not take as arguments (e.g. `temperature` in
    newer Anthropic SDKs) sent as they are, in `extra_body`."""
    known = inspect.signature(create).parameters
    extra = {k: v for k, v in body.items() if k not in known}
    return create(**{k: v for k, v in body.items() if k in known}, **fixed, extra_body=extra or None)


def _openai(client: Any, body: dict[str, Any], timer: Timer, opened: Callable[[Any], None]) -> None:
    ex = timer.ex
    stream = _create(
        client.chat.completions.create, body, stream=True, stream_options={"include_usage": True}
    )
    opened(stream)
    calls: dict[int, dict[str, list[str]]] = {}
    text: list[str] = []  # joined once: `+=` on an attribute copies the whole reply per chunk
    usage = timings = extension = None
    for chunk in stream:
        timer.check()
        extra = chunk.model_extra or {}
        timings, extension = extra.get("timings") or timings, extra.get("kvtestbed") or extension
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content or delta.tool_calls:
                timer.output()
            text.append(timer.kept(delta.content))
            for c in delta.tool_calls or []:
                call = calls.setdefault(c.index, {"id": [], "name": [], "arguments": []})
                call["id"] = [c.id] if c.id else call["id"]
                if c.function is not None:
                    call["name"].append(timer.kept(c.function.name))
                    call["arguments"].append(timer.kept(c.function.arguments))
            ex.finish_reason = choice.finish_reason or ex.finish_reason
    timer.end()
    ex.text = "".join(text)
    ex.tool_calls = [
        {
            "id": "".join(c["id"]),
            "type": "function",
            "function": {"name": "".join(c["name"]), "arguments": _arguments("".join(c["arguments"]))},
        }
        for _, c in sorted(calls.items())
    ]
    ex.reported = from_openai(usage, timings, extension)


def _anthropic(client: Any, body: dict[str, Any], timer: Timer, opened: Callable[[Any], None]) -> None:
    ex = timer.ex
    stream = _create(client.messages.create, body, stream=True)
    opened(stream)
    usage: dict[str, Any] = {}
    extension = None
    blocks: dict[int, dict[str, Any]] = {}  # tool_use blocks: id, name, the input's JSON so far (pieces)
    text: list[str] = []
    for event in stream:
        timer.check()
        extension = (event.model_extra or {}).get("kvtestbed") or extension
        if event.type == "message_start":
            usage |= {k: v for k, v in event.message.usage.model_dump().items() if v is not None}
        elif event.type == "content_block_start" and event.content_block.type == "tool_use":
            blocks[event.index] = {
                "id": event.content_block.id,
                "name": timer.kept(event.content_block.name),
                "input": [],
            }
        elif event.type == "content_block_delta":
            timer.output()
            if event.delta.type == "text_delta":
                text.append(timer.kept(event.delta.text))
            elif event.delta.type == "input_json_delta":
                blocks[event.index]["input"].append(timer.kept(event.delta.partial_json))
        elif event.type == "message_delta":
            usage |= {k: v for k, v in event.usage.model_dump().items() if v is not None}
            ex.finish_reason = event.delta.stop_reason or ex.finish_reason
    timer.end()
    ex.text = "".join(text)
    ex.tool_calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {"name": b["name"], "arguments": _arguments("".join(b["input"]) or "{}")},
        }
        for _, b in sorted(blocks.items())
    ]
    ex.reported = from_anthropic(usage, extension)


SENDERS = {"openai": _openai, "anthropic": _anthropic}


class OpenStreams:
    """The streams in flight, so that a Ctrl-C can close them from the main thread."""

    def __init__(self) -> None:
        self.lock, self.streams = threading.Lock(), set()

    def add(self, stream: Any) -> None:
        with self.lock:
            self.streams.add(stream)

    def discard(self, stream: Any) -> None:
        with self.lock:
            self.streams.discard(stream)

    def close_all(self) -> None:
        with self.lock:
            streams = list(self.streams)
        for s in streams:
            s.close()


def send(
    api: str, client: Any, body: dict[str, Any], timeout_s: float, streams: OpenStreams, secret: str = ""
) -> Exchange:
    """Send `body` streamed; the exchange, with `error` set (and `secret`, the API key, blanked out of it)
    when the server refused it, the connection failed, or it ran past `timeout_s`."""
    ex = Exchange()
    timer = Timer(ex, timeout_s)
    opened: list[Any] = []

    def track(stream: Any) -> None:
        opened.append(stream)
        streams.add(stream)

    try:
        SENDERS[api](client, body, timer, track)
    except TimeoutError:
        ex.error = f"timeout: not finished {timeout_s:g} s after it was sent"
    except ReplyTooLong:
        ex.error = f"reply over {timer.most_chars:,} characters: abandoned"
    except failures() as e:  # a refusal, a connection or read failure, a stream cut mid-way
        ex.error = _describe(e, secret)
    finally:
        for stream in opened:
            streams.discard(stream)
            stream.close()
    return ex


def failures() -> tuple[type[Exception], ...]:
    """What a request can fail with that is the server's or the network's doing, not this code's."""
    import anthropic
    import openai

    return (openai.APIError, anthropic.APIError, *probe_failures())


def _describe(e: Exception, secret: str) -> str:
    """One line: the HTTP status and the server's message where it sent one, else the exception's name."""
    status = getattr(e, "status_code", None)
    text = " ".join(str(e).split())[:300]
    line = f"HTTP {status}: {text}" if status is not None else f"{type(e).__name__}: {text}"
    return line.replace(secret, "[key]") if secret else line
