"""Experiments run through the engine: `commands/` (one module per `python -m engine.bench <command>`),
`workloads/` (what is replayed and how it is laid out) and `machinery/` (replaying, statistics, results,
plots)."""
