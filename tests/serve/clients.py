"""What the serve tests share: the SmolLM2 server's model name and block size, a tool, greedy sampling, and
the two official SDK clients pointed at a server."""

from __future__ import annotations

import anthropic
import openai

from tests.serve.conftest import Server

MODEL = "smollm2-135m"
BLOCK = 16
WEATHER = {
    "name": "get_weather",
    "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
GREEDY = {"temperature": 0}


def openai_client(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.key, max_retries=0, timeout=120)


def anthropic_client(server: Server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=server.key, max_retries=0, timeout=120)
