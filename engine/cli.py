"""Shared command-line plumbing: the model/device/cache flags, and one-line errors with a non-zero exit."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from engine.arguments import DEFAULT_CACHE_TOKENS, float_flag, int_flag
from engine.errors import EngineError


def add_model_args(parser: argparse.ArgumentParser, default_model: str | None = None) -> None:
    parser.add_argument(
        "--model",
        default=default_model,
        required=default_model is None,
        help="HF folder, hub id, .gguf file, smollm2-135m, or synthetic:<preset>",
    )
    parser.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    parser.add_argument("--dtype", default=None, help="auto (default), float32, bfloat16 or float16")
    parser.add_argument("--block-size", type=int_flag(1), default=16, help="tokens per KV block (default 16)")
    size = parser.add_mutually_exclusive_group()  # one size of the cache: never both, one silently ignored
    size.add_argument(
        "--cache-tokens",
        type=int_flag(1),
        default=None,
        help=f"KV cache capacity in tokens (default {DEFAULT_CACHE_TOKENS:,})",
    )
    size.add_argument(
        "--cache-gb", type=float_flag(positive=True), default=None, help="KV cache capacity in GiB"
    )


def docs_link(page: str) -> str:
    """The last line of a command's --help: where its documentation page is."""
    return f"Documentation: docs/{page} in the kvtestbed repository."


def engine_options(args: argparse.Namespace) -> dict:
    return {"block_size": args.block_size, "cache_tokens": args.cache_tokens, "cache_gb": args.cache_gb}


def run(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> None:
    """Call main; an EngineError becomes one line on stderr and exit status 2. Output piped into a reader
    that stops early (`| head`) ends the command quietly, as Python's documentation advises: the rest of
    stdout goes to /dev/null (so the flush at exit cannot fail again), exit status 1."""
    try:
        sys.exit(main(argv))
    except EngineError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # commands that keep partial results catch it themselves and say so
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
