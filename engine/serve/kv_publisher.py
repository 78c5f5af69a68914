"""The ZMQ side of `--kv-events` (the format: engine/serve/kv_events.py): a PUB socket sending each batch as
`[topic, sequence (8 bytes, big-endian, from 0), msgpack payload]`, and the optional ROUTER replay socket,
as vLLM's `ZmqEventPublisher` has them. The block manager's listener only queues (on the engine thread); a
publisher thread batches what is queued, encodes, sends, keeps the last `REPLAY_BUFFER` batches and answers
replay requests.
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
END_SEQ = (-1).to_bytes(8, "big", signed=True)
POLL_S = 0.05  # how long the thread waits for events before it looks at the replay socket again


class KvEventPublisher:
    def __init__(self, url: str, replay_url: str | None, block_size: int, topic: str = "") -> None:
        self.block_size, self.topic = block_size, topic.encode()
        self.queue: queue.SimpleQueue[tuple[float, str, list] | None] = queue.SimpleQueue()
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=REPLAY_BUFFER)
        self.seq = 0
        ctx = zmq.Context.instance()
        self.pub = ctx.socket(zmq.PUB)
        self.replay = ctx.socket(zmq.ROUTER) if replay_url else None
        for socket, flag, where in (
            (self.pub, "--kv-events", url),
            (self.replay, "--kv-events-replay", replay_url),
        ):
            if socket is None:
                continue
            socket.setsockopt(zmq.LINGER, 0)
            try:
                socket.bind(where)
            except zmq.ZMQError as e:
                self.close_sockets()
                raise InvalidArgumentError(f"{flag} {where}: cannot bind ({e})") from None
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
            try:
                first = self.queue.get(timeout=POLL_S)
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
        events = encode_events([(kind, items) for _, kind, items in pending], self.block_size)
        payload = msgpack.packb([pending[0][0], events, 0])
        self.pub.send_multipart((self.topic, self.seq.to_bytes(8, "big"), payload))
        self.buffer.append((self.seq, payload))
        self.seq += 1

    def _answer_replay(self) -> None:
        assert self.replay is not None
        frames = self.replay.recv_multipart()
        if len(frames) != 3:  # not [identity, empty delimiter, start]: a REQ socket sends those
            return
        client, _, start = frames
        first = int.from_bytes(start, "big")
        for seq, payload in self.buffer:
            if seq >= first:
                self.replay.send_multipart((client, b"", seq.to_bytes(8, "big"), payload))
        self.replay.send_multipart((client, b"", END_SEQ, b""))
