"""The server's `--kv-events*` and `--prefix-hash` flags: the addresses checked (a loopback address unless
`--kv-events-allow-remote`: the stream carries every cached block's token ids, the prompts, to any subscriber,
and neither socket asks for the API key), the topic llm-d's indexer subscribes to by default, the publisher
built and bound before the model loads, and the block manager set to hash and publish as vLLM would."""

from __future__ import annotations

import argparse
import ipaddress
from typing import Any

from engine.errors import InvalidArgumentError
from engine.kv.vllm_hash import SCHEMES, VllmBlockHash
from engine.serve.kv_events import FORMATS

CARRIES = "every cached block's token ids (the prompts, readable as text), without the API key"


def add_kv_event_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kv-events",
        metavar="URL",
        default=None,
        help="publish KV cache events as vLLM does on a ZMQ PUB socket bound here (tcp://127.0.0.1:5557; "
        "a loopback address unless --kv-events-allow-remote)",
    )
    p.add_argument(
        "--kv-events-replay",
        metavar="URL",
        default=None,
        help="with --kv-events: the replay socket's address",
    )
    p.add_argument(
        "--kv-events-topic",
        default=None,
        help="with --kv-events: the topic (default kv@HOST:PORT@MODEL, llm-d's convention: this server's "
        "address and first served model name)",
    )
    p.add_argument(
        "--kv-events-format",
        choices=FORMATS,
        default="vllm",
        help="vllm: tagged maps, as vLLM 0.24 and later (default); vllm-array: positional arrays and the "
        "older replay framing, as vLLM 0.23 and earlier",
    )
    p.add_argument(
        "--kv-events-allow-remote",
        action="store_true",
        help=f"let --kv-events bind an address other machines reach: the stream carries {CARRIES}",
    )
    p.add_argument(
        "--prefix-hash",
        choices=("kvtestbed", *SCHEMES),
        default="kvtestbed",
        help="block hashes: kvtestbed (BLAKE2b, default); vllm-sha256-cbor or vllm-sha256: as vLLM computes "
        "them (NONE_HASH from $PYTHONHASHSEED), so KV events carry the block ids vLLM would",
    )


def endpoint(flag: str, url: str, allow_remote: bool) -> bool:
    """Check a ZMQ address to bind; whether it is reachable from other machines."""
    if url.startswith("ipc://") and len(url) > len("ipc://"):
        return False
    host, _, port = url.removeprefix("tcp://").rpartition(":")
    if not url.startswith("tcp://") or not host:
        raise InvalidArgumentError(f"{flag} {url}: expected tcp://HOST:PORT (or ipc://PATH)")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise InvalidArgumentError(f"{flag} {url}: the port must be 1 to 65535")
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        remote = name != "localhost" and not ipaddress.ip_address(name).is_loopback
    except ValueError:
        remote = True  # '*', an interface name
    if remote and not allow_remote:
        raise InvalidArgumentError(
            f"{flag} {url}: not a loopback address; the stream carries {CARRIES}. "
            "Bind 127.0.0.1, or add --kv-events-allow-remote"
        )
    return remote


def stream_url(url: str, index: int) -> str:
    """The address of the stream of the `index`-th served name: the port after the previous one's (as vLLM
    offsets its data-parallel ranks' ports), an ipc path with `-index` after it."""
    if index == 0:
        return url
    if url.startswith("ipc://"):
        return f"{url}-{index}"
    base, _, port = url.rpartition(":")
    return f"{base}:{int(port) + index}"


def check_ports(url: str, replay: str | None, count: int) -> None:
    """The streams' ports fit below 65536 and the PUB sockets' ports do not run into the replay sockets'."""
    if not url.startswith("tcp://"):
        return
    first = int(url.rpartition(":")[2])
    if first + count - 1 > 65535:
        raise InvalidArgumentError(
            f"--kv-events {url}: {count} served names need ports up to {first + count - 1}"
        )
    if replay is not None and replay.startswith("tcp://"):
        other = int(replay.rpartition(":")[2])
        if abs(other - first) < count:
            raise InvalidArgumentError(
                f"--kv-events {url} and --kv-events-replay {replay}: {count} served names take ports "
                f"{first}-{first + count - 1} and {other}-{other + count - 1}, one stream each: leave {count} "
                "ports between them"
            )


def kv_publisher(args: argparse.Namespace, names: list[str]) -> tuple[Any, bool]:
    """The --kv-events streams (one per served name), their sockets bound (or one line saying why not), None
    without the flag; and whether other machines can reach them."""
    if args.kv_events is None:
        for flag in ("kv_events_replay", "kv_events_topic"):
            if getattr(args, flag) is not None:
                raise InvalidArgumentError(f"--{flag.replace('_', '-')} needs --kv-events URL")
        return None, False
    remote = any(
        endpoint(flag, url, args.kv_events_allow_remote)
        for flag, url in (("--kv-events", args.kv_events), ("--kv-events-replay", args.kv_events_replay))
        if url is not None
    )
    check_ports(args.kv_events, args.kv_events_replay, len(names))
    try:
        from engine.serve.kv_publisher import KvEventPublisher
        from engine.serve.kv_streams import KvEventStreams
    except ImportError as e:
        raise InvalidArgumentError(
            f"--kv-events needs pyzmq and msgpack ({e.name} is missing): pip install 'kvtestbed[kv-events]'"
        ) from None
    host = f"[{args.host}]" if ":" in args.host else args.host
    publishers: dict[str, Any] = {}
    try:
        for i, name in enumerate(names):
            topic = f"kv@{host}:{args.port}@{name}" if args.kv_events_topic is None else args.kv_events_topic
            replay = None if args.kv_events_replay is None else stream_url(args.kv_events_replay, i)
            publishers[name] = KvEventPublisher(
                stream_url(args.kv_events, i), replay, args.block_size, topic, args.kv_events_format
            )
    except InvalidArgumentError:
        for p in publishers.values():
            p.close_sockets()
        raise
    return KvEventStreams(publishers), remote


def vllm_hash(args: argparse.Namespace) -> VllmBlockHash | None:
    """The --prefix-hash, made before the model loads (a missing cbor2 is one line)."""
    return None if args.prefix_hash == "kvtestbed" else VllmBlockHash(args.prefix_hash)


def banner(streams: Any, args: argparse.Namespace) -> str:
    """The start-up lines: where each name's events go, in which format and topic, and what they carry."""
    lines = [f"\n  KV events ({args.kv_events_format} format, {args.prefix_hash} block hashes): {CARRIES}"]
    for name, p in streams.publishers.items():
        replay = f", replay {p.endpoints[1]}" if len(p.endpoints) > 1 else ""
        lines.append(f"\n    {name}: {p.endpoints[0]}{replay}, topic {p.topic.decode()!r}")
    return "".join(lines)
