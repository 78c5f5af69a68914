"""Chat messages -> prompt text with the model's own chat template (tools included where it has them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateError

from engine.errors import PromptError
from engine.prompts.messages import Message, validate_messages, validate_tools

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

HERMES, LLAMA3_JSON, GENERIC = "hermes", "llama3_json", "generic"
LLAMA3_MARKS = ("<|python_tag|>", '"parameters": dictionary of argument name')


def tool_format(tokenizer: PreTrainedTokenizerBase) -> str:
    """The tool-call format the model is taught: its template's own, `hermes` (`<tool_call>` blocks:
    Qwen2 / Qwen2.5 / Qwen3) or `llama3_json` (a JSON object with `parameters`: Llama 3.1-3.3); `generic`
    for a template with no tool section, or one in a format not parsed here: the tools then go in the
    system message with `tools_text`, which teaches the Hermes form."""
    template = tokenizer.chat_template if isinstance(tokenizer.chat_template, str) else ""
    if "tools" not in template:
        return GENERIC
    if "<tool_call>" in template:
        return HERMES
    return LLAMA3_JSON if any(mark in template for mark in LLAMA3_MARKS) else GENERIC


def tools_text(tools: Sequence[dict[str, Any]]) -> str:
    """Tool definitions as plain text, and how to call them (the generic format), for templates that
    have no tool section of their own."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        f"\n\n# Tools\n\nYou may call these functions. Their JSON signatures:\n{lines}\n\n"
        "To call one, write its name and arguments as a JSON object within <tool_call></tool_call> tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def _tool_calls_as_text(message: Message) -> Message:
    """For templates that would silently drop `tool_calls`: write them into the content instead."""
    if not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        fn = call.get("function", call)
        call_json = json.dumps({"name": fn["name"], "arguments": fn.get("arguments", {})})
        calls.append(f"<tool_call>\n{call_json}\n</tool_call>")
    content = "\n".join(([message["content"]] if message.get("content") else []) + calls)
    return {k: v for k, v in message.items() if k != "tool_calls"} | {"content": content}


def merge_mid_system(messages: Sequence[Message]) -> list[Message]:
    """System messages after the first message, each joined to the nearest user message (the next one,
    else the one before; its text first, a blank line, then the user's), for templates that refuse a
    system message anywhere but first. One with no user message to join becomes a user message."""
    out = [dict(m) for m in messages]
    for i in range(len(out) - 1, 0, -1):
        if out[i]["role"] != "system":
            continue
        system = out.pop(i)
        after = next((j for j in range(i, len(out)) if out[j]["role"] == "user"), None)
        before = next((j for j in range(i - 1, -1, -1) if out[j]["role"] == "user"), None)
        if after is not None:
            out[after]["content"] = f"{system['content']}\n\n{out[after]['content'] or ''}"
        elif before is not None:
            out[before]["content"] = f"{out[before]['content'] or ''}\n\n{system['content']}"
        else:
            out.insert(i, {"role": "user", "content": system["content"]})
    return out


def render_text(
    tokenizer: PreTrainedTokenizerBase,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    continue_final: bool = False,
    **template_options: Any,
) -> str:
    """The exact prompt text the model sees. Tools go through the template's own tool format; a
    template without one gets them appended to the system message (one is added if there is none).
    `continue_final`: the last message is assistant text to continue (a prefill): it is rendered without
    its end-of-turn marker and no generation prompt follows (the template's continuation mode). A system
    message after the first is rendered where it stands where the template allows it, else merged into
    the nearest user message (`merge_mid_system`)."""
    msgs, tools = [dict(m) for m in validate_messages(messages)], validate_tools(tools)
    if not tokenizer.chat_template:
        raise PromptError("this model's tokenizer has no chat template; pass a string or token ids instead")
    if continue_final and (msgs[-1]["role"] != "assistant" or msgs[-1].get("tool_calls")):
        raise PromptError("only a final assistant message with text and no tool calls can be continued")
    if tool_format(tokenizer) == GENERIC:
        msgs = [_tool_calls_as_text(m) for m in msgs]
        if tools:
            if msgs[0]["role"] != "system":
                msgs.insert(0, {"role": "system", "content": ""})
            msgs[0]["content"] = (msgs[0]["content"] + tools_text(tools)).lstrip("\n")
            tools = None
    options = template_options | {"add_generation_prompt": add_generation_prompt and not continue_final}
    if continue_final:
        options["continue_final_message"] = True
    try:
        return _apply(tokenizer, msgs, tools, options)
    except PromptError:
        if not any(m["role"] == "system" for m in msgs[1:]):
            raise
        return _apply(tokenizer, merge_mid_system(msgs), tools, options)


def _apply(
    tokenizer: PreTrainedTokenizerBase,
    msgs: list[Message],
    tools: Sequence[dict[str, Any]] | None,
    options: dict[str, Any],
) -> str:
    try:
        return tokenizer.apply_chat_template(
            msgs, tools=list(tools) if tools else None, tokenize=False, **options
        )
    except (TemplateError, TypeError, KeyError, ValueError) as e:
        raise PromptError(f"the chat template rejected these messages: {e}") from None
