"""What is done for a request before and after the engine thread holds it, on the preparation threads (a
small pool; never the engine thread, never the event loop): render with the chat template, refuse a prompt
far over the context without tokenizing it, tokenize (incrementally per session), check the context and
what the engine would refuse (engine/serve/request_checks.py), find the session; and once the request has
generated, its report (the `kvtestbed` object, the session's memory, the live page).

Nothing is kept for a refused request: the session's tokenizer memory and the session store change only
for a prompt that passed every check. The session store is shared by the pool's threads under one lock.
"""

from __future__ import annotations

import hashlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from engine.prompts.literal import ChatText
from engine.prompts.regions import RenderedPrompt, common_prefix
from engine.prompts.sampled import Splice, substituted
from engine.prompts.token_bound import TokenBound
from engine.runtime.engine import Engine
from engine.runtime.outputs import Generation
from engine.serve.cache_report import build_report, page_entry
from engine.serve.chat_request import ChatRequest
from engine.serve.kept_replies import KeptReplies
from engine.serve.metrics import Metrics
from engine.serve.miss_reason import PastRequest, classify, token_array
from engine.serve.page import RequestLog
from engine.serve.reply_budget import reply_budget
from engine.serve.request_checks import check_engine, check_stop, refuse_far_over
from engine.serve.scripted_replies import ReplyScript
from engine.serve.sessions import SessionMatch, SessionStore
from engine.serve.worker import Finished
from engine.traces.rendering import TraceRenderer
from engine.traces.request import TraceRequest
from engine.traces.tokens import TokenizedText

THREADS = 2  # one long tokenization leaves a thread for everyone else
TOKENIZER_SESSIONS = 64  # sessions whose last prompt the incremental tokenizer keeps (text, ids, offsets)


@dataclass
class Prepared:
    trace: TraceRequest
    prompt: TokenizedText
    max_new_tokens: int
    match: SessionMatch
    cache_salt: str  # the cache namespace: the served model name, and the client's scope when isolated
    cache_scope: str | None  # --isolate-cache: the client identity's namespace (a digest), else None
    waited_s: float  # queued -> a preparation thread took it
    render_s: float
    tokenize_s: float
    done: float  # perf_counter when preparation ended
    forced: list[int] | None = None  # a scripted reply's tokens (--replies), forced through the engine
    edited: frozenset[str] = frozenset()  # replies whose tool calls came back changed (kept_replies.py)


class Preparer:
    def __init__(
        self,
        engine: Engine,
        metrics: Metrics,
        page: RequestLog,
        default_max_tokens: int,
        max_tokens_cap: int | None = None,
        isolate_cache: bool = False,
        replies: ReplyScript | None = None,
        splice_sampled: bool = True,
    ) -> None:
        self.engine, self.metrics, self.page, self.replies = engine, metrics, page, replies
        self.kept, self.splice_sampled = KeptReplies(), splice_sampled  # replies as sampled
        self.default_max_tokens, self.max_tokens_cap = default_max_tokens, max_tokens_cap
        self.isolate_cache = isolate_cache
        self.context = engine.config.max_position_embeddings
        self.renderer = TraceRenderer(engine.tokenizer, engine.source.eos_ids)
        self.bound = TokenBound.of(engine.tokenizer)
        a, b = ([{"role": "user", "content": c}] for c in ("A", "B"))
        self.sessions = SessionStore(common_prefix(engine.render(a), engine.render(b)))
        self.sessions_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(THREADS, thread_name_prefix="kvtestbed-prep")

    def prepare(self, req: ChatRequest) -> Prepared:
        t0 = time.perf_counter()
        check_stop(req)
        client = req.client
        key = encoder_key(req)
        trace, chat, spliced, edited = self._render(req)
        req.as_sampled = trace.as_sampled
        text = chat.text
        t1 = time.perf_counter()
        refuse_far_over(self.bound, self.context, text)
        prompt = self.renderer.encoder.encode(text, key, keep=False, literal=chat.literal, spliced=spliced)
        t2 = time.perf_counter()
        budget = reply_budget(
            len(prompt.ids),
            req.max_tokens,
            self.context,
            self.default_max_tokens if req.default_max_tokens else None,
            self.max_tokens_cap,
            req.clamp_max_tokens,
        )
        max_new = budget.tokens
        if budget.note is not None:
            req.notes["max_tokens"] = budget.note
        check_engine(self.engine, req, len(prompt.ids) + max_new, max_new)
        with self.sessions_lock:
            continued = req.notes.get("previous_response_id")
            match = self.sessions.resolve(
                client.identity, client.session, client.source, prompt.ids, continued and continued["id"]
            )
            self.renderer.encoder.remember(key, prompt, most=TOKENIZER_SESSIONS)
        scope = hashlib.sha256(client.identity.encode()).hexdigest()[:16] if self.isolate_cache else None
        salt = req.model if scope is None else f"{req.model}\0{scope}"
        forced = None
        if self.replies is not None:  # the script's reply, as the model would emit its tokens, to the budget
            reply = self.replies.reply(req.messages, req.tools)
            exact = reply.get("token_ids")  # a script's exact tokens, then the end of the turn
            eos = list(self.engine.source.eos_ids[:1])
            forced = (
                [*exact, *eos] if exact is not None else self.renderer.reply(trace, prompt, reply, keep=False)
            )[:max_new]
        t3 = time.perf_counter()
        return Prepared(
            trace,
            prompt,
            max_new,
            match,
            salt,
            scope,
            t0 - req.submitted_clock,
            t1 - t0,
            t2 - t1,
            t3,
            forced,
            edited,
        )

    def _render(self, req: ChatRequest) -> tuple[TraceRequest, ChatText, tuple[Splice, ...], frozenset[str]]:
        """The request as rendered (its messages carried back from replies kept as sampled rendered from
        them), its prompt text, where sampled ids are spliced into it, and the replies whose calls came
        back changed."""
        uses, edited = self.kept.uses(req.client.identity, req.messages, self.splice_sampled)
        trace = TraceRequest(
            substituted(req.messages, uses),
            req.tools,
            session=encoder_key(req),
            model=req.model,
            continue_final=req.continue_final,
            as_sampled=uses,
        )
        chat, spliced, made = self.renderer.render(trace, continue_final=req.continue_final)
        return replace(trace, as_sampled=made), chat, spliced, edited

    def count_tokens(self, req: ChatRequest) -> int:
        """The prompt's tokens as `prepare` makes them (Anthropic's count_tokens); nothing is kept. A prompt
        known to be over the context is refused as `prepare` refuses it, before tokenizing."""
        trace, chat, spliced, _ = self._render(req)
        refuse_far_over(self.bound, self.context, chat.text)
        encoded = self.renderer.encoder.encode(
            chat.text, trace.session, keep=False, literal=chat.literal, spliced=spliced
        )
        return len(encoded.ids)

    def finish(
        self,
        req: ChatRequest,
        p: Prepared,
        gen: Generation,
        waited_s: float,
        first_token: float | None,
        kv_tokens: int | None = None,
    ) -> Finished:
        """The finished request's report (`waited_s`: all its time in queues; `first_token`: perf_counter
        when its first token came, None if none did); the session remembers it, the page and the metrics
        show it. `kv_tokens`: the request was aborted (its client left) with the K/V of its first
        `kv_tokens` tokens computed, which stay in the cache: the report says `aborted`, the session
        remembers those tokens."""
        trace = replace(p.trace, session=p.match.session)
        ends = self.renderer.message_ends(trace, p.prompt)
        rendered = RenderedPrompt(p.prompt.ids, p.prompt.text, self.renderer.regions(trace, p.prompt, ends))
        block_size = self.engine.blocks.block_size
        analysis = classify(
            p.match.previous,
            p.prompt.ids,
            req.model,
            req.continues,
            gen.usage.cached_tokens,
            block_size,
            lambda i: rendered.region_at(i).kind,
            self.engine.tokenizer.decode,
            edited=p.match.previous is not None and p.match.previous.request_id in p.edited,
        )
        past = PastRequest(
            req.request_id,
            req.client.identity,
            p.match.session,
            req.model,
            len(p.prompt.ids),
            token_array(
                (p.prompt.ids + gen.token_ids)[:kv_tokens] if kv_tokens else p.prompt.ids + gen.token_ids[:-1]
            ),
        )
        with self.sessions_lock:
            self.sessions.remember(past)
        if kv_tokens is None and gen.token_ids:  # the reply as sampled: for the requests that carry it back
            req.sampled = self.kept.keep_answer(req, gen)
        timing = {
            "queue_s": waited_s + gen.timing.queue_s,  # for a thread, the engine thread, then a step
            "render_s": p.render_s,
            "tokenize_s": p.tokenize_s,
            "lookup_s": gen.timing.lookup_s,
            "prefill_s": gen.timing.prefill_s,
            "ttft_s": gen.timing.ttft_s,
            "server_ttft_s": first_token - req.submitted_clock if first_token is not None else None,
            "decode_s": gen.timing.decode_s,
            "decode_tokens_per_s": gen.timing.decode_tokens_per_s,
        }
        report = build_report(
            req, p.match, gen, analysis, rendered, self.engine.tokenizer, block_size, timing, p.cache_scope
        ) | {"aborted": kv_tokens is not None}
        if self.replies is not None:
            report["scripted_reply"] = self.replies.name  # the model's sampling did not choose the tokens
        self.page.add(page_entry(req, report, rendered))
        if kv_tokens is None:
            self.metrics.first_token(
                timing["server_ttft_s"], gen.usage.prompt_tokens, gen.usage.completion_tokens
            )
        full_text = self.engine.tokenizer.decode(gen.token_ids, skip_special_tokens=True)
        return Finished(gen, report, full_text)


def encoder_key(req: ChatRequest) -> str:
    """Whose incremental-tokenizer memory a request uses: its client's, per named session (a client's
    unnamed requests share one)."""
    return f"{req.client.identity}\0{req.client.session or ''}"
