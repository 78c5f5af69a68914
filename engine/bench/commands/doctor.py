"""`python -m engine.bench doctor`: the run (its description and flags: engine/bench/flags/doctor.py)."""

from __future__ import annotations

import argparse

from engine.bench.args import read_traces
from engine.bench.harness.doctor_run import diagnose
from engine.bench.harness.trace_analysis import AnalysisSetup
from engine.bench.reporting.doctor_report import CAUSE_COLUMNS, cause_rows, write_doctor_results
from engine.bench.reporting.replay_report import table
from engine.bench.reporting.results import run_environment
from engine.bench.reporting.run_folder import check_out, model_slug, named_run_dir, written
from engine.errors import InvalidArgumentError, TraceError
from engine.runtime.identity import identity
from engine.traces.doctor.writing import unwritable, write_trace
from engine.traces.providers.registry import LOCAL


def main(args: argparse.Namespace) -> int:
    if args.apply is not None and args.apply.exists() and not args.overwrite:
        raise InvalidArgumentError(f"--apply {args.apply}: exists (pass --overwrite to replace it)")
    check_out(args)
    inputs = read_traces(args)
    if inputs.hash_traces:
        raise TraceError("hash-id traces hold no text: the doctor reads traces with messages")
    requests = [r for r in inputs.requests if r.messages]
    if not requests:
        raise TraceError("these traces hold no requests with content: " + ("; ".join(inputs.notes) or "none"))
    why = unwritable(requests, args.traces) if args.apply is not None else None
    if why is not None:
        raise InvalidArgumentError(f"--apply: {why}")
    if args.measure and len({r.session for r in requests}) > 1:
        raise TraceError("--measure replays one session through the model: give the doctor one session")
    rules = [LOCAL, *dict.fromkeys(p for p in args.provider if p != LOCAL)]
    setup = AnalysisSetup.open(args, rules)
    d = diagnose(setup, requests)
    if args.measure:
        from engine.bench.harness.doctor_timing import time_arms  # loads the weights only here

        time_arms(args, d)
    name = requests[0].session if len({r.session for r in requests}) == 1 else f"{len(args.traces)}-traces"
    out = named_run_dir(args, f"doctor-{name}-{model_slug(setup.source.model_id)}")
    info = identity(
        setup.source, setup.dtype, setup.device, args.block_size, setup.num_blocks * args.block_size
    )
    env = run_environment(info, "doctor", args)
    write_doctor_results(out, f"Doctor: {name}", env, d, rules, requests)
    if args.apply is not None:
        write_trace(args.apply, d.applied, args.traces)
        print(f"rewritten trace: {args.apply}")
    print(table(cause_rows(d, rules), CAUSE_COLUMNS))
    return written(out)
