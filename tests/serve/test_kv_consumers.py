"""The server's KV events read by the consumers' own code (the optional `bash scripts/install_consumers.sh`:
vLLM's wheels, msgspec, cbor2, ai-dynamo-runtime; each test skips saying which is missing):
- vLLM 0.34's `KVEventBatch` decoder decodes every batch of the default format, vLLM 0.23's every batch of
  `--kv-events-format vllm-array` (and each refuses the other's);
- NVIDIA Dynamo's standalone indexer (`python -m dynamo.indexer`), fed both served names' streams, answers
  for every prompt an overlap equal to the `cached_tokens` the server then reports: a shared prefix, another
  served name, evictions, a reset, and streams registered late (caught up by the replay socket);
- with `--prefix-hash vllm-sha256-cbor` every block id the server publishes and lists is the one vLLM's own
  `hash_block_tokens` computes for the same tokens; and `VllmBlockHash` equals it for both of vLLM's sha256s.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from engine import load
from engine.kv.block_manager import BlockManager
from engine.kv.sequence import SequenceState
from engine.kv.vllm_hash import VllmBlockHash
from engine.serve.kv_events import external_hash
from tests.serve import vllm_wheel
from tests.serve.conftest import Server, free_port, http, start, stop, wait_ready

NAMES = ("tiny-a", "tiny-b")
CACHE_TOKENS = 320  # 20 blocks of 16: the test's prompts evict each other
SETTLE_S = 0.3


def vllm_chain(
    utils: Any, fn: Callable[[Any], bytes], blocks: list[tuple[int, ...]], salt: str | None
) -> list:
    hashes: list[bytes] = []
    for i, tokens in enumerate(blocks):
        extra = (("cache_salt", salt),) if salt and i == 0 else None
        hashes.append(utils.hash_block_tokens(fn, hashes[-1] if hashes else None, tokens, extra))
    return hashes


@pytest.mark.parametrize("scheme, fn_name", [("vllm-sha256-cbor", "sha256_cbor"), ("vllm-sha256", "sha256")])
@pytest.mark.parametrize("seed", [None, "0", "7"])
def test_vllm_block_hash_is_vllms(
    scheme: str, fn_name: str, seed: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five-block chains of random tokens, with and without a cache salt, under PYTHONHASHSEED unset, 0 and 7:
    `VllmBlockHash` and a BlockManager using it give vLLM 0.34's `hash_block_tokens` chain (NONE_HASH from
    its `init_none_hash`), each block id in the events equal to vLLM's int conversion."""
    if seed is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
    utils, hashing = vllm_wheel.block_hashing(vllm_wheel.NEWEST, tmp_path)
    fn = getattr(hashing, fn_name)
    utils.init_none_hash(fn)
    ours = VllmBlockHash(scheme)
    assert ours.none_hash == utils.NONE_HASH
    rng = random.Random(seed)
    for salt in (None, "tenant-7"):
        blocks = [tuple(rng.randrange(200_000) for _ in range(16)) for _ in range(5)]
        want = vllm_chain(utils, fn, blocks, salt)
        parent, got = ours.none_hash, []
        for i, tokens in enumerate(blocks):
            parent = ours.block(parent, tokens, salt if i == 0 else None)
            got.append(parent)
        assert got == want
        manager = BlockManager(8, 16, b"test")
        manager.use_vllm_hash(ours)
        seq = SequenceState([t for b in blocks for t in b], salt=salt or "")
        manager.admit(seq)
        manager.grow(seq, len(seq.token_ids))
        seq.num_kv = len(seq.token_ids)
        manager.publish(seq)
        assert [external_hash(h) for h in seq.block_hashes] == [
            int.from_bytes(h, "big") & (2**64 - 1) for h in want
        ]


# ---- a real server, its streams, and the consumers ----------------------------------------------------------


def replayed(ports: list[tuple[int, int]]) -> list[list[bytes]]:
    """Each stream's batches from 0 on, asked of its replay socket (framed either way: the last two frames of
    an answer are the sequence and the payload)."""
    out = []
    for _, replay_port in ports:
        dealer = zmq.Context.instance().socket(zmq.DEALER)
        dealer.connect(f"tcp://127.0.0.1:{replay_port}")
        dealer.send_multipart([b"", (0).to_bytes(8, "big")])
        batches: list[bytes] = []
        while True:
            assert dealer.poll(20_000), "no replay answer"
            seq, payload = dealer.recv_multipart()[-2:]
            if seq == (-1).to_bytes(8, "big", signed=True):
                break
            assert int.from_bytes(seq, "big") == len(batches)
            batches.append(payload)
        dealer.close(linger=0)
        out.append(batches)
    return out


def serve(tmp: Path, model: Path, fmt: str) -> tuple[Server, list[tuple[int, int]]]:
    base_pub, base_replay = free_port(), free_port()
    while abs(base_pub - base_replay) < 4:
        base_replay = free_port()
    args = ["--model", str(model), "--device", "cpu", "--cache-tokens", str(CACHE_TOKENS)]
    args += [f"--served-model-name={n}" for n in NAMES] + ["--kv-events-format", fmt]
    args += [
        "--kv-events",
        f"tcp://127.0.0.1:{base_pub}",
        "--kv-events-replay",
        f"tcp://127.0.0.1:{base_replay}",
    ]
    args += ["--prefix-hash", "vllm-sha256-cbor"]
    server = start(args, tmp / f"{fmt}.log")
    wait_ready(server)
    return server, [(base_pub + i, base_replay + i) for i in range(len(NAMES))]


@pytest.fixture(scope="module")
def tiny(tiny_dir: Callable[..., Path]) -> Path:
    return tiny_dir("qwen2", tokenizer=True)


def ask(server: Server, name: str, messages: list[dict[str, str]]) -> tuple[int, int]:
    body = {"model": name, "messages": messages, "max_tokens": 8, "temperature": 0}
    reply = http("POST", f"{server.url}/v1/chat/completions", body)
    assert reply.status == 200, reply.text
    usage = reply.json()["usage"]
    return usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"]


class Indexer:
    """Dynamo's standalone indexer in a process of its own (it listens on every interface, port chosen here;
    the test speaks to it on loopback only)."""

    def __init__(self, log: Path) -> None:
        vllm_wheel.needs("dynamo.indexer")
        self.url = f"http://127.0.0.1:{free_port()}"
        port = self.url.rsplit(":", 1)[1]
        with log.open("w") as out:
            cmd = [sys.executable, "-m", "dynamo.indexer", "--port", port, "--threads", "1"]
            self.process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                if http("GET", f"{self.url}/health").status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline and self.process.poll() is None, log.read_text()
            time.sleep(0.2)

    def register(self, name: str, pub: int, replay: int) -> None:
        """Each served name's stream is a worker of that model (instance ids are unique across models)."""
        body = {"instance_id": NAMES.index(name) + 1, "model_name": name, "block_size": 16}
        body |= {"endpoint": f"tcp://127.0.0.1:{pub}", "replay_endpoint": f"tcp://127.0.0.1:{replay}"}
        reply = http("POST", f"{self.url}/register", body)
        assert reply.status in (200, 201), reply.text

    def overlap(self, name: str, ids: list[int]) -> int:
        """Tokens of `ids` (all but the last: the server always computes the last) the indexer finds cached,
        once two answers SETTLE_S apart agree (the events of the previous request on their way)."""
        last = None
        while True:
            time.sleep(SETTLE_S)
            reply = http("POST", f"{self.url}/query", {"token_ids": ids[:-1], "model_name": name})
            assert reply.status == 200, reply.text
            now = reply.json()["instances"].get(str(NAMES.index(name) + 1), {}).get("gpu", 0)
            if now == last:
                return now
            last = now

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=20)


def conversation() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """Requests: a shared system prompt, the other name, one again (its blocks stored before the indexer
    registered), prompts that evict, an evicted one again."""
    system = {"role": "system", "content": "You keep a ledger of lighthouses and their keepers. " * 4}
    for q in ("Which lighthouse is oldest?", "Which keeper stayed longest?"):
        yield NAMES[0], [system, {"role": "user", "content": q}]
    yield NAMES[1], [system, {"role": "user", "content": "Which lighthouse is oldest?"}]
    yield NAMES[1], [system, {"role": "user", "content": "Which lamp burns brightest?"}]
    yield NAMES[0], [system, {"role": "user", "content": "Which keeper stayed longest?"}]  # cached before
    for i in range(4):
        yield NAMES[i % 2], [{"role": "user", "content": f"Tell me about harbour number {i}. " * 12}]
    yield NAMES[0], [system, {"role": "user", "content": "Which lighthouse is oldest?"}]


def test_dynamo_indexer_overlap_is_cached_tokens(tmp_path: Path, tiny: Path) -> None:
    indexer = Indexer(tmp_path / "dynamo.log")
    server, ports = serve(tmp_path, tiny, "vllm")
    engine = load(str(tiny), "cpu")
    checked = []
    try:
        for step, (name, messages) in enumerate(conversation()):
            if step == 2:  # two requests in: the indexer catches up through the replay sockets
                for n, (pub, replay) in zip(NAMES, ports, strict=True):
                    indexer.register(n, pub, replay)
            ids = engine.render(messages)
            predicted = indexer.overlap(name, ids) if step >= 2 else None
            prompt_tokens, cached = ask(server, name, messages)
            assert prompt_tokens == len(ids)
            checked.append((step, name, predicted, cached))
        assert http("POST", f"{server.url}/reset_prefix_cache").status == 200
        name, messages = next(conversation())
        ids = engine.render(messages)
        evictions = server.metric("kvtestbed_prefix_cache_evictions_total")
        checked.append(("reset", name, indexer.overlap(name, ids), ask(server, name, messages)[1]))
    finally:
        stop(server)
        indexer.close()
    assert all(p == c for _, _, p, c in checked if p is not None), checked
    # the cases happened: hits, the other name's miss of the same prompt, evictions, the reset's miss
    assert checked[1][3] > 0 and checked[2][3] == 0 and evictions > 0 and checked[-1][3] == 0, checked


@pytest.mark.parametrize(
    "fmt, decodes, refuses", [("vllm", "NEWEST", "LEGACY"), ("vllm-array", "LEGACY", "NEWEST")]
)
def test_vllm_decodes_every_batch(tmp_path: Path, tiny: Path, fmt: str, decodes: str, refuses: str) -> None:
    """Every batch of both streams decodes with the matching vLLM's `KVEventBatch` (and none with the other);
    every block id equals vLLM's hash of its tokens."""
    import msgspec

    version = getattr(vllm_wheel, decodes)
    good = msgspec.msgpack.Decoder(type=vllm_wheel.kv_events(version, tmp_path / "good").KVEventBatch)
    bad = msgspec.msgpack.Decoder(
        type=vllm_wheel.kv_events(getattr(vllm_wheel, refuses), tmp_path / "bad").KVEventBatch
    )
    utils, hashing = vllm_wheel.block_hashing(vllm_wheel.NEWEST, tmp_path / "hash")
    utils.init_none_hash(hashing.sha256_cbor)
    server, ports = serve(tmp_path, tiny, fmt)
    try:
        for name, messages in conversation():
            ask(server, name, messages)
        listed = http("GET", f"{server.url}/v1/kvtestbed/kv_blocks").json()["blocks"]
        batches = replayed(ports)
    finally:
        stop(server)
    decoded = [good.decode(b) for stream in batches for b in stream]
    assert len(decoded) == sum(len(s) for s in batches) > 10  # every batch
    for b in (b for stream in batches for b in stream):
        with pytest.raises(msgspec.ValidationError):
            bad.decode(b)
    # every stored block's id is vLLM's hash of its tokens, chained from its parent's
    by_id = {b["block_hash"]: b for b in listed}
    full: dict[int, bytes] = {}
    stored = [e for batch in decoded for e in batch.events if type(e).__name__ == "BlockStored"]
    assert stored and all(e.medium == "GPU" and e.group_idx == 0 for e in stored)
    for e in stored:
        parent = None if e.parent_block_hash is None else full[e.parent_block_hash]
        for i, h in enumerate(e.block_hashes):
            parent = utils.hash_block_tokens(
                hashing.sha256_cbor, parent, e.token_ids[i * 16 : (i + 1) * 16], None
            )
            assert h == int.from_bytes(parent, "big") & (2**64 - 1)
            full[h] = parent
    assert set(by_id) <= set(full)
    unpacked = msgpack.unpackb(batches[0][0])
    assert isinstance(unpacked[1][0], dict if fmt == "vllm" else list)
