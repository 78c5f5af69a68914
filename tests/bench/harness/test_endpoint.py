"""An --endpoint URL: its root for both SDKs, the host results name it by, and the key from the environment."""

from __future__ import annotations

import argparse

import pytest

from engine.bench.harness.endpoint import add_endpoint_args, open_endpoint
from engine.errors import EndpointError


def parsed(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_endpoint_args(p)
    return p.parse_args(list(argv))


def test_root_host_and_key(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-anthropic")
    e = open_endpoint(parsed("--endpoint", "https://api.example.com:8443/v1/"))
    assert (e.root, e.host, e.key, e.retries) == (
        "https://api.example.com:8443",
        "api.example.com:8443",
        "sk-openai",
        0,
    )
    e = open_endpoint(parsed("--endpoint", "http://127.0.0.1:8000", "--api", "anthropic", "--retries", "2"))
    assert (e.root, e.key, e.retries) == ("http://127.0.0.1:8000", "sk-anthropic", 2)
    monkeypatch.setenv("MY_KEY", "sk-mine")
    assert open_endpoint(parsed("--endpoint", "http://h/v1", "--api-key-env", "MY_KEY")).key == "sk-mine"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert open_endpoint(parsed("--endpoint", "http://h")).key == "EMPTY"  # a local server without a key


@pytest.mark.parametrize(
    "url", ["127.0.0.1:8000", "file:///etc", "http://h/v1?key=sk-1", "https://user:pw@h/v1"]
)
def test_refused_urls(url: str) -> None:
    with pytest.raises(EndpointError) as e:
        open_endpoint(parsed("--endpoint", url))
    assert "sk-1" not in str(e.value) and "pw" not in str(e.value)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:99999", "the port must be a number from 1 to 65535"),
        ("http://127.0.0.1:abc", "the port must be a number from 1 to 65535"),
        ("http://127.0.0.1:0", "the port must be a number from 1 to 65535"),
        ("http://[::1:8000", "not a URL"),
    ],
)
def test_a_bad_port_or_host_is_one_line(url: str, message: str) -> None:
    with pytest.raises(EndpointError, match=message):
        open_endpoint(parsed("--endpoint", url))
