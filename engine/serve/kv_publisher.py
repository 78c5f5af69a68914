"""The ZMQ side of `--kv-events` (the format: engine/serve/kv_events.py), as vLLM's `ZmqEventPublisher` has it:
a PUB socket sending each batch as `[topic, sequence (8 bytes, big-endian, from 0), msgpack payload]`, and the
optional ROUTER replay socket: a request carrying a start sequence (8 bytes, big-endian) is answered with every
kept batch from there, `[topic, sequence, payload]` each, then `[b"", -1 as 8 signed bytes, b""]` (current vLLM,
checked against 0.34; under `vllm-array`, vLLM 0.23's `[sequence, payload]` and `[-1, b""]`).

The block manager's listener only queues (on the engine thread); a publisher thread batches what is queued,
encodes, sends, keeps the last batches for replay, answers replay requests, and greets a late subscriber
with an empty batch (the PUB socket is an XPUB: it hears subscriptions), so it learns at once that batches
came before it.

Nothing a subscriber does can hold the server up or grow it without bound: sends never block (a subscriber
more than `PUB_HWM` batches behind misses the newer ones, and sees the gap in the sequence numbers: the
replay socket refills it); the replay buffer keeps at most `REPLAY_BUFFER` batches and `REPLAY_BYTES` of
payload; a replay goes out `REPLAY_HWM` batches ahead of what its client has read (the rest follows as it
reads, so a slow reader still gets all of it), and a client that reads nothing of it for `REPLAY_STALL_S`
is dropped.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque

import msgpack
import zmq

from engine.errors import InvalidArgumentError
from engine.serve.kv_events import encode_events

REPLAY_BUFFER = 10_000  # batches kept for the replay socket (vLLM's buffer_steps)
REPLAY_BYTES = 32 << 20  # ... and at most this many payload bytes
PUB_HWM = 128  # batches queued for one subscriber before the PUB socket drops its newer ones
REPLAY_HWM = 128  # replay batches queued for one client ahead of its reading
REPLAY_STALL_S = 30.0  # a replay whose client took nothing for this long is dropped
END_SEQ = (-1).to_bytes(8, "big", signed=True)
POLL_S = 0.05  # how long the thread waits for events before it looks at the replay socket again
REPLAY_POLL_S = 0.005  # ... while a replay waits for its client to read


class KvEventPublisher:
    def __init__(
        self, url: str, replay_url: str | None, block_size: int, topic: str = "", fmt: str = "vllm"
    ) -> None:
        self.block_size, self.topic, self.fmt = block_size, topic.encode(), fmt
        self.queue: queue.SimpleQueue[tuple[float, str, list] | None] = queue.SimpleQueue()
        self.buffer: deque[tuple[int, bytes]] = deque()
        self.buffered_bytes = 0
        self.seq = 0
        ctx = zmq.Context.instance()
        self.pub = ctx.socket(zmq.XPUB)  # a PUB that hears subscriptions: a late subscriber is told at once
        self.pub.setsockopt(zmq.XPUB_VERBOSE, 1)
        self.pub.setsockopt(zmq.SNDHWM, PUB_HWM)
        self.replay = ctx.socket(zmq.ROUTER) if replay_url else None
        if self.replay is not None:
            self.replay.setsockopt(zmq.SNDHWM, REPLAY_HWM)
            self.replay.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a full client raises Again: resumed later
        self.replays: dict[bytes, tuple[int, float]] = {}  # client -> (next sequence to send, last progress)
        self.endpoints: list[str] = []  # where the sockets are bound (a port 0 resolved)
        for socket, flag, where in (
            (self.pub, "--kv-events", url),
            (self.replay, "--kv-events-replay", replay_url),
        ):
            if socket is None or where is None:
                continue
            socket.setsockopt(zmq.LINGER, 0)
            socket.setsockopt(zmq.IPV6, "[" in where)  # tcp://[::1]:PORT
            try:
                socket.bind(where)
            except zmq.ZMQError as e:
                self.close_sockets()
                raise InvalidArgumentError(f"{flag} {where}: cannot bind ({e})") from None
            self.endpoints.append(socket.getsockopt_string(zmq.LAST_ENDPOINT))
        self.thread = threading.Thread(target=self._run, name="kvtestbed-kv-events", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def listen(self, kind: str, items: list) -> None:
        """The block manager's listener: queued for the publisher thread (the engine thread never waits)."""
        self.queue.put((time.time(), kind, items))

    def close(self, timeout_s: float = 2.0) -> None:
        """Send what is queued, then stop the thread and close the sockets."""
        self.queue.put(None)
        if self.thread.is_alive():
            self.thread.join(timeout_s)
        self.close_sockets()

    def close_sockets(self) -> None:
        self.pub.close()
        if self.replay is not None:
            self.replay.close()

    # ---- on the publisher thread ----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            if self.replay is not None and self.replay.poll(0):
                self._answer_replay()
            if self.replays:
                self._continue_replays()
            if self.pub.poll(0):
                self._greet()
            try:
                first = self.queue.get(timeout=REPLAY_POLL_S if self.replays else POLL_S)
            except queue.Empty:
                continue
            pending, stop = [first], False
            while True:
                try:
                    pending.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            if None in pending:
                pending, stop = pending[: pending.index(None)], True
            if pending:
                self._send(pending)  # type: ignore[arg-type]
            if stop:
                return

    def _send(self, pending: list[tuple[float, str, list]]) -> None:
        events = encode_events([(kind, items) for _, kind, items in pending], self.block_size, self.fmt)
        self._batch(pending[0][0], events)

    def _batch(self, ts: float, events: list) -> None:
        payload = msgpack.packb([ts, events, 0])
        seq = self.seq.to_bytes(8, "big")
        try:
            self.pub.send_multipart((self.topic, seq, payload), flags=zmq.NOBLOCK)
        except zmq.Again:  # PUB drops at the high-water mark rather than block; kept for replay all the same
            pass
        self.buffer.append((self.seq, payload))
        self.buffered_bytes += len(payload)
        while len(self.buffer) > REPLAY_BUFFER or (
            self.buffered_bytes > REPLAY_BYTES and len(self.buffer) > 1
        ):
            self.buffered_bytes -= len(self.buffer.popleft()[1])
        self.seq += 1

    def _greet(self) -> None:
        """A subscription arrived: once batches were sent, an empty one follows, so the newcomer sees the
        sequence start above 0 and asks the replay socket for what it missed (Dynamo's indexer does), without
        waiting for the cache's next change."""
        joined = self.pub.recv()[:1] == b"\x01"
        if joined and self.seq > 0:
            self._batch(time.time(), [])

    def _answer_replay(self) -> None:
        assert self.replay is not None
        frames = self.replay.recv_multipart()
        if len(frames) != 3:  # not [identity, empty delimiter, start]: a REQ socket sends those
            return
        client, _, start = frames
        self.replays[client] = (int.from_bytes(start, "big"), time.monotonic())
        self._continue_replays()

    def _continue_replays(self) -> None:
        """Send each waiting replay on from its next batch, as far as its client's queue takes; the end marker
        last."""
        assert self.replay is not None
        head, end = ((self.topic,), (b"", END_SEQ, b"")) if self.fmt == "vllm" else ((), (END_SEQ, b""))
        now = time.monotonic()
        for client, (nxt, progress) in list(self.replays.items()):
            first = self.buffer[0][0] if self.buffer else self.seq
            try:
                for i in range(max(0, nxt - first), len(self.buffer)):
                    seq, payload = self.buffer[i]
                    self.replay.send_multipart(
                        (client, b"", *head, seq.to_bytes(8, "big"), payload), zmq.NOBLOCK
                    )
                    nxt, progress = seq + 1, now
                self.replay.send_multipart((client, b"", *end), zmq.NOBLOCK)
                del self.replays[client]
            except zmq.Again:  # its queue is full: the rest when it reads, unless it stalled
                if now - progress > REPLAY_STALL_S:
                    del self.replays[client]
                else:
                    self.replays[client] = (nxt, progress)
            except zmq.ZMQError:  # gone
                del self.replays[client]
