"""The bench commands' flags, one module per command (named after it, as in `engine/bench/commands/`), each with
its command's description and `register(commands)`. They load no torch, transformers or matplotlib: every
command's `--help` prints without them, and the command's own module is imported once its flags are parsed."""
