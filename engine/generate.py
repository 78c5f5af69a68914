"""`python -m engine.generate`: the entry point of the generation CLI (its code: engine/generate_cli.py)."""

from engine.cli import run
from engine.generate_cli import main

if __name__ == "__main__":
    run(main)
