"""The delivery log of "where a fact sits": near-identical JSON records, `facts` of them asked about.

Records look like `{"order":"A-6305","flavor":"mango","tubs":12,"at":"09:41"}`, one per line, in time
order. The asked records (the facts) sit together as one block among filler records of the same shape, at a
chosen fraction of the log measured in the model's own tokens: the block starts at the line boundary
closest to fraction × (log tokens − block tokens), so `top` puts it first and `end` puts it last.
Invariants: order ids are unique in a log; the facts' tub counts differ from each other; the log never
holds more tokens than asked (fillers are added while the log stays within `length`).
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

POSITIONS = {"top": 0.0, "quarter": 0.25, "middle": 0.5, "three-quarters": 0.75, "end": 1.0}
FLAVORS = (
    "mango vanilla chocolate pistachio lemon hazelnut strawberry coconut raspberry caramel mint stracciatella"
).split()
TUBS = (1, 48)  # tub counts are drawn from this range, fillers and facts alike
MAX_FACTS = TUBS[1] - TUBS[0] + 1  # the asked records' tub counts are distinct
ORDERS = (1000, 9999)  # order numbers, distinct within a log
FIRST_MINUTE = 6 * 60  # the log starts at 06:00 and runs one or two minutes per record (wrapping at 24:00)

Count = Callable[[str], int]  # text -> tokens of the model's tokenizer


@dataclass(frozen=True)
class Record:
    order: str
    flavor: str
    tubs: int
    at: str = ""

    def line(self) -> str:
        return json.dumps(
            {"order": self.order, "flavor": self.flavor, "tubs": self.tubs, "at": self.at},
            separators=(",", ":"),
        )


@dataclass(frozen=True)
class DeliveryLog:
    records: list[Record]  # in log order
    facts: list[int]  # indices into `records` of the asked records, in log order
    position: str
    tokens: int  # tokens of `text`

    @property
    def text(self) -> str:
        return "\n".join(r.line() for r in self.records)

    def char_span(self, index: int) -> tuple[int, int]:
        """Characters of record `index`'s line in `text` (without its newline)."""
        start = sum(len(r.line()) + 1 for r in self.records[:index])
        return start, start + len(self.records[index].line())

    def holders(self, tubs: int) -> list[int]:
        """Indices of the records whose tub count is `tubs`."""
        return [i for i, r in enumerate(self.records) if r.tubs == tubs]


def _records(rng: random.Random, n: int, used: set[str]) -> list[Record]:
    out = []
    if len(used) + n > ORDERS[1] - ORDERS[0] + 1:
        raise ValueError(
            f"a log holds at most {ORDERS[1] - ORDERS[0] + 1:,} records (distinct order numbers)"
        )
    while len(out) < n:
        order = f"A-{rng.randint(*ORDERS)}"
        if order in used:
            continue
        used.add(order)
        out.append(Record(order, rng.choice(FLAVORS), rng.randint(*TUBS)))
    return out


def _timed(records: Sequence[Record]) -> list[Record]:
    """The records stamped with times of day by their place in the log, one or two minutes apart."""
    out = []
    for i, r in enumerate(records):
        minute = FIRST_MINUTE + (3 * i) // 2
        out.append(Record(r.order, r.flavor, r.tubs, f"{minute // 60 % 24:02d}:{minute % 60:02d}"))
    return out


def build_log(count: Count, length: int, position: str, facts: int, seed: int) -> DeliveryLog:
    """A log of at most `length` tokens (as close as whole records allow) with `facts` asked records at
    `position` (a key of POSITIONS). Seeded by (seed, length, position): one cell's log is the same
    whatever other cells run."""
    if position not in POSITIONS:
        raise ValueError(f"unknown position {position!r}; choose from {', '.join(POSITIONS)}")
    if not 1 <= facts <= MAX_FACTS:
        raise ValueError(f"{facts} facts: between 1 and {MAX_FACTS} (their tub counts are distinct)")
    rng = random.Random(f"delivery-log {seed} {length} {position}")
    used: set[str] = set()
    asked: list[Record] = []
    while len(asked) < facts:  # distinct tub counts among the facts
        (r,) = _records(rng, 1, used)
        if all(r.tubs != a.tubs for a in asked):
            asked.append(r)
    pool: list[Record] = []

    def arrange(fillers: int) -> DeliveryLog:
        while len(pool) < fillers:
            pool.extend(_records(rng, 64, used))
        chosen = pool[:fillers]
        before = _fillers_before(count, asked, chosen, POSITIONS[position])
        records = _timed([*chosen[:before], *asked, *chosen[before:]])
        text = "\n".join(r.line() for r in records)
        return DeliveryLog(records, list(range(before, before + facts)), position, count(text))

    log = arrange(0)
    if log.tokens > length:
        raise ValueError(f"{facts} facts alone take {log.tokens} tokens, over the length {length}")
    per_line = max(1.0, (arrange(8).tokens - log.tokens) / 8)
    n = int((length - log.tokens) / per_line) + 1
    while n > 0 and (log := arrange(n)).tokens > length:  # whole records, never over `length`
        n -= 1
    while (longer := arrange(n + 1)).tokens <= length:
        n, log = n + 1, longer
    return log if n else arrange(0)


def _fillers_before(count: Count, asked: list[Record], fillers: list[Record], fraction: float) -> int:
    """How many fillers go before the fact block so that it starts nearest fraction × (free tokens). A
    line's tokens are counted with its newline (byte-level BPE splits before the next line's `{`)."""
    sizes = [count(r.line() + "\n") for r in fillers]
    block = sum(count(r.line() + "\n") for r in asked)
    target = fraction * sum(sizes)  # the free tokens are the fillers' (the block's size is fixed)
    offsets = list(itertools.accumulate(sizes, initial=0))  # token offset of each filler boundary
    k = bisect.bisect_left(offsets, target)
    if k == len(offsets) or (k > 0 and target - offsets[k - 1] <= offsets[k] - target):
        k -= 1
    assert block > 0
    return k
