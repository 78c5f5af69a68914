"""HTTP errors as both APIs shape them: `APIError` carries the status, a one-line message and the field it
names; it renders as OpenAI's `{"error": {message, type, param, code}}` or Anthropic's
`{"type": "error", "error": {type, message}}` body. Engine errors map to 4xx/5xx here, in one place."""

from __future__ import annotations

from typing import Any

from engine.errors import (
    CacheCapacityError,
    ContextOverflowError,
    EngineError,
    InvalidArgumentError,
    NumericalError,
    PromptError,
    TokenizerMissingError,
)
from engine.traces.request import FieldError

# status -> (OpenAI error type, Anthropic error type)
TYPES = {
    400: ("invalid_request_error", "invalid_request_error"),
    401: ("authentication_error", "authentication_error"),
    403: ("permission_error", "permission_error"),
    404: ("invalid_request_error", "not_found_error"),
    405: ("invalid_request_error", "invalid_request_error"),
    408: ("invalid_request_error", "timeout_error"),
    413: ("invalid_request_error", "request_too_large"),
    415: ("invalid_request_error", "invalid_request_error"),
    429: ("rate_limit_error", "rate_limit_error"),
    500: ("server_error", "api_error"),
}


class APIError(Exception):
    """A refused request: `status`, a one-line `message`, the request field it is about (`param`), a
    machine-readable `code`, and extra response headers (Retry-After)."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def openai_body(self) -> dict[str, Any]:
        kind = TYPES.get(self.status, TYPES[500])[0]
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def anthropic_body(self) -> dict[str, Any]:
        kind = TYPES.get(self.status, TYPES[500])[1]
        named = not self.param or self.message.startswith(
            (self.param, "prompt is too long")
        )  # Anthropic's own
        where = "" if named else f"{self.param}: "
        return {"type": "error", "error": {"type": kind, "message": where + self.message}}


class StreamFailed(Exception):
    """A stream failed (a bug, its cause chained) after sending its own error event, numbered in its
    sequence: the handler logs it and aborts the job, and sends nothing more."""


def field_error(e: FieldError) -> APIError:
    """A malformed request body, as the trace parsers name it (`messages[2].content[0].type: ...`)."""
    return APIError(400, str(e), param=e.field_path)


def from_engine(e: Exception) -> APIError:
    """What an exception from rendering or generating becomes for the client. Anything that is not an
    `EngineError` is a bug: a generic 500 (the caller logs the traceback; it never reaches the client)."""
    if isinstance(e, APIError):
        return e
    if isinstance(e, FieldError):
        return field_error(e)
    if isinstance(e, ContextOverflowError):
        return APIError(400, str(e), "messages", "context_length_exceeded")
    if isinstance(e, CacheCapacityError):
        return APIError(400, str(e), "max_tokens", "kv_cache_capacity_exceeded")
    if isinstance(e, PromptError | InvalidArgumentError | TokenizerMissingError):
        return APIError(400, str(e), "messages")
    if isinstance(e, NumericalError):
        return APIError(500, str(e), code="numerical_error")
    if isinstance(e, EngineError):
        return APIError(400, str(e))
    return APIError(500, "internal server error; the traceback is in the server's log", code="internal_error")
