"""`python -m engine.serve --model M`: serve one model over OpenAI Chat Completions (`/v1/chat/completions`),
the OpenAI Responses API (`/v1/responses`) and Anthropic Messages (`/v1/messages`, `/v1/messages/count_tokens`),
with what the prefix cache did on every response, a live page at
`/`, Prometheus metrics at `/metrics` and, with --record, a trace that `bench replay` reads.

Binds 127.0.0.1 unless --host says otherwise. --api-key (or $KVTESTBED_API_KEY) makes every route but the
page and /metrics require the key.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from engine.arguments import float_flag, int_flag, text_flag
from engine.cli import add_model_args, docs_link, engine_options, run
from engine.errors import InvalidArgumentError
from engine.serve.browser import LOOPBACK_HOSTS, allowed_host, cors_origin
from engine.serve.kv_flags import CARRIES, add_kv_event_args, banner, kv_publisher, vllm_hash
from engine.serve.kv_streams import split_salt
from engine.serve.limits import BODY_TIMEOUT_MAX_S, BODY_TIMEOUT_S, MAX_BODY_MB
from engine.serve.scripted_replies import ReplyScript, parse_replies

KEY_VARIABLE = "KVTESTBED_API_KEY"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m engine.serve", description=__doc__, epilog=docs_link("serve.md")
    )
    add_model_args(p)
    p.add_argument("--seed", type=int_flag(0), default=0, help="weights seed for synthetic: models")
    p.add_argument(
        "--host",
        type=text_flag,
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1: this machine only)",
    )
    p.add_argument("--port", type=int_flag(1, 65535), default=8000, help="port (default 8000)")
    p.add_argument(
        "--record", type=Path, default=None, help="append every answered request to this JSONL trace"
    )
    p.add_argument("--api-key", default=None, help=f"require this key (default: ${KEY_VARIABLE}, else none)")
    p.add_argument(
        "--served-model-name",
        action="append",
        type=text_flag,
        default=None,
        help="a model name clients may ask for (repeatable; each has its own cache namespace; default: --model)",
    )
    p.add_argument(
        "--max-queue", type=int_flag(1), default=64, help="waiting requests before 429 (default 64)"
    )
    p.add_argument(
        "--max-num-seqs",
        type=int_flag(1),
        default=64,
        help="requests the engine runs at once, batched; the rest wait (default 64)",
    )
    p.add_argument(
        "--max-num-batched-tokens",
        type=int_flag(1),
        default=4096,
        help="tokens one engine step computes at most: a longer prompt is prefilled in chunks of this many, "
        "the other requests served between them (default 4096)",
    )
    p.add_argument(
        "--max-body-mb",
        type=int_flag(1),
        default=MAX_BODY_MB,
        help=f"request body limit in MiB (default {MAX_BODY_MB}): a larger body is refused (413)",
    )
    p.add_argument(
        "--body-timeout-s",
        type=float_flag(positive=True, maximum=BODY_TIMEOUT_MAX_S),
        default=BODY_TIMEOUT_S,
        help=f"a request whose body stops coming for this many seconds is refused (408; default "
        f"{BODY_TIMEOUT_S:g}, at most {BODY_TIMEOUT_MAX_S:g})",
    )
    p.add_argument(
        "--default-max-tokens",
        type=int_flag(1),
        default=1024,
        help="max_tokens of a Chat Completions request that sets none (default 1024, less if the context is "
        "shorter; a Responses request without max_output_tokens runs to the context's end)",
    )
    p.add_argument(
        "--max-tokens-cap",
        type=int_flag(1),
        default=None,
        help="no reply longer than this many tokens: a larger max_tokens is clamped to it, and the "
        "response says so (default: none)",
    )
    p.add_argument(
        "--keepalive-s",
        type=float_flag(positive=True),
        default=5.0,
        help="a stream sends a keep-alive after this many seconds without sending anything (default 5)",
    )
    p.add_argument(
        "--drain-s",
        type=float_flag(0.0),
        default=30.0,
        help="on SIGTERM, seconds the requests in flight get to finish before they end with a 503 (default 30)",
    )
    add_kv_event_args(p)
    p.add_argument(
        "--isolate-cache",
        action="store_true",
        help="each client identity (its API key, else its session) reads only the cache blocks it wrote: "
        "cached_tokens then reveals nothing of other clients' prompts (default: one shared cache)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        type=flag(allowed_host),
        default=[],
        metavar="NAME",
        help="a Host name clients may reach the server by, beside localhost, 127.0.0.1 and [::1] (repeatable; "
        "'*.example.com' a domain, '*' any name; any port). Other names are refused: DNS rebinding",
    )
    p.add_argument(
        "--cors-origin",
        action="append",
        type=flag(cors_origin),
        default=[],
        metavar="ORIGIN",
        help="a web origin (http://host:port) whose pages may call the API from a browser (repeatable; '*' any). "
        "Default: none, and no CORS headers are sent",
    )
    p.add_argument(
        "--replies",
        type=replies_flag,
        default=None,
        metavar="model|agent|script:FILE",
        help="who writes the replies: the model (default); `agent`: a scripted harmless tool call of a tool "
        "the client offers, then a short answer; `script:FILE`: a JSON Lines file of replies. Scripted "
        "tokens are forced through the engine (real prefill and decode steps) and reported as scripted",
    )
    p.add_argument(
        "--splice-sampled",
        choices=["on", "off"],
        default="on",
        help="a reply a client sends back unchanged is rendered as the tokens the model sampled (on, the "
        "default: the prompt's text is the template's, only cut into the model's own tokens), or tokenized "
        "again (off: the tokenizer may cut or normalize it otherwise, a miss labelled reply_retokenized)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p


def replies_flag(value: str) -> ReplyScript | None:
    try:
        return parse_replies(value)
    except InvalidArgumentError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(f"--replies {value}: ")) from None


def flag(parse: Callable[[str], str]) -> Callable[[str], str]:
    """argparse `type=` from a parser raising InvalidArgumentError: argparse's one line naming the flag."""

    def checked(value: str) -> str:
        try:
            return parse(value)
        except InvalidArgumentError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return checked


def served_hosts(bound: str, added: list[str]) -> list[str]:
    """The Host names answered: the loopback names, the address bound when it is one address (a client
    reaching it by that address names it), and `--allowed-host`."""
    hosts = [*LOOPBACK_HOSTS, *added]
    if bound not in ("0.0.0.0", "::", ""):
        hosts.append(f"[{bound}]" if ":" in bound else bound.lower())
    return list(dict.fromkeys(hosts))


def check_port(host: str, port: int) -> None:
    """Refuse a port that cannot be bound before the model is loaded."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            why = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be bound: {e.strerror}"
            raise InvalidArgumentError(f"--host {host} --port {port}: the address {why}") from None


def api_key_given(flag: str | None) -> str | None:
    """The key from --api-key, else from $KVTESTBED_API_KEY, else None (no key). An empty or blank key is
    refused: it would leave the server open while its operator believes it keyed."""
    source, key = (
        ("--api-key", flag) if flag is not None else (f"${KEY_VARIABLE}", os.environ.get(KEY_VARIABLE))
    )
    if key is not None and not key.strip():
        raise InvalidArgumentError(f"{source} is empty: give a key, or set neither to serve without one")
    return key


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    import uvicorn  # after the flags: --help loads neither torch nor the web stack

    from engine.runtime.loader import load
    from engine.serve.app import build_state, create_app
    from engine.serve.http_protocol import JSONErrorsH11Protocol
    from engine.serve.recorder import Recorder
    from engine.serve.shutdown import DrainingServer

    api_key = api_key_given(args.api_key)
    check_port(args.host, args.port)
    names = args.served_model_name or [args.model]
    prefix_hash = vllm_hash(args)
    publisher, remote_events = kv_publisher(args, names)  # its sockets bound before the model loads
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    recorder = Recorder(args.record) if args.record is not None else None
    engine = load(
        args.model,
        args.device,
        args.dtype,
        seed=args.seed,
        max_num_seqs=args.max_num_seqs,
        prefill_chunk=args.max_num_batched_tokens,
        **engine_options(args),
    )
    engine.blocks.use_vllm_hash(prefix_hash, split_salt)  # each served name a cache of its own
    if publisher is not None:
        engine.blocks.listeners.append(publisher.listen)
        publisher.start()
    if engine.source.synthetic:
        print(f"[{args.model}: synthetic random weights: the text is meaningless, the cache facts are real]")
    state = build_state(
        engine,
        names,
        recorder=recorder,
        api_key=api_key,
        max_queue=args.max_queue,
        max_body_bytes=args.max_body_mb << 20,
        body_timeout_s=args.body_timeout_s,
        default_max_tokens=args.default_max_tokens,
        max_tokens_cap=args.max_tokens_cap,
        keepalive_s=args.keepalive_s,
        isolate_cache=args.isolate_cache,
        replies=args.replies,
        splice_sampled=args.splice_sampled == "on",
    )
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"http://{host}:{args.port}"
    print(
        f"kvtestbed serving {', '.join(names)} ({engine.info['dtype']}, {engine.info['device']}) at {url}\n"
        f"  OpenAI:    base_url={url}/v1      (export OPENAI_BASE_URL={url}/v1)\n"
        f"  Anthropic: base_url={url}         (export ANTHROPIC_BASE_URL={url})\n"
        f"  page: {url}/{'#key=<your key>' if api_key else ''}   metrics: {url}/metrics"
        + (f"   recording to {args.record}" if recorder else "")
        + (banner(publisher, args) if publisher else "")
        + (f"\n  replies: scripted ({args.replies.name}), forced through the engine" if args.replies else ""),
        flush=True,
    )
    if remote_events:
        print(f"warning: --kv-events reach other machines: the stream carries {CARRIES}", file=sys.stderr)
    if args.host not in LOOPBACK and api_key is None:
        print(
            f"warning: listening on {args.host} without an API key: anyone who can reach it can use it",
            file=sys.stderr,
        )
    config = uvicorn.Config(
        create_app(
            state, allowed_hosts=served_hosts(args.host, args.allowed_host), cors_origins=args.cors_origin
        ),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        timeout_graceful_shutdown=5,
        http=JSONErrorsH11Protocol,
    )
    try:
        DrainingServer(config, state.drain, args.drain_s).run()
    finally:
        if publisher is not None:
            publisher.close()
    return 0


if __name__ == "__main__":
    run(main)
