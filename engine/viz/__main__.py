"""`python -m engine.viz heatmap`: attention heatmaps of a prompt, from the engine's own queries and keys.

--layer L|all, --head H|mean|max|all (all: a layer × head grid), --rows last:K|all (last rows: the cheap view
of a long prompt), --transform none|log|sqrt|exclude-sink, --max-new-tokens N adds the rows of a greedy
answer.
"""

from __future__ import annotations

import argparse

from engine.cli import docs_link, run
from engine.viz.flags import add_heatmap_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m engine.viz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser(
        "heatmap",
        help="attention heatmap(s) of one prompt, written to a PNG",
        epilog=docs_link("attention-and-sinks.md"),
    )
    add_heatmap_args(p)
    args = parser.parse_args(argv)
    from engine.viz.command import heatmap  # after the flags: --help loads neither torch nor matplotlib

    return heatmap(args)


if __name__ == "__main__":
    run(main)
