"""One module per `python -m engine.bench <command>`, named after the command (`-` as `_`), each with its
`main(args)`: imported once the command's flags (`engine/bench/flags/`, the same name) are parsed."""
