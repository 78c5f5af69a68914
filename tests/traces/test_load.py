"""Trace files: JSON lists and JSONL, log envelopes, format detection, errors naming request and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import TraceError
from engine.traces.formats import detect, detect_file
from engine.traces.load import load_trace
from engine.traces.responses import hosted_tools
from engine.traces.shipped import EXAMPLES
from tests.traces.conversation import anthropic, chat, responses
from tests.traces.write_captures import claude_trace_log, har_file
from tests.traces.write_claude_code import claude_code_project
from tests.traces.write_codex import codex_rollout
from tests.traces.write_otel import otel_export


@pytest.mark.parametrize(
    ("body", "fmt"), [(chat, "openai-chat"), (responses, "openai-responses"), (anthropic, "anthropic")]
)
def test_formats_are_detected(body, fmt: str) -> None:
    assert detect(body()) == fmt


def test_plain_user_assistant_bodies_are_undecided() -> None:
    assert detect({"messages": [{"role": "user", "content": "hi"}]}) is None
    assert detect([{"role": "user", "content": "hi"}]) == "openai-chat"  # today's bare message lists


def test_jsonl_with_envelopes(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    lines = [
        {"timestamp": "2026-11-30T09:00:00Z", "session_id": "s1", "body": chat()},
        {"ts": 1796029260.5, "request": chat()},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    first, second = load_trace(path)
    assert first.timestamp == 1796029200.0 and first.session == "s1"
    assert second.timestamp == 1796029260.5 and second.session == str(path)  # no session id: the path
    assert first.model == "gpt-4.1"


def test_a_format_can_be_forced(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"messages": [{"role": "user", "content": "hi"}]}]))
    assert load_trace(path, "anthropic")[0].messages == [{"role": "user", "content": "hi"}]
    with pytest.raises(TraceError, match="unknown trace format 'xml'"):
        load_trace(path, "xml")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "non-empty JSON list"),
        ("[{", "not valid JSON"),
        ('{"a": 1}\n{', "line 2 is not valid JSON"),
        (
            json.dumps([chat(), anthropic()]),
            "request 2 looks like anthropic but request 1 looks like openai-chat",
        ),
        (
            json.dumps([chat(), {"messages": [{"role": "user", "content": 5}]}]),
            r"request 2: messages\[0\]\.content: expected a list, got int",
        ),
        (json.dumps([{"timestamp": "yesterday", "body": chat()}]), "request 1: timestamp: expected seconds"),
    ],
)
def test_bad_traces_name_request_and_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=message):
        load_trace(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="does not exist"):
        load_trace(tmp_path / "nope.json")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_times_are_refused(tmp_path: Path, value: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(f'{{"timestamp": {value}, "body": {json.dumps(chat())}}}\n')
    with pytest.raises(TraceError, match=r"request 1: timestamp: expected a finite number of seconds"):
        load_trace(path)


def test_a_time_without_an_offset_is_utc_whatever_the_local_zone(tmp_path: Path, monkeypatch) -> None:
    import time

    path = tmp_path / "t.jsonl"
    naive, offset = "2026-11-30T09:00:00", "2026-11-30T09:30:00+00:00"
    path.write_text("\n".join(json.dumps({"timestamp": t, "body": chat()}) for t in (naive, offset)))
    for zone in ("UTC", "America/New_York", "Asia/Tokyo"):
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        first, second = load_trace(path)
        assert (first.timestamp, second.timestamp) == (1796029200.0, 1796031000.0), zone
    monkeypatch.delenv("TZ")
    time.tzset()


def test_a_byte_order_mark_and_a_pretty_printed_request_are_read(tmp_path: Path) -> None:
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(chat()).encode() + b"\n" + json.dumps(chat()).encode())
    assert len(load_trace(bom)) == 2
    pretty = tmp_path / "pretty.json"
    pretty.write_text(json.dumps(chat(), indent=2))
    (req,) = load_trace(pretty)
    assert req.model == "gpt-4.1" and len(req.messages) == 4
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(chat(), indent=2)[:-2])
    with pytest.raises(
        TraceError, match=r"neither as one request \(.*\) nor as one request per line \(line 1"
    ):
        load_trace(broken)


def test_a_lone_surrogate_names_file_request_and_field(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    bad = json.dumps(
        {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": "a\ud800"}]}
    )
    path.write_text(json.dumps(chat()) + "\n" + bad + "\n")
    with pytest.raises(
        TraceError, match=r"t\.jsonl: request 2: messages\[1\]\.content: holds a lone surrogate '\\ud800' at"
    ):
        load_trace(path)


@pytest.mark.parametrize(
    ("write", "fmt"),
    [
        (lambda d: claude_code_project(d / "p") / "session-a.jsonl", "claude-code"),
        (lambda d: codex_rollout(d / "rollout-1.jsonl"), "codex"),
        (lambda d: claude_trace_log(d / "log.jsonl"), "claude-trace"),
        (lambda d: har_file(d / "c.har"), "har"),
        (lambda d: otel_export(d / "spans.json"), "otel"),
        (lambda d: EXAMPLES["mooncake"], "mooncake"),
        (lambda d: EXAMPLES["anthropic"], None),  # request bodies: told apart per entry
    ],
)
def test_file_formats_are_detected_by_their_first_record(tmp_path: Path, write, fmt: str | None) -> None:
    assert detect_file(write(tmp_path).read_text()) == fmt


def test_load_trace_reads_file_formats_and_refuses_hash_ids(tmp_path: Path) -> None:
    assert len(load_trace(codex_rollout(tmp_path / "r.jsonl"))) == 4
    with pytest.raises(TraceError, match="is a hash-id trace"):
        load_trace(EXAMPLES["mooncake"])


def test_codex_bodies_with_hosted_tools_are_read(tmp_path: Path) -> None:
    """Codex 0.171's own requests (tests/fixtures/agents): its `namespace` and `web_search` tools are not
    offered to a local model, so they are left out of the prompt, not refused."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "agents"
    bodies = [
        json.loads((fixtures / f"codex-{n}.json").read_text())["body"] for n in ("request", "tool-result")
    ]
    path = tmp_path / "codex.jsonl"
    path.write_text("".join(json.dumps({"format": "openai-responses", "body": b}) + "\n" for b in bodies))
    first, second = load_trace(path)
    assert [t["function"]["name"] for t in first.tools][:4] == [
        "exec_command",
        "write_stdin",
        "request_user_input",
        "view_image",
    ]
    assert len(first.tools) == 7 and first.tools == second.tools  # 9 sent: namespace and web_search left out
    assert [m["role"] for m in second.messages] == ["system", "system", "user", "user", "assistant", "tool"]
    assert second.messages[4]["tool_calls"][0]["function"]["name"] == "exec_command"
    assert hosted_tools(bodies[0]) == [
        {"index": 4, "type": "namespace", "name": "multi_agent_v1"},
        {"index": 8, "type": "web_search"},
    ]
