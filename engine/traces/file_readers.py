"""The readers of whole trace files (the formats of `engine.traces.formats.FILE_FORMATS` that hold
requests), by format name. Claude Code transcripts are read together (`read_claude_code` takes every file
of a project), the others one file at a time; hash-id traces hold no requests (`engine.traces.mooncake`)."""

from __future__ import annotations

from pathlib import Path

from engine.traces.claude_code import read_claude_code
from engine.traces.codex import read_codex
from engine.traces.otel import read_otel
from engine.traces.proxy_capture import read_claude_trace, read_har
from engine.traces.records import Read
from engine.traces.supplied import Supplied
from engine.traces.trajectories import read_mini_swe_agent, read_swe_agent

TRAJECTORIES = {"mini-swe-agent": read_mini_swe_agent, "swe-agent": read_swe_agent}

REQUEST_FILES = ("claude-code", "codex", "claude-trace", "har", "otel", "mini-swe-agent", "swe-agent")


def read_file(path: Path, kind: str, supplied: Supplied | None = None) -> Read:
    if kind == "claude-code":
        return read_claude_code([path], supplied)
    if kind == "codex":
        return read_codex(path, supplied)
    if kind in TRAJECTORIES:
        return TRAJECTORIES[kind](path, supplied)
    return {"claude-trace": read_claude_trace, "har": read_har, "otel": read_otel}[kind](path)
