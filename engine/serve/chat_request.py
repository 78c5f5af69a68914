"""`ChatRequest`: one request as the engine thread serves it, whichever API it came through: the
conversation normalized by the trace parsers (so a recorded request replays to exactly these tokens), the
sampling settings, the client's identity and the session it named (if any) and the raw body (for the recording)."""

from __future__ import annotations

import itertools
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from engine.prompts.chat import HERMES
from engine.prompts.messages import Message
from engine.prompts.sampled import SampledReply, SampledUse
from engine.serve.client_session import ANONYMOUS, ClientSession

# the trace format each API's bodies are recorded in
OPENAI, ANTHROPIC, RESPONSES = "openai-chat", "anthropic", "openai-responses"
CALL_ID_PREFIX = {OPENAI: "call_", ANTHROPIC: "toolu_", RESPONSES: "call_"}  # each API's tool-call ids
_numbers = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


@dataclass
class ChatRequest:
    api: str  # OPENAI | ANTHROPIC | RESPONSES
    model: str  # the served name the client asked for
    messages: list[Message]
    tools: list[dict[str, Any]] | None
    parse_tools: bool  # tools were given and tool_choice allows calls: parse the output for them
    max_tokens: int | None  # None: the server's default (or the context's end), cut to the context left
    temperature: float
    top_p: float
    seed: int | None
    stop: list[str]
    stream: bool
    include_usage: bool  # OpenAI stream_options.include_usage (Anthropic streams always carry usage)
    body: dict[str, Any]  # as received: what --record writes
    client: ClientSession = ClientSession(ANONYMOUS, None, "")  # identity, named session (client_session.py)
    request_id: str = ""
    number: int = field(default_factory=lambda: next(_numbers))  # arrival order on this server
    submitted: float = 0.0  # epoch seconds when queued (the recorded timestamp)
    submitted_clock: float = 0.0  # perf_counter when queued (queue time is measured from it)
    tool_format: str = HERMES  # the format the model's template teaches (engine/prompts/chat.py)
    notes: dict[str, Any] = field(default_factory=dict)  # what parsing noted, for the `kvtestbed` object
    clamp_max_tokens: bool = False  # a max_tokens over what the context leaves is clamped (else refused)
    default_max_tokens: bool = True  # no max_tokens: the server's default; False: up to the context's end
    continue_final: bool = False  # the last message is assistant text that the answer continues (a prefill)
    call_base: str = field(default_factory=lambda: uuid.uuid4().hex[:24])  # its tool calls' ids (`call_id`)
    # the messages rendered from replies as their model sampled them, and the reply this request's response
    # gave out as sampled (engine/prompts/sampled.py): what --record keeps for the replay
    as_sampled: tuple[SampledUse, ...] = ()
    sampled: SampledReply | None = None
    # Responses: the output items it answered with, where kept for previous_response_id (--record keeps them
    # for the line of a later request that continues it)
    output: list[dict[str, Any]] | None = None

    def mark_submitted(self) -> None:
        self.submitted, self.submitted_clock = time.time(), time.perf_counter()

    def call_id(self, index: int) -> str:
        """The id of the answer's `index`th tool call: the same in a stream and a whole answer, and known
        before either is built, so the call is found when a later request carries it back
        (engine/serve/kept_replies.py)."""
        return f"{CALL_ID_PREFIX[self.api]}{self.call_base}{index}"

    @property
    def calls_format(self) -> str | None:
        """The format tool calls are parsed in; None when they are not parsed."""
        return self.tool_format if self.parse_tools else None

    @property
    def continues(self) -> bool:
        """The request continues an earlier one, as far as the server can tell: its conversation holds an
        earlier model turn, and its client names what it continues (a session, or a response by
        `previous_response_id`) or a tool call or result in it shows a model's turn. Assistant text alone
        is not taken for one: clients write example turns into a session's first prompt (aider's worked
        example and acknowledgements), and a final assistant message the answer continues is a prefill."""
        earlier = self.messages[:-1] if self.continue_final else self.messages
        if not any(m["role"] in ("assistant", "tool") for m in earlier):
            return False
        named = self.client.session is not None or "previous_response_id" in self.notes
        return named or any(m["role"] == "tool" or m.get("tool_calls") for m in earlier)
