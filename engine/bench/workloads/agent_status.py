"""A code-maintained status bar (`<agent_status>`) and the four ways to place it in an agent's context.

The trajectory: a task, then N steps; before step t's request the application renders the status
(tool-call counts per tool and target, a TODO list, elapsed time, a constraint check), and the model
answers with the step's tool call (scripted, of a chosen size), whose result (small) comes back next.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase

from engine.bench.harness.replayer import Request, reply_tokens
from engine.bench.workloads.sizing import lines_until
from engine.errors import InvalidArgumentError
from engine.prompts.chat import Message
from engine.runtime.engine import Engine

CALL_LIMIT = 3
TOOLS = [
    ("phone_call", "+1-555-0100"),
    ("send_sms", "+1-555-0100"),
    ("lookup_contact", "Dana Reyes"),
    ("read_calendar", "2026-12-01"),
    ("send_email", "dana@example.com"),
]
SYSTEM = (
    "You are an assistant that arranges a meeting with Dana Reyes using the tools below. Call "
    f"phone_call at most {CALL_LIMIT} times. Before each call you receive an <agent_status> block that "
    "the application keeps up to date; trust it over your own counting."
)


@dataclass(frozen=True)
class Trajectory:
    task: str
    calls: list[tuple[str, str]]  # (tool, target) per step
    thoughts: list[str]  # the assistant's words before each call: sized so that a reply is about R tokens
    results: list[str]
    todo: list[str]  # sized so that the status at the middle step is about S tokens


def build_trajectory(
    tokenizer: PreTrainedTokenizerBase, steps: int, status_tokens: int, thought_tokens: int
) -> Trajectory:
    """N scripted steps: a status of at least `status_tokens` tokens at the middle step (where the cost model
    measures S; 0: an empty TODO list), and before each call a thought of at least `thought_tokens`."""
    calls = [TOOLS[i % len(TOOLS)] for i in range(steps)]
    thoughts = [
        " ".join(
            lines_until(
                tokenizer,
                thought_tokens,
                lambda i, t=t: f"step {t + 1}.{i + 1}: checking the plan against the status",
            )
        )
        for t in range(steps)
    ]
    results = [
        f'{{"tool": "{tool}", "target": "{target}", "ok": true, "step": {t + 1}}}'
        for t, (tool, target) in enumerate(calls)
    ]
    todo = lines_until(
        tokenizer,
        status_tokens,
        lambda i: f"confirm agenda item {i + 1} with Dana",
        lambda items: render_status(Trajectory("", calls, thoughts, results, items), steps // 2),
    )
    task = "Set up a 30-minute meeting with Dana Reyes this week and confirm it by email."
    return Trajectory(task, calls, thoughts, results, todo)


def sized_trajectory(engine: Engine, steps: int, status_tokens: int, between_tokens: int) -> Trajectory:
    """A trajectory of N = `steps` updates whose S and R, measured as the cost model measures them (`sizes`),
    are the sizes asked (at most one TODO line or thought line more); a size below what the trajectory's
    fixed text takes alone (the counts and constraint lines; the tool call) is refused, naming the least."""
    least_s, least_r = sizes(engine, build_trajectory(engine.tokenizer, steps, 0, 0))
    for name, asked, least, what in (
        ("S", status_tokens, least_s, f"a status with an empty TODO list, at N={steps} updates"),
        ("R", between_tokens, least_r, "a reply that is only its tool call"),
    ):
        if asked < least:
            raise InvalidArgumentError(
                f"{name}={asked} tokens is less than this trajectory can be: {what} takes {least}; "
                f"give {name} of at least {least}"
            )
    return build_trajectory(engine.tokenizer, steps, status_tokens, between_tokens - least_r)


def sizes(engine: Engine, traj: Trajectory) -> tuple[int, int]:
    """(S, R) of a trajectory as the cost model takes them: the tokens of the status at the middle step, and
    of the first reply (its thought and tool call) as the model emits it."""
    mid = len(traj.calls) // 2
    s = len(engine.tokenizer(render_status(traj, mid), add_special_tokens=False).input_ids)
    r = len(reply_tokens(engine, status_request("status-replace", traj, 0), call_message(traj, 0)))
    return s, r


def render_status(traj: Trajectory, step: int) -> str:
    """The status before step `step` (0-based): what has been done in steps < step."""
    done = Counter(traj.calls[:step])
    counts = ", ".join(f"{tool}({target}) {n}" for (tool, target), n in sorted(done.items())) or "none"
    phone = sum(n for (tool, _), n in done.items() if tool == "phone_call")
    todo = [f"  [{'x' if i < step else ' '}] {item}" for i, item in enumerate(traj.todo)]
    check = f"calls to phone_call: {phone}/{CALL_LIMIT}" + (" (limit reached)" if phone >= CALL_LIMIT else "")
    elapsed = f"elapsed: {2 * step}m {7 * step % 60:02d}s"
    lines = ["<agent_status>", elapsed, f"tool calls: {counts}", "todo:", *todo, f"constraint: {check}"]
    return "\n".join([*lines, "</agent_status>"])


def call_message(traj: Trajectory, step: int) -> Message:
    tool, target = traj.calls[step]
    function = {"name": tool, "arguments": {"target": target}}
    return {
        "role": "assistant",
        "content": traj.thoughts[step],
        "tool_calls": [{"type": "function", "function": function}],
    }


def _status(traj: Trajectory, step: int) -> Message:
    return {"role": "user", "content": render_status(traj, step)}


def _steps(traj: Trajectory, upto: int, with_status: bool) -> list[Message]:
    """Calls and results of steps < upto, each call preceded by the status it saw when `with_status`."""
    msgs: list[Message] = []
    for s in range(upto):
        status = [_status(traj, s)] if with_status else []
        msgs += [*status, call_message(traj, s), {"role": "tool", "content": traj.results[s]}]
    return msgs


def status_request(layout: str, traj: Trajectory, step: int) -> Request:
    head: list[Message] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": traj.task}]
    if layout == "status-replace":  # only the latest status, at the end
        return Request([*head, *_steps(traj, step, False), _status(traj, step)])
    if layout == "status-append":  # every status stays where it was appended
        return Request([*head, *_steps(traj, step, True), _status(traj, step)])
    if layout == "status-in-system":
        system = {"role": "system", "content": f"{SYSTEM}\n\n{render_status(traj, step)}"}
        return Request([system, head[1], *_steps(traj, step, False)])
    if layout == "no-status":
        return Request([*head, *_steps(traj, step, False)])
    raise ValueError(f"unknown status layout {layout!r}")


STATUS_LAYOUTS = ("status-replace", "status-append", "status-in-system", "no-status")
