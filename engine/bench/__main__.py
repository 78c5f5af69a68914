"""`python -m engine.bench <command>`: one experiment per command, each writing a new
results/<command>-<model>-<device>-<UTC time>/ folder of the current directory (or --out DIR)."""

from __future__ import annotations

import argparse
import importlib

from engine.bench.flags import (
    cluster,
    compaction,
    doctor,
    export,
    fleet,
    kv_compose,
    kv_edit,
    layout,
    needle,
    replay,
    sink,
    status_attention,
    statusbar,
    tokens,
)
from engine.cli import run

# each flags module registers its command's subparser, in the order --help lists them
FLAGS = (
    layout,
    replay,
    doctor,
    fleet,
    cluster,
    export,
    statusbar,
    compaction,
    sink,
    status_attention,
    kv_edit,
    kv_compose,
    needle,
    tokens,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for flags in FLAGS:
        flags.register(commands)
    args = parser.parse_args(argv)
    # the command's own module (the engine, torch, plotting) is imported only now: --help loads none of it
    command = importlib.import_module(f"engine.bench.commands.{args.command.replace('-', '_')}")
    return command.main(args)


if __name__ == "__main__":
    run(main)
