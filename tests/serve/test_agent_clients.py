"""Agent frameworks against the SmolLM2 server, as their users run them: the OpenAI Agents SDK's default model
(the Responses API, with the settings its default model name adds: `reasoning.effort`, `text.verbosity`) and
LangChain's ChatOpenAI (Chat Completions), each with a tool and short replies. Each run completes, and the
same run repeated is served from the cache."""

from __future__ import annotations

import asyncio

import openai
import pytest
from agents import Agent, ModelSettings, RunConfig, Runner, function_tool
from agents.models.default_models import get_default_model, get_default_model_settings
from agents.models.openai_provider import OpenAIProvider
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from tests.serve.clients import MODEL
from tests.serve.conftest import Server

PROMPT = "What is the weather in Paris? Use the get_weather tool, then answer in one sentence."
TURNS = 4
SHORT = 24  # tokens per reply


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"Sunny, 21 C in {city}."


def test_agents_sdk_default_model(smollm2_server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")  # the SDK's switch: no trace upload
    client = openai.AsyncOpenAI(base_url=f"{smollm2_server.url}/v1", api_key="unused", max_retries=0)
    config = RunConfig(model_provider=OpenAIProvider(openai_client=client), tracing_disabled=True)
    settings = get_default_model_settings(get_default_model())  # what the default model name sends
    agent = Agent(
        name="Assistant",
        instructions="You are a helpful assistant.",
        tools=[function_tool(get_weather)],
        model=MODEL,
        model_settings=settings.resolve(ModelSettings(temperature=0, max_tokens=SHORT)),
    )

    async def run_twice() -> list:
        return [await Runner.run(agent, PROMPT, max_turns=TURNS, run_config=config) for _ in range(2)]

    first, second = asyncio.run(run_twice())
    assert isinstance(first.final_output, str) and first.final_output == second.final_output  # greedy
    assert all(r.response_id.startswith("resp_") for r in first.raw_responses)  # the Responses API
    assert second.raw_responses[0].usage.input_tokens_details.cached_tokens > 0


def test_langchain_chat_openai(smollm2_server: Server) -> None:
    llm = ChatOpenAI(
        model=MODEL,
        base_url=f"{smollm2_server.url}/v1",
        api_key="unused",
        max_tokens=SHORT,
        temperature=0,
        max_retries=0,
    )
    weather = tool(get_weather)
    chat = llm.bind_tools([weather])

    def run() -> tuple[str, list]:
        messages: list = [HumanMessage(PROMPT)]
        replies = []
        for _ in range(TURNS):
            reply = chat.invoke(messages)
            replies.append(reply)
            messages.append(reply)
            if not reply.tool_calls:
                return reply.text, replies
            messages += [
                ToolMessage(weather.invoke(c["args"]), tool_call_id=c["id"]) for c in reply.tool_calls
            ]
        raise AssertionError(f"no answer after {TURNS} turns")

    (answer, _), (again, replies) = run(), run()
    assert answer == again
    assert replies[0].usage_metadata["input_token_details"]["cache_read"] > 0
