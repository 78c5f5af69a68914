"""uvicorn's HTTP/1.1 protocol (h11) with the server's error body for a request whose head it cannot read.

h11 refuses a request line or header it cannot parse (a `Content-Length` of more than 20 digits, a header
without a colon, a bare CR) before any route sees it, and uvicorn answers that with a plain-text 400
("Invalid HTTP request received."). Here the 400 carries one JSON body in both APIs' shapes, as every other
refusal does: OpenAI's `{"error": {message, type, param, code}}` with Anthropic's top-level `"type": "error"`
(its `error.type` is the same `invalid_request_error`), since the route, which picks the shape, is unknown.
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.serve.errors import APIError

UNREADABLE = (
    "invalid HTTP request: its request line or headers could not be read (a malformed header, or a "
    "Content-Length of more than 20 digits)"
)


def unreadable_body() -> bytes:
    """The error body of a request whose head could not be read."""
    return json.dumps(
        APIError(400, UNREADABLE, code="invalid_http").openai_body() | {"type": "error"}
    ).encode()


class JSONErrorsH11Protocol(H11Protocol):
    def send_400_response(self, msg: str) -> None:
        """uvicorn's 400 for a request h11 could not parse (`msg`, its plain text, is logged already)."""
        body = unreadable_body()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()
