"""`python -m engine.bench <command>`: one experiment per command, each writing a new
results/<command>-<model>-<device>-<UTC time>/ folder of the current directory (or --out DIR)."""

from __future__ import annotations

import argparse

from engine.cli import run


def main(argv: list[str] | None = None) -> int:
    from engine.bench.commands import (
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

    parser = argparse.ArgumentParser(prog="python -m engine.bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    # each command module registers its own subcommand and sets `func`
    for module in (
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
    ):
        module.register(commands)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    run(main)
