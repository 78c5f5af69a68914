"""One module per `python -m engine.bench <command>`, named after the command, each with its
`register(commands)`."""
