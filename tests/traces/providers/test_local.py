"""The local rule drives the engine's BlockManager as a replay would: block-aligned, last token never served,
the reply's blocks published, LRU eviction at capacity; a request recorded with its engine steps served as that
engine served it (requests admitted in one step read none of each other's blocks)."""

from __future__ import annotations

from engine.kv.block_manager import BlockManager
from engine.traces.providers.base import RulePrompt
from engine.traces.providers.local import LocalRule
from engine.traces.request import ServedSteps


def rule(blocks: int = 64) -> LocalRule:
    return LocalRule(BlockManager(blocks, 16, b"test"))


def test_reuse_is_block_aligned_and_leaves_the_last_token() -> None:
    r, ids = rule(), list(range(100))
    assert r.serve(RulePrompt(ids, 0.0)).cached_tokens == 0
    assert r.serve(RulePrompt(ids, 1.0)).cached_tokens == 96  # (100 - 1) // 16 blocks
    assert r.serve(RulePrompt(ids[:97], 2.0)).cached_tokens == 96
    assert r.serve(RulePrompt(ids[:96], 3.0)).cached_tokens == 80  # the 96th token is the last: recomputed


def test_the_reply_is_cached_as_if_decoded() -> None:
    r, ids, reply = rule(), list(range(40)), [500 + i for i in range(30)]
    r.serve(RulePrompt(ids, 0.0, reply_ids=reply))
    follow = ids + reply + [9] * 20
    assert r.serve(RulePrompt(follow, 1.0)).cached_tokens == 64  # (40 + 29) // 16 blocks


def test_capacity_evicts_least_recently_used() -> None:
    r = rule(blocks=8)  # 128 tokens
    a, b = list(range(100)), list(range(1000, 1100))
    r.serve(RulePrompt(a, 0.0))
    r.serve(RulePrompt(b, 1.0))  # needs 7 blocks: evicts a's, deepest first (a prefix is released last)
    assert r.blocks.stats.evictions == 5
    assert r.serve(RulePrompt(a, 2.0)).cached_tokens == 16  # only a's first block survived


def test_a_request_over_the_context_is_refused_as_a_replay_refuses_it() -> None:
    """A replay checks prompt + 1 new token, then prompt + reply, against the context: nothing is served or
    stored for a request either check refuses."""
    r = LocalRule(BlockManager(64, 16, b"test"), context=100)
    ids = list(range(99))
    assert r.serve(RulePrompt(ids, 0.0)).why_none == ""  # 99 + 1 fits
    refused = r.serve(RulePrompt(ids, 1.0, reply_ids=[7, 8]))  # 99 + a 2-token reply does not
    assert (
        refused.cached_tokens == 0 and refused.why_none == "refused: needs 101 tokens, over the model's 100"
    )
    assert r.serve(RulePrompt(list(range(100)), 2.0)).why_none.startswith("refused: needs 101 tokens")
    assert r.serve(RulePrompt(ids, 3.0)).cached_tokens == 96  # the refused requests stored nothing new


def test_a_request_the_whole_cache_cannot_hold_is_refused_as_a_replay_refuses_it() -> None:
    """Its prompt and reply need more blocks than the pool has (a replay's engine refuses it): nothing served
    or stored, the analysis goes on (it stopped on the cache's error)."""
    r = LocalRule(BlockManager(4, 16, b"test"))  # 64 tokens
    assert r.serve(RulePrompt(list(range(60)), 0.0, reply_ids=[1, 2, 3, 4, 5])).why_none == ""  # 64 held
    refused = r.serve(RulePrompt(list(range(60)), 1.0, reply_ids=[1, 2, 3, 4, 5, 6]))
    assert (
        refused.cached_tokens == 0
        and refused.why_none == "refused: needs 65 tokens, over the local cache's 64"
    )
    assert r.serve(RulePrompt(list(range(60)), 2.0)).cached_tokens == 48  # what the first one stored


def test_requests_admitted_in_one_step_read_none_of_each_others_blocks() -> None:
    """Two requests sharing 64 tokens admitted in step 1 (their prompts published after it, a's reply after
    step 3) read nothing of each other; a third admitted in step 2 reads their prompts, not a's reply yet; a
    fourth admitted in step 4 reads the reply; one without steps first gets everything still due."""
    r, shared = rule(), list(range(64))
    a, b, reply = shared + [100] * 10, shared + [200] * 10, [300 + i for i in range(40)]

    def served(
        ids: list[int],
        admitted: int,
        published: tuple[tuple[int, int], ...],
        reply_ids: list[int] | None = None,
    ) -> int:
        steps = ServedSteps(1.0, admitted, published)
        return r.serve(RulePrompt(ids, 0.0, reply_ids=reply_ids or [], steps=steps)).cached_tokens

    assert served(a, 1, ((1, 64), (3, 96)), reply) == 0
    assert served(b, 1, ((1, 64),)) == 0  # sequentially served it would read a's 64
    assert served(a + reply[:30], 2, ()) == 64  # a's prompt blocks, published after step 1; its reply not yet
    assert served(a + reply[:30], 4, ()) == 96  # after step 3: a's prompt and reply through 96 tokens
    c = list(range(1000, 1040))
    assert served(c, 5, ((5, 32),)) == 0
    assert r.serve(RulePrompt(c + [1], 0.0)).cached_tokens == 32  # a request without steps: all due published
