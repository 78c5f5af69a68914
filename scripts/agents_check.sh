#!/usr/bin/env bash
# Real agents (Claude Code, Codex CLI, the OpenAI Agents SDK, LangChain) against `python -m engine.serve`, each
# run twice with only its documented settings: exit status, last line, HTTP statuses, cached tokens of the
# repeated request. Bounded in time; the servers are always stopped. See scripts/agents_check.py.
#
#   scripts/agents_check.sh [--clients ...] [--tools-dir DIR] [--out DIR] [--no-install] [--timeout S]
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python}" scripts/agents_check.py "$@"
