"""What a web page in someone's browser can make this server do: only what its operator allowed.

A browser sends requests wherever a page asks, loopback included, so three doors are shut here:

- **DNS rebinding.** A page on `evil.example` whose name then resolves to 127.0.0.1 reads the server's
  answers as its own origin. Its requests carry `Host: evil.example`, so only the host names in the
  allowlist are answered (loopback names by default; `--allowed-host` adds names, `*` any, only when given),
  checked by Starlette's `TrustedHostMiddleware`; the refusal is a 400 in the API's error shape.
- **Cross-site simple requests.** A form, or a `fetch` in `no-cors` mode, may POST `text/plain` (or no body
  at all) to another origin without a preflight; the browser hides the answer, but the request runs. So
  bodies are JSON only (`require_json`: 415 otherwise, which no form can send), and a POST whose `Origin`
  header names another origin than the server's own is refused (403) unless `--cors-origin` allows it.
- **Reading across origins.** No CORS headers at all unless `--cors-origin ORIGIN` is given; then
  Starlette's `CORSMiddleware` answers preflights for those origins only.

Without an API key, the routes that show what clients sent (the request log, the cache's token ids) answer
only clients on this machine (`local_only`); with a key, only the key holder.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.errors import InvalidArgumentError
from engine.serve.errors import APIError

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")  # what a page may send anywhere without changing anything
HOST_PASSED = "kvtestbed.host_allowed"  # set in the scope by the allowlist when the Host is allowed
Refuse = Callable[[Request, APIError], Response]  # an APIError in the API shape of the request's route


def allowed_host(value: str) -> str:
    """An `--allowed-host` value: a host name or IP address (IPv6 in brackets), `*.domain`, or `*`."""
    name = value.strip().lower()
    wildcard_ok = name == "*" or (name.startswith("*.") and "*" not in name[1:])
    port = name.rpartition(":")[2] if not name.endswith("]") else ""
    if not name or ("*" in name and not wildcard_ok) or "/" in name or (":" in name and port.isdigit()):
        raise InvalidArgumentError(
            f"{value!r}: give a host name or address without a port (any port is "
            "answered), '*.example.com' for a domain, or '*' for any name"
        )
    return name


def cors_origin(value: str) -> str:
    """A `--cors-origin` value: `scheme://host[:port]` as a browser sends it in `Origin`, or `*`."""
    if value == "*":
        return value
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
        raise InvalidArgumentError(
            f"{value!r}: give an origin as a browser sends it, e.g. http://localhost:3000 "
            "(scheme, host and port, no path), or '*' for any"
        )
    return f"{parts.scheme}://{parts.netloc.lower()}"


class BrowserGuard:
    """ASGI middleware, outermost: the Host allowlist (Starlette's check, this server's error body) and
    the cross-origin POST check. `refuse` renders an APIError in the API shape of the request's route."""

    def __init__(
        self,
        app: ASGIApp,
        hosts: Sequence[str],
        origins: Sequence[str],
        refuse: Refuse,
    ) -> None:
        self.app, self.refuse = app, refuse
        self.hosts = TrustedHostMiddleware(self._host_passed, allowed_hosts=list(hosts), www_redirect=False)
        self.origins = {o.lower() for o in origins}

    @staticmethod
    async def _host_passed(scope: Scope, receive: Receive, send: Send) -> None:
        scope[HOST_PASSED] = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        await self.hosts(scope, receive, _discard)  # its own refusal is dropped: ours is sent below
        request = Request(scope)
        error = None
        if not scope.get(HOST_PASSED):
            error = APIError(
                400,
                f"Host {request.headers.get('host', '')!r:.80} is not a name this server answers to "
                "(start it with --allowed-host NAME to add one)",
                "Host",
                "invalid_host",
            )
        elif request.method not in SAFE_METHODS and not self._same_or_allowed(request):
            error = APIError(
                403,
                f"a web page of origin {request.headers['origin']!r:.80} may not send requests here "
                "(start the server with --cors-origin ORIGIN to allow one)",
                "Origin",
                "cross_origin_refused",
            )
        if error is None:
            await self.app(scope, receive, send)
        else:
            await self.refuse(request, error)(scope, receive, send)

    def _same_or_allowed(self, request: Request) -> bool:
        origin = request.headers.get("origin")
        if origin is None:  # not sent by a page (an SDK, curl), or a same-origin GET
            return True
        own = f"{request.url.scheme}://{request.headers.get('host', '')}".lower()
        return "*" in self.origins or origin.lower() in (own, *self.origins)


async def _discard(message: Message) -> None:
    pass


def protect(app: Starlette, hosts: Sequence[str], origins: Sequence[str], refuse: Refuse) -> None:
    """Put the guard in front of `app` (outermost), and CORSMiddleware for `origins` behind it (none: no
    CORS header is ever sent)."""
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["GET", "POST"],
            allow_headers=["*"],  # an allowed origin's page may send the SDKs' own headers
            expose_headers=["Retry-After"],
            max_age=600,
        )
    app.add_middleware(BrowserGuard, hosts=hosts, origins=origins, refuse=refuse)  # the last added: outermost


def require_json(request: Request) -> None:
    """415 unless the body is declared JSON (`application/json`, any parameters such as charset)."""
    declared = request.headers.get("content-type", "")
    if declared.split(";")[0].strip().lower() != "application/json":
        hint = (
            " (curl -d needs -H 'Content-Type: application/json')"
            if "form" in declared or not declared
            else ""
        )
        raise APIError(
            415,
            f"Content-Type must be application/json, got {declared or 'none'!r:.60}{hint}",
            "Content-Type",
            "unsupported_media_type",
        )


def local_only(request: Request) -> None:
    """403 unless the client is on this machine: for what shows every client's prompts, with no key set."""
    host = request.client.host if request.client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # not an address (a test client's name, a Unix socket)
        local = False
    else:
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 from a dual-stack socket
        local = (mapped or address).is_loopback
    if not local:
        raise APIError(
            403,
            f"{request.url.path} shows what every client sent: without --api-key it answers only this "
            f"machine (loopback), not {host}",
            code="loopback_only",
        )
