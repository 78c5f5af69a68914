"""Browser safety: the Host allowlist, JSON-only bodies, cross-origin POSTs refused, CORS only for the
origins given, the request log for the key holder or loopback. The guard on a bare Starlette app (every
variant, fast), the app's loopback rule in process, and the issue's attacks against real server processes:
a cross-site form post (text/plain, foreign Origin) runs no generation, writes no record line and resets
no cache; a DNS-rebound page (foreign Host) reads no prompt text."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import engine
from engine.errors import InvalidArgumentError
from engine.serve.app import build_state, create_app, error_response
from engine.serve.browser import LOOPBACK_HOSTS, allowed_host, cors_origin, protect
from tests.serve.clients import MODEL
from tests.serve.conftest import Server, http, start, stop, wait_ready

EVIL = "http://evil.example"
APP = "http://app.example:3000"


def bare(hosts: tuple[str, ...] = LOOPBACK_HOSTS, origins: tuple[str, ...] = ()) -> Starlette:
    async def ok(request: Request) -> PlainTextResponse:
        return PlainTextResponse("ran")

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", ok, methods=["GET", "POST"]),
            Route("/v1/messages", ok, methods=["POST"]),
        ]
    )
    protect(app, hosts, origins, error_response)
    return app


def call(app: Starlette, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return await client.request(method, path, headers=headers, content=b"{}")

    return asyncio.run(go())


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8000", "LocalHost:1", "127.0.0.1", "127.0.0.1:8000", "[::1]", "[::1]:8000"],
)
def test_loopback_names_are_answered_with_or_without_a_port(host: str) -> None:
    assert call(bare(), "POST", "/v1/chat/completions", {"Host": host}).text == "ran"


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8000",
        "127.0.0.1.nip.io",
        "localhost.evil.example",
        "[::2]:80",
        "",
        "::1",
    ],
)
def test_other_names_are_refused_in_the_apis_error_shape(host: str) -> None:
    for path, shape in (("/v1/chat/completions", "error"), ("/v1/messages", "type")):
        reply = call(bare(), "POST", path, {"Host": host})
        assert reply.status_code == 400 and shape in reply.json() and "ran" not in reply.text
        assert "--allowed-host" in reply.text
    assert call(bare(), "POST", "/v1/chat/completions", {"Host": host}).json()["error"]["param"] == "Host"


def test_added_names_a_domain_and_the_wildcard_only_when_given() -> None:
    named = bare((*LOOPBACK_HOSTS, "box.lan", "*.corp.example"))
    for host in ("box.lan:8000", "BOX.LAN", "a.corp.example", "b.a.corp.example:1"):
        assert call(named, "GET", "/v1/chat/completions", {"Host": host}).text == "ran", host
    for host in ("corp.example", "box.lan.evil.example", "evil.example"):
        assert call(named, "GET", "/v1/chat/completions", {"Host": host}).status_code == 400, host
    assert call(bare(("*",)), "GET", "/v1/chat/completions", {"Host": "anything.example"}).text == "ran"


def test_a_post_from_another_origins_page_is_refused_unless_allowed() -> None:
    app = bare()
    refused = call(app, "POST", "/v1/chat/completions", {"Origin": EVIL})
    assert refused.status_code == 403 and refused.json()["error"]["param"] == "Origin"
    for origin in ("http://127.0.0.1:8000", "null", "http://127.0.0.1:9999", "https://127.0.0.1:8000"):
        expected = 200 if origin == "http://127.0.0.1:8000" else 403  # only the server's own origin
        assert call(app, "POST", "/v1/chat/completions", {"Origin": origin}).status_code == expected, origin
    assert call(app, "GET", "/v1/chat/completions", {"Origin": EVIL}).text == "ran"  # GET changes nothing
    assert call(bare(origins=(APP,)), "POST", "/v1/chat/completions", {"Origin": APP}).text == "ran"
    assert call(bare(origins=("*",)), "POST", "/v1/chat/completions", {"Origin": EVIL}).text == "ran"


def test_no_cors_headers_unless_an_origin_is_given_then_for_that_origin_only() -> None:
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-api-key",
    }
    for origin in (EVIL, APP):
        for method in ("OPTIONS", "GET"):
            reply = call(bare(), method, "/v1/chat/completions", {"Origin": origin} | preflight)
            assert not [h for h in reply.headers if h.startswith("access-control-")], (origin, method)
    app = bare(origins=(APP,))
    allowed = call(app, "OPTIONS", "/v1/chat/completions", {"Origin": APP} | preflight)
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == APP
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "x-api-key" in allowed.headers["access-control-allow-headers"].lower()
    other = call(app, "OPTIONS", "/v1/chat/completions", {"Origin": EVIL} | preflight)
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    assert (
        call(app, "GET", "/v1/chat/completions", {"Origin": APP}).headers["access-control-allow-origin"]
        == APP
    )
    assert (
        "access-control-allow-origin"
        not in call(app, "GET", "/v1/chat/completions", {"Origin": EVIL}).headers
    )


def test_flag_values() -> None:
    assert allowed_host(" Box.LAN ") == "box.lan" and allowed_host("[fe80::1]") == "[fe80::1]"
    assert allowed_host("*") == "*" and allowed_host("*.example.com") == "*.example.com"
    for bad in ("box.lan:8000", "[::1]:8000", "a.*.com", "**", "", "http://box.lan", "*example.com"):
        with pytest.raises(InvalidArgumentError, match="without a port"):
            allowed_host(bad)
    assert cors_origin("http://App.Example:3000") == "http://app.example:3000" and cors_origin("*") == "*"
    for bad in ("app.example", "http://app.example/", "ftp://app.example", "http://", "http://a/x?y"):
        with pytest.raises(InvalidArgumentError, match="as a browser sends it"):
            cors_origin(bad)


@pytest.fixture(scope="module")
def state_of(tiny_dir: Callable[..., Path]) -> Callable[..., object]:
    model = engine.load(str(tiny_dir("qwen2", tokenizer=True)), device="cpu", cache_tokens=4096)
    return lambda **kw: build_state(model, ["tiny"], **kw)


def from_address(app: object, address: str, headers: dict[str, str] | None = None) -> list[httpx.Response]:
    async def go() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app, client=(address, 50000))  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return [
                await client.get(path, headers=headers)
                for path in ("/v1/kvtestbed/requests", "/v1/kvtestbed/kv_blocks")
            ]

    return asyncio.run(go())


def test_the_request_log_is_loopback_only_without_a_key_and_the_key_holders_with_one(
    state_of: Callable[..., object],
) -> None:
    app = create_app(state_of())  # type: ignore[arg-type]
    for address in ("127.0.0.1", "127.0.0.5", "::1", "::ffff:127.0.0.1"):
        assert [r.status_code for r in from_address(app, address)] == [200, 200], address
    for address in ("192.0.2.7", "::ffff:192.0.2.7", "2001:db8::1", "testclient"):
        replies = from_address(app, address)
        assert [r.status_code for r in replies] == [403, 403], address
        assert "--api-key" in replies[0].json()["error"]["message"] and "requests" not in replies[0].json()
    keyed = create_app(state_of(api_key="k"))  # type: ignore[arg-type]
    assert [r.status_code for r in from_address(keyed, "192.0.2.7", {"x-api-key": "k"})] == [200, 200]
    assert [r.status_code for r in from_address(keyed, "127.0.0.1")] == [401, 401]  # loopback needs it too


FORM = '{"model": "%s", "max_tokens": 2, "messages": [{"role": "user", "content": "Cross-site post."}], "user": "="}'


def counts(server: Server) -> tuple[float, float, int]:
    """(requests counted by /metrics, cached KV blocks, record lines)."""
    total = sum(
        float(line.rsplit(" ", 1)[1])
        for line in server.metrics().splitlines()
        if line.startswith("kvtestbed_requests_total{")
    )
    lines = len(server.record.read_text().splitlines()) if server.record else 0
    return total, server.metric('kvtestbed_kv_blocks{state="cached"}'), lines


def test_a_cross_site_form_post_runs_nothing_against_the_server(smollm2_server: Server) -> None:
    url = smollm2_server.url
    warm = {"model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": "Warm the cache " * 8}]}
    assert http("POST", f"{url}/v1/chat/completions", warm).status == 200
    before = counts(smollm2_server)
    assert before[1] > 0  # something to lose, were the cache reset
    body = (FORM % MODEL).encode()
    routes = ("/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/messages/count_tokens")
    resets = ("/reset_prefix_cache", "/v1/kvtestbed/reset_prefix_cache")
    forms = ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x")
    for path in routes + resets:
        for content_type in forms:
            reply = http("POST", url + path, body, {"Content-Type": content_type, "Origin": EVIL})
            assert reply.status == 403 and "evil.example" in reply.text, (path, reply.text)
        reply = http("POST", url + path, None, {"Content-Type": "", "Origin": EVIL})  # fetch no-cors, no body
        assert reply.status == 403, (path, reply.text)
    for path in routes:  # the same bodies from a client that is not a page: 415, naming Content-Type
        for content_type in (*forms, ""):
            reply = http("POST", url + path, body, {"Content-Type": content_type})
            error = reply.json()["error"]
            assert reply.status == 415 and "application/json" in json.dumps(error), (path, content_type)
            assert error.get("param", "Content-Type") == "Content-Type"
    assert counts(smollm2_server) == before  # no generation, no record line, the cache as it was
    ok = http(
        "POST",
        f"{url}/v1/chat/completions",
        (FORM % MODEL).encode(),
        {"Content-Type": "Application/JSON; charset=utf-8"},
    )
    assert ok.status == 200, ok.text


def test_a_dns_rebound_page_reads_nothing(smollm2_server: Server) -> None:
    port = smollm2_server.url.rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}"):
        for path in ("/v1/kvtestbed/requests", "/v1/kvtestbed/kv_blocks", "/v1/models", "/"):
            reply = http("GET", smollm2_server.url + path, headers={"Host": host})
            assert reply.status == 400 and "requests" not in reply.json(), (host, path)
        reply = http(
            "POST", f"{smollm2_server.url}/v1/chat/completions", (FORM % MODEL).encode(), {"Host": host}
        )
        assert reply.status == 400 and reply.json()["error"]["code"] == "invalid_host"
    assert http("GET", f"http://localhost:{port}/v1/kvtestbed/requests").status == 200


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Callable[..., Path]) -> Iterator[Server]:
    """A tiny Qwen server with a name added and one origin allowed."""
    folder = tmp_path_factory.mktemp("browser")
    args = [
        "--model",
        str(tiny_dir("qwen2", tokenizer=True)),
        "--device",
        "cpu",
        "--served-model-name",
        "tiny",
    ]
    server = start([*args, "--allowed-host", "box.test", "--cors-origin", APP], folder / "serve.log")
    try:
        wait_ready(server)
        yield server
    finally:
        stop(server)


def test_allowed_names_and_origins_against_a_server_given_them(opened: Server) -> None:
    port = opened.url.rsplit(":", 1)[1]
    assert http("GET", f"{opened.url}/v1/models", headers={"Host": f"box.test:{port}"}).status == 200
    assert http("GET", f"{opened.url}/v1/models", headers={"Host": "other.test"}).status == 400
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    allowed = http("OPTIONS", f"{opened.url}/v1/chat/completions", headers={"Origin": APP} | preflight)
    assert allowed.status == 200 and allowed.headers["access-control-allow-origin"] == APP
    assert (
        http("OPTIONS", f"{opened.url}/v1/chat/completions", headers={"Origin": EVIL} | preflight).status
        == 400
    )
    body = {"model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": "From the app."}]}
    reply = http("POST", f"{opened.url}/v1/chat/completions", body, {"Origin": APP})
    assert reply.status == 200 and reply.headers["access-control-allow-origin"] == APP
    assert http("POST", f"{opened.url}/v1/chat/completions", body, {"Origin": EVIL}).status == 403
