"""A live server named by `--endpoint URL`: its clients (the official `openai` / `anthropic` SDKs), its key,
its served model and version, and its prefix-cache reset route.

Only the URL given is ever contacted. `URL` is the server's root or its `/v1` base (`http://host:8000`,
`http://host:8000/v1`, `https://api.openai.com/v1`). The key is read from the environment
(`--api-key-env NAME`, else OPENAI_API_KEY / ANTHROPIC_API_KEY for the API used; a local server without one
gets `EMPTY`) and lives only in the clients: results name the endpoint by its host alone. The SDKs retry
nothing unless `--retries N` says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from engine.arguments import float_flag, int_flag
from engine.errors import EndpointError

API_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
# vLLM's (with VLLM_SERVER_DEV_MODE=1; engine.serve has it too) and SGLang's, tried in this order
RESET_ROUTES = ("/reset_prefix_cache", "/flush_cache")
PROBE_TIMEOUT_S = 10.0


def add_endpoint_args(parser: argparse.ArgumentParser, max_tokens: int | None = 256) -> None:
    """The flags of a run against a live server (with --endpoint); `max_tokens` None: the command's own."""
    g = parser.add_argument_group("live server (--endpoint)")
    g.add_argument(
        "--endpoint",
        metavar="URL",
        action="append",
        default=None,
        help="send the requests to this server (replay: repeat it for several replicas, with --router)",
    )
    g.add_argument("--api", choices=list(API_KEY_ENV), default="openai", help="its API (default openai)")
    g.add_argument(
        "--served-model",
        metavar="NAME",
        default=None,
        help="model name to ask for (default: the first of /v1/models)",
    )
    g.add_argument(
        "--max-tokens",
        type=int_flag(1),
        default=max_tokens,
        help=f"max tokens per reply (default {max_tokens or 'the scenario reply length'})",
    )
    g.add_argument(
        "--temperature", type=float_flag(0.0), default=0.0, help="sampling temperature (default 0)"
    )
    g.add_argument(
        "--timeout",
        type=float_flag(positive=True),
        default=600.0,
        metavar="S",
        help="per-request limit, seconds (default 600)",
    )
    g.add_argument("--retries", type=int_flag(0), default=0, help="retries of a failed request (default 0)")
    g.add_argument(
        "--reset-cache",
        action="store_true",
        help="empty the server's prefix cache first (POST /reset_prefix_cache: vLLM, engine.serve; /flush_cache: SGLang)",
    )
    g.add_argument("--api-key-env", metavar="NAME", default=None, help="environment variable holding the key")


def transport() -> Any:
    """The HTTP library the SDKs are built on (httpx, or httpx2 in newer releases)."""
    import openai

    return importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])


def probe_failures() -> tuple[type[Exception], ...]:
    """What a plain request to a server can fail with: the transport's errors, a body that is not JSON."""
    http = transport()
    return (http.HTTPError, http.StreamError, OSError, ValueError)


@dataclass
class Endpoint:
    root: str  # scheme://host[:port][/path], without a trailing /v1
    api: str
    key: str
    timeout_s: float
    retries: int

    @property
    def host(self) -> str:
        """What results name the endpoint by: host[:port], nothing of the path, query or credentials."""
        parts = urlsplit(self.root)
        return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "?"

    def client(self) -> Any:
        """The API's official SDK client, retrying only `retries` times."""
        if self.api == "openai":
            import openai

            return openai.OpenAI(
                base_url=f"{self.root}/v1", api_key=self.key, max_retries=self.retries, timeout=self.timeout_s
            )
        import anthropic

        return anthropic.Anthropic(
            base_url=self.root, api_key=self.key, max_retries=self.retries, timeout=self.timeout_s
        )

    def _http(self, method: str, path: str) -> Any:
        """One plain request to `path` under the root, with the key as both SDKs send it."""
        headers = {"Authorization": f"Bearer {self.key}", "x-api-key": self.key}
        return transport().request(method, f"{self.root}{path}", headers=headers, timeout=PROBE_TIMEOUT_S)

    def served_model(self, given: str | None) -> str:
        """`given`, else the first model `GET /v1/models` lists."""
        if given:
            return given
        try:
            r = self._http("GET", "/v1/models")
        except probe_failures() as e:
            raise EndpointError(f"cannot reach {self.host} ({type(e).__name__}): is the server up?") from None
        if r.status_code != 200:
            hint = (
                " (is the key right? it is read from the environment)" if r.status_code in (401, 403) else ""
            )
            raise EndpointError(
                f"GET /v1/models on {self.host} answered HTTP {r.status_code}{hint}: pass --served-model NAME"
            )
        try:
            return str(r.json()["data"][0]["id"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise EndpointError(
                f"{self.host} lists no model at /v1/models: pass --served-model NAME"
            ) from None

    def version(self) -> str | None:
        """The server's version where it reports one (`GET /version`, as vLLM and SGLang do), else None."""
        try:
            r = self._http("GET", "/version")
            value = r.json().get("version") if r.status_code == 200 else None
        except probe_failures():  # no such route, not JSON, not reachable: not reported
            return None
        return str(value) if isinstance(value, (str, int, float)) else None

    def reset_prefix_cache(self) -> str | None:
        """Empty the server's prefix cache; the route that did it, or None where it has none (or refused)."""
        for route in RESET_ROUTES:
            try:
                if self._http("POST", route).status_code == 200:
                    return route
            except probe_failures():  # unreachable or dropped: no reset here
                continue
        return None


def open_endpoints(args: argparse.Namespace) -> list[Endpoint]:
    """Every `--endpoint`, checked; the same server given twice is refused."""
    endpoints = [open_endpoint(args, url) for url in args.endpoint]
    roots = [e.root for e in endpoints]
    twice = next((r for r in roots if roots.count(r) > 1), None)
    if twice is not None:
        raise EndpointError(f"--endpoint {twice} is given twice: give each replica once")
    return endpoints


def open_endpoint(args: argparse.Namespace, url: str | None = None) -> Endpoint:
    """The endpoint of `--endpoint` (or `url`, one of several), checked: an http(s) URL with a host."""
    if url is None:
        if len(args.endpoint) > 1:
            raise EndpointError("this command sends to one server: give --endpoint once")
        url = args.endpoint[0]
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
    except ValueError as e:  # an unclosed IPv6 bracket, and the like
        raise EndpointError(f"--endpoint {url}: not a URL ({e})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(
            f"--endpoint {parts.scheme or '?'}://...: expected an http:// or https:// URL with a host"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise EndpointError(
            "--endpoint: give the URL without credentials, query or fragment (the key goes in the environment)"
        )
    try:
        port = parts.port
    except ValueError:  # not a number, or past 65535
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise EndpointError(
            f"--endpoint {parts.scheme}://{parts.netloc}: the port must be a number from 1 to 65535"
        )
    root = url.removesuffix("/v1")
    name = args.api_key_env or API_KEY_ENV[args.api]
    key = os.environ.get(name, "")
    if args.api_key_env and not key:
        raise EndpointError(f"--api-key-env {name}: that environment variable is not set")
    return Endpoint(root, args.api, key or "EMPTY", args.timeout, args.retries)
