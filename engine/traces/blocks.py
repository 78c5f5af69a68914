"""A request's content blocks in the order Anthropic hashes them, tools -> system -> messages, each under
a canonical serialization (JSON, sorted keys): the identity a provider's cache compares, independent of
how a chat template renders the request. The local tokenizer only counts each block's tokens.

The Anthropic parser and the Claude Code reader keep the blocks as the request had them (several text
blocks stay several); the other formats' blocks are derived from the normalized messages: one per tool,
one per leading system message, then per message one text block (when it has text), one `tool_use` per
tool call and one `tool_result` per tool message.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from engine.kv.block_manager import chain_hash
from engine.prompts.messages import Message
from engine.traces.request import ContentBlock, TraceRequest

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tool_block(tool: dict[str, Any]) -> ContentBlock:
    """A tool definition in the normalized (OpenAI function) form."""
    key = canonical({"type": "tool", **tool.get("function", tool)})
    return ContentBlock("tools", key, key)


def system_block(text: str) -> ContentBlock:
    return ContentBlock("system", canonical({"type": "text", "text": text}), text)


def text_block(role: str, text: str) -> ContentBlock:
    return ContentBlock("messages", canonical({"role": role, "type": "text", "text": text}), text)


def tool_use_block(call: dict[str, Any]) -> ContentBlock:
    """A tool call in the normalized form (`engine.prompts.messages.tool_call`)."""
    fn = call["function"]
    body = {
        "role": "assistant",
        "type": "tool_use",
        "id": call["id"],
        "name": fn["name"],
        "input": fn["arguments"],
    }
    return ContentBlock("messages", canonical(body), f"{fn['name']} {canonical(fn['arguments'])}")


def tool_result_block(call_id: str, content: str) -> ContentBlock:
    body = {"role": "user", "type": "tool_result", "tool_use_id": call_id, "content": content}
    return ContentBlock("messages", canonical(body), content)


def message_blocks(message: Message) -> list[ContentBlock]:
    """A normalized non-system message as its content blocks."""
    if message["role"] == "tool":
        return [tool_result_block(str(message.get("tool_call_id", "")), message["content"])]
    out = [text_block(message["role"], message["content"])] if message["content"] else []
    return out + [tool_use_block(c) for c in message.get("tool_calls") or []]


def derived_blocks(req: TraceRequest) -> tuple[ContentBlock, ...]:
    out = [tool_block(t) for t in req.tools or []]
    lead = next((i for i, m in enumerate(req.messages) if m["role"] != "system"), len(req.messages))
    out += [system_block(m["content"]) for m in req.messages[:lead]]
    for m in req.messages[lead:]:
        out += message_blocks(m)
    return tuple(out)


def blocks_of(req: TraceRequest) -> tuple[ContentBlock, ...]:
    return req.blocks or derived_blocks(req)


class BlockChain:
    """Per request: the chained hash through each block (rooted at the model's name: a cache is per model)
    and the local token count through it. Counts are kept per distinct block, and each link of a chain (a
    block after the hash through the blocks before it) is hashed once: a conversation's requests share
    their earlier blocks."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.counts: dict[str, int] = {}
        self.links: dict[tuple[bytes, str], bytes] = {}  # (hash through the blocks before, key) -> hash

    def tokens(self, block: ContentBlock) -> int:
        n = self.counts.get(block.key)
        if n is None:
            n = self.counts[block.key] = len(self.tokenizer(block.text, add_special_tokens=False).input_ids)
        return n

    def chain(self, req: TraceRequest) -> tuple[tuple[bytes, int], ...]:
        h = hashlib.blake2b(f"model:{req.model or ''}".encode(), digest_size=16).digest()
        total, out = 0, []
        for block in blocks_of(req):
            total += self.tokens(block)
            link = (h, block.key)
            h = self.links.get(link) or self.links.setdefault(link, chain_hash(h, block.key.encode()))
            out.append((h, total))
        return tuple(out)
