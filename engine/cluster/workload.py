"""What the cluster simulator serves: each request as the blocks a replica's prefix cache looks up and
stores, with its arrival time, session and lengths.

A block is named by a node id: equal ids are equal prefixes (the block's content and everything before it),
as the engine's chained hashes make them. Hash-id traces give the blocks directly (one id per block of the
prompt, chained here as the engine's `BlockManager` chains them); traces with text give token ids (rendered
and tokenized by the caller), cut into blocks of the engine's block size.

Each request is served in passes, as `replay --analyze` serves it through the block manager:
- a hash-id request: one pass that looks up every block but the one holding the last prompt token, holds
  the prompt and output blocks, and publishes the prompt's full blocks;
- a request with text: the prompt (looked up, held, its full blocks published), then, when the trace holds
  the reply, the prompt and the reply but its last token (published as decoding it would have).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from engine.kv.block_manager import token_bytes
from engine.traces.mooncake import HashTrace

APPROX_CHARS = 64  # llm-d's approximate scorer: blocks of 16 tokens x 4 characters per token
APPROX_MAX_BLOCKS = 256  # llm-d's maxPrefixBlocksToMatch: the rest of a longer prompt is not hashed


@dataclass(frozen=True)
class Pass:
    limit: int  # blocks a lookup may match (never the block holding the pass's last token)
    need: int  # blocks the pass holds while it runs
    publish: int  # full blocks stored in the cache when it ends


@dataclass(frozen=True)
class ClusterRequest:
    time_s: float
    session: str
    prompt_tokens: int
    output_tokens: int
    nodes: tuple[int, ...]  # every block the passes look up or publish, in order
    prompt_blocks: int  # how many of `nodes` belong to the prompt (what routers match)
    passes: tuple[Pass, ...]
    router_keys: tuple[int, ...]  # the blocks an approximate router sees (llm-d: character blocks)


@dataclass
class Workload:
    name: str
    block_size: int
    requests: list[ClusterRequest]
    unit: str  # "hash ids" or "tokens"
    refused: int = 0  # requests left out: over the model's context (a replay refuses them)
    layout: str = "as-sent"

    @property
    def distinct_blocks(self) -> int:
        return len({n for r in self.requests for n in r.nodes})

    @property
    def most_blocks(self) -> int:
        """The most blocks one pass holds: the smallest pool that can serve every request."""
        return max(p.need for r in self.requests for p in r.passes)


class NodeIndex:
    """Node ids of chained blocks: (parent node, block key) -> node, so equal ids are equal prefixes."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, object], int] = {}

    def chain(self, keys: Iterable[object]) -> tuple[int, ...]:
        out, parent, ids = [], -1, self.ids
        for key in keys:
            node = ids.get((parent, key))
            if node is None:
                node = ids[(parent, key)] = len(ids)
            out.append(node)
            parent = node
        return tuple(out)


def _blocks(n: int, size: int) -> int:
    return -(-n // size)


def hash_workload(name: str, trace: HashTrace) -> Workload:
    """A hash-id trace: its ids are the blocks; sessions inferred (`infer_sessions`); the approximate router
    sees the ids too (a router in front of such traffic has nothing finer)."""
    index, bs, out = NodeIndex(), trace.block_size, []
    for r in trace.requests:
        nodes, n = index.chain(r.hash_ids), len(r.hash_ids)
        need = max(_blocks(r.input_length + r.output_length, bs), n)
        one = Pass(limit=max(n - 1, 0), need=need, publish=r.input_length // bs)
        out.append(ClusterRequest(r.time_s, "", r.input_length, r.output_length, nodes, n, (one,), nodes))
    return Workload(name, bs, infer_sessions(out), "hash ids")


def timestamp_first(workload: Workload) -> Workload:
    """The same hash-id requests with a clock at the top of every prompt: each request's first block, so
    every block after it, is its own (nothing is shared); lengths, times and sessions unchanged. (Traces with
    text get their clock line before rendering: `engine.bench.harness.cluster_inputs`.)"""
    fresh = iter(range(-1, -(10**12), -1))  # node ids of no other block
    out = []
    for r in workload.requests:
        nodes = tuple(next(fresh) for _ in r.nodes)
        out.append(replace(r, nodes=nodes, router_keys=nodes))
    return replace(workload, requests=out, layout="timestamp-first")


def infer_sessions(requests: Sequence[ClusterRequest]) -> list[ClusterRequest]:
    """Hash-id traces name no sessions. A request continues an earlier one when it holds all of that one's
    stored blocks (its prompt's full blocks) and is at least as long as that prompt and its output (a
    conversation's next request carries both); of those, the one whose stored blocks reach deepest, the
    latest among equals, and each request is continued once. Any other request opens a session."""
    ends: dict[int, list[tuple[int, int]]] = {}  # last stored block -> (length with output, session no.)
    sessions: list[int] = []
    for i, r in enumerate(requests):
        stored = r.passes[0].publish
        session = i
        for node in reversed(r.nodes[:stored]):
            waiting = ends.get(node)
            k = (
                next((k for k in range(len(waiting) - 1, -1, -1) if waiting[k][0] <= r.prompt_tokens), None)
                if waiting
                else None
            )
            if k is not None:
                session = waiting.pop(k)[1]
                break
        if stored:
            ends.setdefault(r.nodes[stored - 1], []).append((r.prompt_tokens + r.output_tokens, session))
        sessions.append(session)
    return [replace(r, session=f"s{s}") for r, s in zip(requests, sessions, strict=True)]


@dataclass(frozen=True)
class TokenPrompt:
    """A request with text, as the caller rendered it: what `token_workload` needs."""

    time_s: float
    session: str
    ids: Sequence[int]
    reply_ids: Sequence[int]  # [] when the trace holds no reply
    text: str  # the rendered prompt: what an approximate router hashes
    output_tokens: int  # tokens decoded (the reply's, else what the trace recorded, else 1)


def _token_keys(ids: Sequence[int], bs: int) -> list[bytes]:
    data, width = token_bytes(ids), 8 * bs
    return [data[i * width : (i + 1) * width] for i in range(len(ids) // bs)]


def _char_keys(text: str) -> list[bytes]:
    width = min(len(text) // APPROX_CHARS, APPROX_MAX_BLOCKS) * APPROX_CHARS
    return [
        hashlib.blake2b(text[i : i + APPROX_CHARS].encode(), digest_size=8).digest()
        for i in range(0, width, APPROX_CHARS)
    ]


def token_workload(name: str, prompts: Sequence[TokenPrompt], block_size: int, refused: int = 0) -> Workload:
    """Requests with text at the engine's block size (see the module docstring for the two passes)."""
    index, chars, bs, out = NodeIndex(), NodeIndex(), block_size, []
    for p in prompts:
        n, full = len(p.ids), [*p.ids, *p.reply_ids[:-1]]
        passes = [Pass((n - 1) // bs, _blocks(n, bs), n // bs)]
        if len(p.reply_ids) > 1:
            passes.append(Pass((len(full) - 1) // bs, _blocks(len(full), bs), len(full) // bs))
        nodes = index.chain(_token_keys(full, bs))
        keys = chars.chain(_char_keys(p.text))
        out.append(
            ClusterRequest(p.time_s, p.session, n, p.output_tokens, nodes, n // bs, tuple(passes), keys)
        )
    return Workload(name, bs, out, "tokens", refused)
