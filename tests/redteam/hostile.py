"""What the red-team cases share: one raw HTTP request (any header, any body bytes, a socket that stops
sending) and the verdict every answer must meet: a clear error (a 4xx JSON body naming what was wrong) or
a right answer, never a 500 or a dropped connection."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        """The error object of an OpenAI- or Anthropic-shaped error body."""
        return self.json()["error"]


def post(
    url: str, path: str, body: Any, headers: dict[str, str] | None = None, timeout: float = 60
) -> Answer:
    """POST `body` (bytes as they are, anything else as JSON) with `headers` sent as given, byte for byte
    (a header value may be any Latin-1 string: UTF-8 bytes are passed as their Latin-1 reading)."""
    parts = urlsplit(url)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.putrequest("POST", path)
        sent = {"Content-Type": "application/json", "Content-Length": str(len(data))} | (headers or {})
        for name, value in sent.items():
            conn.putheader(name, value.encode("latin-1"))
        conn.endheaders(data)
        reply = conn.getresponse()
        return Answer(reply.status, reply.read())
    finally:
        conn.close()


def utf8_header(text: str) -> str:
    """`text`'s UTF-8 bytes as a header value (what a client sending UTF-8 puts on the wire)."""
    return text.encode().decode("latin-1")


def clear(answer: Answer, status: int, names: str) -> None:
    """A clear refusal: `status`, an error body whose message or param names `names`."""
    assert answer.status == status, (answer.status, answer.body[:300])
    error = answer.error
    assert names in f"{error.get('param')} {error.get('message')}", error
