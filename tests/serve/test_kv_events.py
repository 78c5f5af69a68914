"""KV events in vLLM's format: the block manager's changes through the publisher's ZMQ sockets to a
subscriber that rebuilds the block index, equal to the cache's own; in process (evictions, a reset, the
replay socket) and from a real `engine.serve` run (`--kv-events`, against `GET /v1/kvtestbed/kv_blocks`)."""

from __future__ import annotations

import re
import time

import msgpack
import pytest
import zmq

from engine.errors import InvalidArgumentError
from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.serve.__main__ import kv_publisher, parser
from engine.serve.kv_events import BlockIndex, encode_events, external_hash, served_index
from engine.serve.kv_publisher import END_SEQ, KvEventPublisher
from tests.serve.clients import GREEDY, MODEL, openai_client
from tests.serve.conftest import Server, free_port, http

DEADLINE_S = 20.0


class Subscriber:
    """What a router's indexer does: SUB to the batches, ask the replay socket for those from `start`,
    apply them in sequence order."""

    def __init__(self, url: str, replay_url: str) -> None:
        ctx = zmq.Context.instance()
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(url)
        self.replay = ctx.socket(zmq.DEALER)
        self.replay.connect(replay_url)
        self.batches: dict[int, bytes] = {}

    def ask_replay(self, start: int) -> None:
        self.replay.send_multipart([b"", start.to_bytes(8, "big")])
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            assert self.replay.poll(int(1000 * (deadline - time.monotonic()))), "no replay answer"
            _, seq, payload = self.replay.recv_multipart()
            if seq == END_SEQ:
                return
            self.batches[int.from_bytes(seq, "big")] = payload

    def drain(self, wait_ms: int = 100) -> None:
        while self.sub.poll(wait_ms):
            topic, seq, payload = self.sub.recv_multipart()
            assert topic == b""
            self.batches[int.from_bytes(seq, "big")] = payload

    def index(self) -> tuple[BlockIndex, list[str]]:
        """The index from the first batch held through every later one (none may be missing)."""
        seqs = sorted(self.batches)
        assert seqs == list(range(seqs[0], seqs[-1] + 1)), "a gap in the sequence numbers"
        index, tags = BlockIndex(), []
        for seq in seqs:
            ts, events, rank = msgpack.unpackb(self.batches[seq])
            assert isinstance(ts, float) and ts > 1e9 and rank == 0
            for event in events:
                index.apply(event)
                tags.append(event[0])
        return index, tags

    def until_equal(self, want: dict) -> tuple[BlockIndex, list[str]]:
        """The index, once it equals `want` or the deadline passed (the last batch may be on its way)."""
        deadline = time.monotonic() + DEADLINE_S
        index, tags = self.index()
        while index.blocks != want and time.monotonic() < deadline:
            self.drain()
            index, tags = self.index()
        assert index.blocks == want
        return index, tags

    def close(self) -> None:
        self.sub.close(linger=0)
        self.replay.close(linger=0)


def run(blocks: BlockManager, ids: list[int], salt: str = "") -> None:
    """One request through the block manager as the engine drives it: admit, grow, compute, publish, release."""
    seq = SequenceState(list(ids), salt=salt)
    blocks.admit(seq)
    blocks.grow(seq, len(ids))
    seq.num_kv = len(ids)
    blocks.publish(seq)
    blocks.release(seq)


def test_events_encode_runs_of_chained_blocks() -> None:
    h = [bytes([i]) * 16 for i in range(4)]
    events = encode_events(
        [
            ("stored", [(h[0], None, (1, 2)), (h[1], h[0], (3, 4))]),
            ("stored", [(h[2], h[1], (5, 6)), (h[3], b"\0" * 16, (7, 8))]),
            ("removed", [h[0]]),
            ("removed", [h[1]]),
            ("cleared", []),
        ],
        block_size=2,
    )
    x = external_hash
    assert events == [
        ["BlockStored", [x(h[0]), x(h[1]), x(h[2])], None, [1, 2, 3, 4, 5, 6], 2, None, "GPU", None],
        ["BlockStored", [x(h[3])], x(b"\0" * 16), [7, 8], 2, None, "GPU", None],
        ["BlockRemoved", [x(h[0]), x(h[1])], "GPU"],
        ["AllBlocksCleared"],
    ]
    assert x(bytes(range(16))) == int.from_bytes(bytes(range(8, 16)), "big")  # the low 64 bits


def test_subscriber_rebuilds_the_block_manager_index() -> None:
    """Evictions (a 6-block pool), two salts, a reset, then more: the replayed batches rebuild the table."""
    url, replay_url = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    publisher = KvEventPublisher(url, replay_url, block_size=4)
    blocks = BlockManager(6, 4, b"test")
    blocks.listeners.append(publisher.listen)
    publisher.start()
    sub = Subscriber(url, replay_url)
    try:
        run(blocks, list(range(13)))
        run(blocks, [*range(8), 50, 51, 52, 53, 54])  # shares two blocks
        run(blocks, list(range(13)), salt="other")  # another namespace: evicts
        run(blocks, list(range(100, 121)))  # five blocks: evicts most of the rest
        roots = {blocks.root(""), blocks.root("other")}
        sub.ask_replay(0)
        index, tags = sub.until_equal(served_index(blocks.index(), roots))
        assert min(sub.batches) == 0 and {"BlockStored", "BlockRemoved"} <= set(tags)
        assert blocks.stats.evictions > 0 and index.blocks
        blocks.reset()
        run(blocks, list(range(9)))
        index, tags = sub.until_equal(served_index(blocks.index(), roots))  # live, on the PUB socket
        assert tags[-2:] == ["AllBlocksCleared", "BlockStored"] and len(index.blocks) == 2
        sub.batches.clear()
        sub.ask_replay(0)  # the whole run again, from the buffer
        assert min(sub.batches) == 0 and sub.index()[0].blocks == index.blocks
    finally:
        sub.close()
        publisher.close()


def test_bind_failure_is_one_line() -> None:
    url = f"tcp://127.0.0.1:{free_port()}"
    first = KvEventPublisher(url, None, block_size=4)
    try:
        with pytest.raises(InvalidArgumentError, match=r"--kv-events tcp://127\.0\.0\.1:\d+: cannot bind"):
            KvEventPublisher(url, None, block_size=4)
    finally:
        first.close()


def test_a_real_server_run_rebuilds_its_index(smollm2_server: Server) -> None:
    assert smollm2_server.kv_events is not None
    sub = Subscriber(*smollm2_server.kv_events)
    try:
        assert http("POST", f"{smollm2_server.url}/reset_prefix_cache").status == 200
        client = openai_client(smollm2_server)
        system = {"role": "system", "content": "You index KV caches. " * 12}
        for question in ("Which block is first?", "Which block is last?"):
            client.chat.completions.create(
                model=MODEL, messages=[system, {"role": "user", "content": question}], max_tokens=20, **GREEDY
            )
        served = http("GET", f"{smollm2_server.url}/v1/kvtestbed/kv_blocks").json()
        want = {b["block_hash"]: (b["parent_block_hash"], tuple(b["token_ids"])) for b in served["blocks"]}
        sub.ask_replay(0)
        index, tags = sub.until_equal(want)
        assert index.blocks == want and len(want) >= 4 and "AllBlocksCleared" in tags
        assert all(len(t) == served["block_size"] for _, t in want.values())
        # the second request's blocks chain on the shared system prompt's: one first block, parent None
        assert sum(1 for p, _ in want.values() if p is None) == 1
    finally:
        sub.close()


@pytest.mark.parametrize(
    "flags, words",
    [
        (
            ["--kv-events", "http://127.0.0.1:5557"],
            "--kv-events http://127.0.0.1:5557: expected tcp://HOST:PORT",
        ),
        (["--kv-events-replay", "tcp://127.0.0.1:5558"], "--kv-events-replay needs --kv-events URL"),
    ],
)
def test_bad_kv_events_flags_are_refused_by_name(flags: list[str], words: str) -> None:
    args = parser().parse_args(["--model", "smollm2-135m", *flags])
    with pytest.raises(InvalidArgumentError, match=re.escape(words)):
        kv_publisher(args, 16)
