"""`KvEventStreams`: one KV event stream per served model name, as a router expects one engine per model.

The server keeps each served model name in a cache of its own (another name is another model to the clients
and to the cache's reports); a vLLM engine serves one model and publishes one stream. So each name gets a
publisher of its own (its sockets, topic, sequence numbers and replay buffer: engine/serve/kv_publisher.py),
and an indexer registers each stream under its name: NVIDIA Dynamo's indexer keeps one radix tree per model
name, llm-d's takes the model from the topic. Within a name, what still separates caches (a client's scope
under --isolate-cache) is published as vLLM publishes a request's `cache_salt`: in `extra_keys` of the
chain's first block.

The block manager's salts are `name` or `name\\0scope` (engine/serve/preparation.py): `split_salt` reads them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the server imports split_salt without pyzmq
    from engine.serve.kv_publisher import KvEventPublisher


def split_salt(salt: str) -> tuple[str, str | None]:
    """A server salt as (served model name, vLLM cache_salt within it: the client's scope, if any)."""
    name, _, scope = salt.partition("\0")
    return name, scope or None


class KvEventStreams:
    def __init__(self, publishers: dict[str, KvEventPublisher]) -> None:
        self.publishers = publishers

    def start(self) -> None:
        for p in self.publishers.values():
            p.start()

    def close(self) -> None:
        for p in self.publishers.values():
            p.close()

    def listen(self, kind: str, items: list) -> None:
        """The block manager's listener: each notification to the stream of its name's cache (a salt no
        served name owns is in no stream: no client can be served from it by name)."""
        if kind == "cleared":
            for p in self.publishers.values():
                p.listen("cleared", [])
            return
        routed: dict[str, list] = defaultdict(list)
        if kind == "removed":
            for h, salt in items:
                routed[split_salt(salt)[0]].append(h)
        else:
            for h, parent, tokens, salt in items:
                name, cache_salt = split_salt(salt)
                routed[name].append((h, parent, tokens, cache_salt if parent is None else None))
        for name, mine in routed.items():
            if name in self.publishers:
                self.publishers[name].listen(kind, mine)
