"""The Python agents that scripts/capture_agents.py and scripts/agents_check.sh run: one small tool-using task
("What is the weather in Paris?" with a `get_weather` tool) per client, configured only as a user would
configure it, through the environment (`OPENAI_BASE_URL` / `OPENAI_API_KEY`, `ANTHROPIC_BASE_URL` /
`ANTHROPIC_API_KEY`) and the model name.

    python scripts/agent_clients.py CLIENT [--model NAME]

CLIENT: agents-responses (the OpenAI Agents SDK's default model, the Responses API), agents-chat (its
Chat Completions model), langchain-openai (ChatOpenAI), langchain-anthropic (ChatAnthropic). Without --model
each uses its library's default model name (the Agents SDK has one; the LangChain clients need one and get
gpt-4o-mini / claude-haiku-4-5). The last line printed is the agent's final answer. At most four model turns.
"""

from __future__ import annotations

import argparse
import os

CLIENTS = ["agents-responses", "agents-chat", "langchain-openai", "langchain-anthropic"]
PROMPT = "What is the weather in Paris? Use the get_weather tool, then answer in one sentence."
MAX_TURNS = 4


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"Sunny, 21 C in {city}."


def run_agents_sdk(model: str | None, chat: bool) -> str:
    os.environ.setdefault(
        "OPENAI_AGENTS_DISABLE_TRACING", "1"
    )  # the SDK's documented switch: no trace export
    from agents import Agent, Runner, function_tool, set_default_openai_api

    if chat:
        set_default_openai_api("chat_completions")
    kwargs = {"model": model} if model else {}
    agent = Agent(
        name="Assistant",
        instructions="You are a helpful assistant.",
        tools=[function_tool(get_weather)],
        **kwargs,
    )
    return str(Runner.run_sync(agent, PROMPT, max_turns=MAX_TURNS).final_output)


def run_langchain(model: str | None, provider: str) -> str:
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    if provider == "openai":
        from langchain_openai import ChatOpenAI

        llm = ChatOpenAI(model=model or "gpt-4o-mini", max_retries=0)
    else:
        from langchain_anthropic import ChatAnthropic

        llm = ChatAnthropic(model=model or "claude-haiku-4-5", max_retries=0)
    weather = tool(get_weather)
    chat = llm.bind_tools([weather])
    messages = [HumanMessage(PROMPT)]
    for _ in range(MAX_TURNS):
        reply = chat.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            return reply.text if isinstance(reply.text, str) else reply.text()
        for call in reply.tool_calls:
            messages.append(ToolMessage(weather.invoke(call["args"]), tool_call_id=call["id"]))
    return f"(no final answer after {MAX_TURNS} turns)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("client", choices=CLIENTS)
    parser.add_argument("--model", help="the model name to ask for (default: the library's)")
    args = parser.parse_args(argv)
    if args.client.startswith("agents-"):
        answer = run_agents_sdk(args.model, chat=args.client == "agents-chat")
    else:
        answer = run_langchain(args.model, args.client.removeprefix("langchain-"))
    print(answer.strip().replace("\n", " ") or "(empty answer)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
