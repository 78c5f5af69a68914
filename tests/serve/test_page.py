"""The live page in a real browser: Debian's chromium, headless, loads `/` from the SmolLM2 server after a
request went through the API, runs the page's script, and the request's row (session, cached tokens, miss
reason, token strip) is in the rendered page. Skipped, saying why, where no chromium is installed."""

from __future__ import annotations

import re
import shutil
import subprocess

import openai
import pytest

from tests.serve.conftest import Server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium installed (Debian: apt-get install -y chromium)")
def test_a_request_appears_on_the_page(smollm2_server: Server) -> None:
    sdk = openai.OpenAI(base_url=f"{smollm2_server.url}/v1", api_key="unused", max_retries=0, timeout=120)
    messages = [{"role": "user", "content": "Hi"}]
    reply = sdk.chat.completions.create(
        model="smollm2-135m", messages=messages, max_tokens=2, temperature=0, user="page-check-session"
    )
    cached = reply.usage.prompt_tokens_details.cached_tokens
    dom = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=5000",
            "--dump-dom",
            f"{smollm2_server.url}/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    row = re.search(r'<tr data-session="page-check-session">(.*?)</tr>', dom, re.DOTALL)
    assert row is not None, dom[-2000:]
    assert f">{reply.usage.prompt_tokens}<" in row.group(1) and f">{cached} (" in row.group(1)
    assert 'class="strip"' in row.group(1) and 'class="region kind-' in row.group(1)
