"""KV events in vLLM's format: the block manager's changes through the publisher's ZMQ sockets to a
subscriber that rebuilds the block index, equal to the cache's own; in process (evictions, a reset, the
replay socket in both framings, subscribers that never read) and from a real `engine.serve` run
(`--kv-events`, against `GET /v1/kvtestbed/kv_blocks`); the flags' checks. The consumers' own code reads
them in tests/serve/test_kv_consumers.py."""

from __future__ import annotations

import re
import time

import msgpack
import pytest
import zmq

from engine.errors import InvalidArgumentError
from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.serve import kv_publisher as kv_publisher_module
from engine.serve.__main__ import parser
from engine.serve.kv_events import BlockIndex, as_map, encode_events, external_hash, served_index
from engine.serve.kv_flags import endpoint, kv_publisher
from engine.serve.kv_publisher import END_SEQ, PUB_HWM, REPLAY_HWM, KvEventPublisher
from engine.serve.kv_streams import KvEventStreams, split_salt
from tests.serve.clients import GREEDY, MODEL, openai_client
from tests.serve.conftest import Server, free_port, http

DEADLINE_S = 20.0


class Subscriber:
    """What a router's indexer does: SUB to the batches, ask the replay socket for those from `start`,
    apply them in sequence order."""

    def __init__(self, url: str, replay_url: str, topic: bytes = b"", legacy: bool = False) -> None:
        self.topic, self.legacy = topic, legacy
        ctx = zmq.Context.instance()
        self.sub = ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(url)
        self.replay = ctx.socket(zmq.DEALER)
        self.replay.connect(replay_url)
        self.batches: dict[int, bytes] = {}

    def ask_replay(self, start: int, pause_s: float = 0.0) -> None:
        """Ask for the batches from `start` and read them (after `pause_s`: a reader that falls behind)."""
        self.replay.send_multipart([b"", start.to_bytes(8, "big")])
        time.sleep(pause_s)
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            assert self.replay.poll(int(1000 * (deadline - time.monotonic()))), "no replay answer"
            frames = self.replay.recv_multipart()[1:]  # after the DEALER's empty delimiter
            if self.legacy:  # vLLM 0.23: [seq, payload], the end [END_SEQ, b""]
                seq, payload = frames
            else:  # [topic, seq, payload], the end [b"", END_SEQ, b""]
                topic, seq, payload = frames
                assert topic == (b"" if seq == END_SEQ else self.topic)
            if seq == END_SEQ:
                assert payload == b""
                return
            self.batches[int.from_bytes(seq, "big")] = payload

    def drain(self, wait_ms: int = 100) -> None:
        while self.sub.poll(wait_ms):
            topic, seq, payload = self.sub.recv_multipart()
            assert topic == self.topic
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
                assert isinstance(event, list if self.legacy else dict)
                index.apply(event)
                tags.append(as_map(event)["type"])
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
    items = [
        ("stored", [(h[0], None, (1, 2), "salt"), (h[1], h[0], (3, 4), None)]),
        ("stored", [(h[2], h[1], (5, 6), None), (h[3], b"\0" * 16, (7, 8), None)]),
        ("removed", [h[0]]),
        ("removed", [h[1]]),
        ("cleared", []),
    ]
    x = external_hash
    stored = {"type": "BlockStored", "block_size": 2, "lora_id": None, "medium": "GPU", "lora_name": None}
    assert encode_events(items, block_size=2) == [
        stored
        | {
            "block_hashes": [x(h[0]), x(h[1]), x(h[2])],
            "parent_block_hash": None,
            "token_ids": [1, 2, 3, 4, 5, 6],
            "extra_keys": [("salt",), None, None],
            "group_idx": 0,
        },
        stored
        | {
            "block_hashes": [x(h[3])],
            "parent_block_hash": x(b"\0" * 16),
            "token_ids": [7, 8],
            "extra_keys": [None],
            "group_idx": 0,
        },
        {"type": "BlockRemoved", "block_hashes": [x(h[0]), x(h[1])], "medium": "GPU", "group_idx": 0},
        {"type": "AllBlocksCleared"},
    ]
    assert encode_events(items, block_size=2, fmt="vllm-array") == [
        ["BlockStored", [x(h[0]), x(h[1]), x(h[2])], None, [1, 2, 3, 4, 5, 6], 2, None, "GPU", None]
        + [[("salt",), None, None], 0],
        ["BlockStored", [x(h[3])], x(b"\0" * 16), [7, 8], 2, None, "GPU", None, [None], 0],
        ["BlockRemoved", [x(h[0]), x(h[1])], "GPU", 0],
        ["AllBlocksCleared"],
    ]
    assert x(bytes(range(16))) == int.from_bytes(bytes(range(8, 16)), "big")  # the low 64 bits


def served(blocks: BlockManager, name: str) -> dict[int, tuple[int | None, tuple[int, ...]]]:
    """The blocks of one served name's cache (its own salt and its isolated clients'), as its stream's
    subscriber must index them."""
    mine = [e for e in blocks.index() if split_salt(blocks.blocks[blocks.table[e[0]]].salt)[0] == name]
    return served_index(mine)


@pytest.mark.parametrize("fmt", ["vllm", "vllm-array"])
def test_subscribers_rebuild_each_served_names_cache(fmt: str) -> None:
    """Two served names, each its own stream; an isolated client's chain; evictions (a 6-block pool), a reset,
    then more: each stream's replayed batches rebuild its name's part of the table, in either format and its
    replay framing; the isolated chain's first block carries its scope as the cache salt."""
    ports = {name: (free_port(), free_port()) for name in ("m", "n")}
    publishers = {
        name: KvEventPublisher(f"tcp://127.0.0.1:{pub}", f"tcp://127.0.0.1:{replay}", 4, f"kv@t@{name}", fmt)
        for name, (pub, replay) in ports.items()
    }
    streams = KvEventStreams(publishers)
    blocks = BlockManager(6, 4, b"test")
    blocks.listeners.append(streams.listen)
    streams.start()
    subs = {
        name: Subscriber(
            f"tcp://127.0.0.1:{pub}", f"tcp://127.0.0.1:{replay}", f"kv@t@{name}".encode(), fmt != "vllm"
        )
        for name, (pub, replay) in ports.items()
    }
    try:
        run(blocks, list(range(13)), salt="m")
        run(blocks, [*range(8), 50, 51, 52, 53, 54], salt="m")  # shares two blocks
        run(blocks, list(range(13)), salt="n")  # the other name: evicts
        run(blocks, list(range(200, 209)), salt="m\0scope")  # an isolated client of m
        run(blocks, list(range(100, 113)), salt="n")  # evicts more
        for name, sub in subs.items():
            sub.ask_replay(0)
            index, tags = sub.until_equal(served(blocks, name))
            assert min(sub.batches) == 0 and "BlockStored" in tags and index.blocks
            first = {h for h, (parent, _) in index.blocks.items() if parent is None}
            assert set(index.salts.values()) <= {"scope"} and set(index.salts) <= first
        assert blocks.stats.evictions > 0 and "BlockRemoved" in tags
        blocks.reset()
        run(blocks, list(range(9)), salt="m")
        for name, sub in subs.items():
            index, tags = sub.until_equal(served(blocks, name))  # live, on the PUB socket
            assert tags[-1] == ("BlockStored" if name == "m" else "AllBlocksCleared")
        assert len(subs["m"].index()[0].blocks) == 2 and not subs["n"].index()[0].blocks
        sub = subs["m"]
        sub.batches.clear()
        sub.ask_replay(0)  # the whole run again, from the buffer
        assert min(sub.batches) == 0 and sub.index()[0].blocks == served(blocks, "m")
    finally:
        for sub in subs.values():
            sub.close()
        streams.close()


def test_bind_failure_is_one_line() -> None:
    url = f"tcp://127.0.0.1:{free_port()}"
    first = KvEventPublisher(url, None, block_size=4)
    try:
        with pytest.raises(InvalidArgumentError, match=r"--kv-events tcp://127\.0\.0\.1:\d+: cannot bind"):
            KvEventPublisher(url, None, block_size=4)
    finally:
        first.close()


def test_a_real_server_run_rebuilds_its_index(smollm2_server: Server) -> None:
    """The default topic is llm-d's kv@<host:port>@<model>; the start-up lines name the bound sockets and what
    the stream carries."""
    assert smollm2_server.kv_events is not None
    topic = f"kv@{smollm2_server.url.removeprefix('http://')}@{MODEL}"
    log = smollm2_server.log.read_text()
    pub, replay = smollm2_server.kv_events
    assert "KV events (vllm format, kvtestbed block hashes): every cached block's token ids" in log
    assert f"{MODEL}: {pub}, replay {replay}, topic '{topic}'" in log
    sub = Subscriber(pub, replay, topic.encode())
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


def test_subscribers_that_never_read_hold_nothing_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twenty subscribers that never read: the publisher sends 600 batches of 4,096 tokens one after another
    without waiting for them (PUB drops what they cannot take: sends never block), the replay buffer stays
    within its bytes (1 MiB here), and a subscriber that reads still gets the last batch live."""
    monkeypatch.setattr(kv_publisher_module, "REPLAY_BYTES", 1 << 20)
    url = f"tcp://127.0.0.1:{free_port()}"
    publisher = KvEventPublisher(url, None, block_size=16)
    publisher.start()
    ctx, stalled = zmq.Context.instance(), []
    for _ in range(20):
        sub = ctx.socket(zmq.SUB)
        sub.setsockopt(zmq.RCVHWM, 1)
        sub.setsockopt(zmq.RCVBUF, 4096)
        sub.setsockopt(zmq.SUBSCRIBE, b"")
        sub.connect(url)
        stalled.append(sub)
    reader = Subscriber(url, url)  # its replay socket is unused
    try:
        assert publisher.pub.getsockopt(zmq.SNDHWM) == PUB_HWM
        time.sleep(0.5)  # the subscriptions reach the publisher
        tokens = tuple(range(100_000, 104_096))
        deadline = time.monotonic() + DEADLINE_S
        for i in range(600):
            publisher.listen("stored", [(i.to_bytes(16, "big"), None, tokens, None)])
            while publisher.seq <= i and time.monotonic() < deadline:
                time.sleep(0.001)
        assert publisher.seq == 600, "the publisher waited on subscribers"
        assert publisher.buffered_bytes <= 1 << 20 and 0 < len(publisher.buffer) < 600
        publisher.listen("cleared", [])
        deadline = time.monotonic() + DEADLINE_S
        while 600 not in reader.batches and time.monotonic() < deadline:
            reader.drain()
        assert 600 in reader.batches
    finally:
        reader.close()
        for sub in stalled:
            sub.close(linger=0)
        publisher.close()


def test_a_replay_waits_for_its_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """1,000 batches, 8 times the replay socket's queue per client: a client that reads slowly still gets
    every one and the end marker, while a client that reads nothing holds no more than its queue, does not
    hold the other up, and is dropped once stalled (0.5 s here)."""
    monkeypatch.setattr(kv_publisher_module, "REPLAY_STALL_S", 0.5)
    url, replay_url = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    publisher = KvEventPublisher(url, replay_url, block_size=4)
    publisher.start()
    idle = zmq.Context.instance().socket(zmq.DEALER)
    idle.setsockopt(zmq.RCVHWM, 1)
    idle.connect(replay_url)
    reader = Subscriber(url, replay_url)
    try:
        assert 1_000 > 7 * REPLAY_HWM
        deadline = time.monotonic() + DEADLINE_S
        for i in range(1_000):
            publisher.listen("stored", [(i.to_bytes(16, "big"), None, tuple(range(4)), None)])
            while publisher.seq <= i and time.monotonic() < deadline:
                time.sleep(0.001)
        idle.send_multipart([b"", (0).to_bytes(8, "big")])
        time.sleep(0.2)
        reader.ask_replay(0, pause_s=0.5)  # its queue fills: the replay waits for it
        assert sorted(reader.batches) == list(range(1_000))
        while publisher.replays and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not publisher.replays  # the idle client's replay dropped
    finally:
        idle.close(linger=0)
        reader.close()
        publisher.close()


def test_a_late_subscriber_is_greeted_with_the_sequence() -> None:
    """A subscriber that joins after batches were sent gets an empty batch at once, its sequence above 0 (its
    cue to ask the replay socket), with no change of the cache."""
    url = f"tcp://127.0.0.1:{free_port()}"
    publisher = KvEventPublisher(url, None, block_size=4)
    publisher.start()
    early = Subscriber(url, url)
    late = None
    try:
        time.sleep(0.3)
        publisher.listen("cleared", [])
        deadline = time.monotonic() + DEADLINE_S
        while 0 not in early.batches and time.monotonic() < deadline:
            early.drain()
        late = Subscriber(url, url)
        while 1 not in late.batches and time.monotonic() < deadline:
            late.drain()
        assert sorted(late.batches) == [1] and msgpack.unpackb(late.batches[1])[1] == []
    finally:
        early.close()
        if late is not None:
            late.close()
        publisher.close()


def test_addresses_are_loopback_unless_allowed() -> None:
    assert endpoint("--kv-events", "tcp://127.0.0.1:5557", False) is False
    assert endpoint("--kv-events", "tcp://[::1]:5557", False) is False
    assert endpoint("--kv-events", "tcp://localhost:5557", False) is False
    assert endpoint("--kv-events", "ipc:///tmp/kv", False) is False
    for url in ("tcp://0.0.0.0:5557", "tcp://*:5557", "tcp://192.168.1.5:5557", "tcp://eth0:5557"):
        with pytest.raises(InvalidArgumentError, match=r"not a loopback address; the stream carries every"):
            endpoint("--kv-events", url, False)
        assert endpoint("--kv-events", url, True) is True


def test_the_bound_endpoint_is_the_one_asked() -> None:
    port = free_port()
    publisher = KvEventPublisher(f"tcp://127.0.0.1:{port}", None, block_size=4)
    try:
        assert publisher.endpoints == [f"tcp://127.0.0.1:{port}"]
    finally:
        publisher.close()


@pytest.mark.parametrize(
    "flags, words",
    [
        (
            ["--kv-events", "http://127.0.0.1:5557"],
            "--kv-events http://127.0.0.1:5557: expected tcp://HOST:PORT",
        ),
        (
            ["--kv-events", "tcp://127.0.0.1:99999"],
            "--kv-events tcp://127.0.0.1:99999: the port must be 1 to 65535",
        ),
        (["--kv-events", "tcp://127.0.0.1:0"], "--kv-events tcp://127.0.0.1:0: the port must be 1 to 65535"),
        (["--kv-events", "tcp://127.0.0.1:"], "--kv-events tcp://127.0.0.1:: the port must be 1 to 65535"),
        (["--kv-events", "tcp://:5557"], "--kv-events tcp://:5557: expected tcp://HOST:PORT"),
        (
            ["--kv-events", "tcp://127.0.0.1:5557", "--kv-events-replay", "tcp://0.0.0.0:5558"],
            "--kv-events-replay tcp://0.0.0.0:5558: not a loopback address",
        ),
        (["--kv-events-replay", "tcp://127.0.0.1:5558"], "--kv-events-replay needs --kv-events URL"),
        (["--kv-events-topic", "kv@a@b"], "--kv-events-topic needs --kv-events URL"),
    ],
)
def test_bad_kv_events_flags_are_refused_by_name(flags: list[str], words: str) -> None:
    args = parser().parse_args(["--model", "smollm2-135m", *flags])
    with pytest.raises(InvalidArgumentError, match=re.escape(words)):
        kv_publisher(args, ["smollm2-135m"])
