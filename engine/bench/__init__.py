"""Experiments run through the engine: `commands/` (one module per `python -m engine.bench <command>`),
`workloads/` (what is replayed and how it is laid out), `harness/` (how runs drive the engine), `reporting/`
(statistics, results folders, reports and plots) and `args` (the bench flags and the default-model rule)."""
