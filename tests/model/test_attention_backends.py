"""The attention backends over the paged pool: every mix of spans (cold prefills, prefills after a cached
prefix, decode rows, unequal lengths, scattered block tables) equals causal attention over each sequence's
contiguous keys, with a fixed number of kernel calls per layer whatever the batch size; and `select` picks
by device and installation, saying why."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.bias import CausalBias
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from engine.errors import DeviceError
from engine.kv.pool import KVCache
from engine.kv.slots import slots_of
from engine.kv.step import SeqSpan
from engine.model import attention
from engine.model.attention import run_reads, sdpa
from engine.model.attention.torch_sdpa import TorchBackend
from engine.model.config import ModelConfig

BS, H, KVH, D, LAYERS = 4, 4, 2, 8, 2
CASES = {
    "cold prefill": [(0, 7)],
    "two cold prefills of unequal length": [(0, 5), (0, 9)],
    "prefill after a cached prefix": [(8, 5)],
    "prefill after a short cached prefix (padded)": [(4, 9)],
    "decode rows of unequal contexts": [(5, 1), (13, 1), (2, 1)],
    "decode rows beside a prefill after a prefix and a cold one": [(9, 1), (4, 6), (0, 3), (17, 1)],
    "equal chunks after equal prefixes": [(8, 4), (8, 4)],
}


def pool(blocks: int = 256, dtype: torch.dtype = torch.float32) -> KVCache:
    cfg = ModelConfig.__new__(ModelConfig)
    object.__setattr__(cfg, "num_layers", LAYERS)
    object.__setattr__(cfg, "num_kv_heads", KVH)
    object.__setattr__(cfg, "head_dim", D)
    kv = KVCache(cfg, blocks, BS, dtype, torch.device("cpu"))
    kv.k.fill_(float("nan"))  # a slot no sequence wrote must never reach an output
    kv.v.fill_(float("nan"))
    return kv


def step(shape: list[tuple[int, int]], seed: int = 0, consecutive: bool = False):
    """Spans over scattered block tables (or consecutive ones) with their context K/V in the pool, and the
    step's q, k, v rows."""
    g = torch.Generator().manual_seed(seed)
    order = list(range(255, -1, -1)) if consecutive else torch.randperm(256, generator=g).tolist()
    kv, free, spans, full = pool(), order, [], []
    for start, length in shape:
        table = [free.pop() for _ in range(-(-(start + length) // BS))]
        spans.append(SeqSpan(start, length, table))
        keys = [torch.randn(start + length, KVH, D, generator=g) for _ in range(2 * LAYERS)]
        full.append(keys)
        slots = torch.tensor(slots_of(table, 0, start, BS), dtype=torch.long)
        for layer in range(LAYERS):
            kv.write(layer, slots, keys[2 * layer][:start], keys[2 * layer + 1][:start])
    total = sum(n for _, n in shape)
    q = torch.randn(LAYERS, total, H, D, generator=g)
    return kv, spans, q, full


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """Causal attention of q at positions start.. over contiguous k, v `[start + T, kv_heads, head_dim]`."""
    t = q.shape[0]
    visible = torch.arange(start + t)[None, :] <= torch.arange(t)[:, None] + start
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1)[None],
        k.transpose(0, 1)[None],
        v.transpose(0, 1)[None],
        attn_mask=visible,
        enable_gqa=True,
    )
    return out[0].transpose(0, 1)


@pytest.mark.parametrize(
    "split, native",
    [(True, True), (False, True), (False, False)],
    ids=["split", "masked", "masked, folded heads"],
)
@pytest.mark.parametrize("consecutive", [False, True], ids=["scattered blocks", "consecutive blocks"])
@pytest.mark.parametrize("case", CASES)
def test_the_torch_backend_equals_causal_attention_per_sequence(
    case: str, split: bool, native: bool, consecutive: bool
) -> None:
    """The CPU's arrangement, and the one off the CPU (one masked call, query heads folded into rows for the
    fused kernels that want one KV head per query head), run here on CPU; one sequence in consecutive blocks
    is read in place, anything else gathered."""
    kv, spans, q, full = step(CASES[case], consecutive=consecutive)
    backend = TorchBackend(torch.device("cpu"))
    backend.split, backend.native_gqa = split, native
    plan = backend.plan(spans, kv)
    for layer in range(LAYERS):
        new = [
            (keys[2 * layer][s.start :], keys[2 * layer + 1][s.start :])
            for s, keys in zip(spans, full, strict=True)
        ]
        for s, (k, v) in zip(
            spans, new, strict=True
        ):  # the model writes the step's K/V before attention reads
            kv.write(layer, torch.tensor(slots_of(s.block_table, s.start, s.start + s.length, BS)), k, v)
        k_rows, v_rows = torch.cat([k for k, _ in new]), torch.cat([v for _, v in new])
        out = plan.forward(layer, q[layer], k_rows, v_rows)
        if consecutive and (len(spans) == 1 or (split and all(s.length == 1 for s in spans))):
            assert plan.buffers is None  # read in place: one sequence, or CPU decode rows run by run
        row = 0
        for s, keys in zip(spans, full, strict=True):
            rows = slice(row, row + s.length)
            expected = reference(q[layer][rows], keys[2 * layer], keys[2 * layer + 1], s.start)
            torch.testing.assert_close(out[rows], expected, atol=1e-5, rtol=1e-5)
            row += s.length


def shared_prefix_rows():
    """Decode rows over a cached prefix in blocks 0-2 shared by two sequences that go on in blocks of their
    own (two runs each) and one sequence in a single run: the pool, spans, keys and values, and query rows."""
    g = torch.Generator().manual_seed(3)
    kv = pool()
    tables = [[0, 1, 2, 7], [0, 1, 2, 5, 6], [9, 10]]
    ends = [14, 19, 6]
    keys = [torch.randn(e, KVH, D, generator=g) for e in ends]
    values = [torch.randn(e, KVH, D, generator=g) for e in ends]
    keys[1][:12], values[1][:12] = keys[0][:12], values[0][:12]  # the shared prefix
    for table, e, k, v in zip(tables, ends, keys, values, strict=True):
        kv.write(0, torch.tensor(slots_of(table, 0, e, BS)), k, v)
    spans = [SeqSpan(e - 1, 1, t) for t, e in zip(tables, ends, strict=True)]
    return kv, spans, ends, keys, values, torch.randn(3, H, D, generator=g)


@pytest.fixture
def short_runs(monkeypatch: pytest.MonkeyPatch) -> int:
    """Runs of at least 8 tokens (two blocks) read in place, shorter ones gathered: the tests' pool holds
    128 bytes of K/V a token and layer, where a real model's runs are read in place from a few hundred
    tokens. Returns the tokens."""
    monkeypatch.setattr(run_reads, "IN_PLACE_BYTES", 8 * 2 * KVH * D * 4)
    return 8


def test_cpu_decode_rows_read_runs_of_blocks_in_place(short_runs: int) -> None:
    """Every row of the shared-prefix step equals causal attention over its keys; nothing is gathered (each
    row's runs are long, or one short one)."""
    kv, spans, ends, keys, values, q = shared_prefix_rows()
    plan = TorchBackend(torch.device("cpu")).plan(spans, kv)
    assert plan.mode == "runs" and [len(r) for r in plan.runs] == [2, 2, 1]
    out = plan.forward(0, q, q, q)
    assert plan.reads.gathered == 0 and plan.buffers is None
    for b in range(3):
        expected = reference(q[b : b + 1], keys[b], values[b], ends[b] - 1)
        torch.testing.assert_close(out[b : b + 1], expected, atol=1e-5, rtol=1e-5)


def test_cpu_decode_rows_equal_each_row_alone_bit_for_bit(short_runs: int) -> None:
    """A row read in place beside others is the row its sequence's own step computes (alone: its single run
    read in place as one call, or its runs merged the same way): batching decode rows changes no bit of
    their attention."""
    kv, spans, _, _, _, q = shared_prefix_rows()
    backend = TorchBackend(torch.device("cpu"))
    out = backend.plan(spans, kv).forward(0, q, q, q)
    for b, span in enumerate(spans):
        row = q[b : b + 1]
        assert torch.equal(out[b : b + 1], backend.plan([span], kv).forward(0, row, row, row))


# Decode rows over mixed tables (BS = 4; runs of 8 tokens or more read in place under `short_runs`): one run;
# a long run, two single blocks, a long partial tail; every block apart; a long run and one short partial one.
MIXED = {
    "one run": ([10, 11, 12, 13, 14, 15], 22),
    "long, short, short, long": ([20, 21, 22, 40, 50, 60, 61, 62], 30),
    "every block apart": ([70, 90, 30, 5], 15),
    "long and one short": ([100, 101, 110], 11),
}


def mixed_rows():
    """The MIXED rows' pool (their context written, every other slot NaN), spans, keys, values and queries."""
    g = torch.Generator().manual_seed(5)
    kv, spans, keys, values = pool(), [], [], []
    for table, end in MIXED.values():
        keys.append([torch.randn(end, KVH, D, generator=g) for _ in range(LAYERS)])
        values.append([torch.randn(end, KVH, D, generator=g) for _ in range(LAYERS)])
        slots = torch.tensor(slots_of(table, 0, end, BS))
        for layer in range(LAYERS):
            kv.write(layer, slots, keys[-1][layer], values[-1][layer])
        spans.append(SeqSpan(end - 1, 1, table))
    return kv, spans, keys, values, torch.randn(LAYERS, len(spans), H, D, generator=g)


def assert_rows_exact_and_alone(backend, plan, kv, spans, keys, values, q, tol=1e-5) -> None:  # noqa: ANN001
    """Every decode row of `plan`, in every layer, equals causal attention over its keys (to `tol`), and bit
    for bit the row its sequence's own step computes."""
    for layer in range(LAYERS):
        out = plan.forward(layer, q[layer], q[layer], q[layer])
        for b, span in enumerate(spans):
            expected = reference(q[layer][b : b + 1], keys[b][layer], values[b][layer], span.start)
            torch.testing.assert_close(out[b : b + 1], expected, atol=tol, rtol=tol)
            row = q[layer][b : b + 1]
            assert torch.equal(out[b : b + 1], backend.plan([span], kv).forward(layer, row, row, row))


def test_cpu_decode_rows_gather_only_their_short_runs(short_runs: int) -> None:
    """A row of one or two runs reads them in place; of more, its long runs in place and its short ones, where
    it has two or more, gathered (one index a layer for the whole step, whole blocks: 2 of the second row, 4
    of the third): every row equals
    causal attention over its keys in every layer, alone and in the batch bit for bit, and no slot it does
    not hold (NaN) reaches it."""
    kv, spans, keys, values, q = mixed_rows()
    backend = TorchBackend(torch.device("cpu"))
    plan = backend.plan(spans, kv)
    assert plan.mode == "runs" and [len(r) for r in plan.runs] == [1, 4, 4, 2]
    assert plan.reads.gathered == (2 + 4) * BS
    assert [len(r) for r in plan.reads.reads] == [1, 3, 1, 2]  # the second row: two long runs, a segment
    assert_rows_exact_and_alone(backend, plan, kv, spans, keys, values, q)


# Decode rows (BS = 4; runs of 8 tokens or more are long under `short_runs`): four over one cached prefix in
# blocks 0-2, three going on in one block each (2 tokens) and one in two (7 tokens); two whose blocks all lie
# apart, 15 tokens each (one segment). In two orders: each call's rows consecutive, or not.
SHARING = [([20, 30, 40, 50], 15), ([0, 1, 2, 7], 14), ([0, 1, 2, 8], 14), ([0, 1, 2, 9], 14)]
SHARING += [([0, 1, 2, 10, 11], 19), ([60, 70, 80, 90], 15)]
ORDERS = {
    "consecutive": ([0, 1, 2, 3, 4, 5], [[[0, 5], [1, 2, 3, 4]], [[1, 2, 3], [4]]]),
    "interleaved": ([0, 1, 2, 5, 3, 4], [[[0, 3], [1, 2, 4, 5]], [[1, 2, 4], [5]]]),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("order", ORDERS)
def test_decode_rows_share_their_calls_and_stay_bitwise_alone(
    order: str, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows reading one run of the pool read it in one call (its view expanded over them); short reads of
    equal length are gathered into one call: 4 calls a layer where each row's own reads took 10, and every
    row equals causal attention over its keys and, bit for bit, the row its sequence's own step computes
    (in bfloat16 too, where the merge converts to float32 and back)."""
    monkeypatch.setattr(
        run_reads, "IN_PLACE_BYTES", 8 * 2 * KVH * D * dtype.itemsize
    )  # 8 tokens, as `short_runs`
    rows_order, calls = ORDERS[order]
    g = torch.Generator().manual_seed(7)
    kv, spans, keys, values = pool(dtype=dtype), [], [], []

    def randn(n: int) -> torch.Tensor:
        return torch.randn(n, KVH, D, generator=g).to(dtype)

    prefix = [(randn(12), randn(12)) for _ in range(LAYERS)]
    for table, end in (SHARING[i] for i in rows_order):
        rows = [(randn(end), randn(end)) for _ in range(LAYERS)]
        if table[0] == 0:
            rows = [
                (torch.cat((pk, k[12:])), torch.cat((pv, v[12:])))
                for (pk, pv), (k, v) in zip(prefix, rows, strict=True)
            ]
        for layer, (k, v) in enumerate(rows):
            kv.write(layer, torch.tensor(slots_of(table, 0, end, BS)), k, v)
        keys.append([k for k, _ in rows])
        values.append([v for _, v in rows])
        spans.append(SeqSpan(end - 1, 1, table))
    q = torch.randn(LAYERS, len(spans), H, D, generator=g).to(dtype)
    backend = TorchBackend(torch.device("cpu"))
    plan = backend.plan(spans, kv)
    assert [[c.rows for c in p.calls] for p in plan.reads.passes] == calls
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert_rows_exact_and_alone(backend, plan, kv, spans, keys, values, q, tol)


def test_a_row_of_short_runs_is_one_call_over_its_keys_in_order(short_runs: int) -> None:
    """A row whose blocks all lie apart is one call over its keys gathered in table order: bit for bit the
    call over the same keys made contiguous."""
    kv, spans, keys, values, q = mixed_rows()
    span, k, v = spans[2], keys[2][0], values[2][0]
    row = q[0][2:3]
    got = TorchBackend(torch.device("cpu")).plan([span], kv).forward(0, row, row, row)
    whole = sdpa.attend(row[:, :, None], k.transpose(0, 1)[None], v.transpose(0, 1)[None], None, False, True)
    assert torch.equal(got, whole[0].view(row.shape))


@pytest.mark.parametrize("batch", [1, 8, 32])
def test_calls_per_layer_by_batch(batch: int, monkeypatch) -> None:
    """Prefills after a prefix: the same number of kernel calls per layer at 1, 8 and 32 sequences. CPU
    decode rows over scattered blocks (each row's short runs gathered into one segment): one call per
    context length (seven of them), and one gather per layer (K and V) for all of them."""
    calls: list[int] = []
    fused = sdpa._flash_cpu
    monkeypatch.setattr(sdpa, "_flash_cpu", lambda *a, **k: calls.append(1) or fused(*a, **k))
    gathers: list[int] = []
    select = torch.index_select
    monkeypatch.setattr(torch, "index_select", lambda *a, **k: gathers.append(1) or select(*a, **k))
    decode, prefill = [(20 + i % 7, 1) for i in range(batch)], [(4, 3)] * batch
    for shape, per_layer in ((decode, min(batch, 7)), (prefill, 2)):
        kv, spans, q, full = step(shape)
        plan = TorchBackend(torch.device("cpu")).plan(spans, kv)
        calls.clear()
        gathers.clear()
        k = torch.randn(q.shape[1], KVH, D)
        for layer in range(LAYERS):
            plan.forward(layer, q[layer], k, k)
        assert len(calls) == per_layer * LAYERS
        if shape is decode:
            assert len(gathers) == 2 * LAYERS


def test_a_decode_step_gathers_into_one_buffer_per_step() -> None:
    """The gathered K/V of a step live in one buffer pair reused by every layer: the memory a step adds is one
    layer's gathered blocks, not the model's."""
    kv, spans, q, _ = step([(9, 1), (13, 1)])
    plan = TorchBackend(torch.device("cpu")).plan(spans, kv)
    k = torch.randn(2, KVH, D)
    plan.forward(0, q[0], k, k)
    first = [b.data_ptr() for b in plan.reads.buffers]
    plan.forward(1, q[1], k, k)
    assert [b.data_ptr() for b in plan.reads.buffers] == first
    assert plan.reads.buffers[0].shape == ((3 + 4) * BS, KVH, D)  # blocks of positions [0, 10) and [0, 14)


def test_select_picks_by_device_and_installation() -> None:
    cpu = torch.device("cpu")
    chosen = attention.select("auto", cpu, torch.float32, 16)
    assert chosen.name == "torch" and "torch SDPA" in chosen.description
    with pytest.raises(DeviceError, match="flashinfer runs on CUDA only"):
        attention.select("flashinfer", cpu, torch.bfloat16, 16)
    with pytest.raises(DeviceError, match="unknown attention backend 'paged'"):
        attention.select("paged", cpu, torch.float32, 16)
    assert attention.unusable("flash-attn", torch.device("cuda"), torch.bfloat16, 16) is not None


class Allocated(TorchDispatchMode):
    """The shapes of the tensors ops allocate while open (views excluded)."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            self.shapes += [tuple(t.shape) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        return out


def test_in_cudas_arrangement_the_mask_is_made_once_per_step() -> None:
    """Off the CPU the mask is folded for the query heads (b x group x width x keys, 1.9 GB a layer for a
    4,096-token chunk over 32k keys): the first layer makes it, the others reuse it. One sequence after a
    prefix needs none: lower-right causal."""
    kv, spans, q, _ = step([(9, 1), (4, 6), (0, 3)])
    backend = TorchBackend(torch.device("cpu"), arrangement="cuda")
    plan = backend.plan(spans, kv)
    k = torch.randn(q.shape[1], KVH, D)
    for layer in range(LAYERS):
        with Allocated() as allocated:
            plan.forward(layer, q[layer], k, k)
        assert plan.folded.shape == (3, 1, H // KVH * 6, 10)  # 3 sequences, 6 rows, keys [0, 10)
        made = [s for s in allocated.shapes if math.prod(s) == plan.folded.numel()]
        assert bool(made) == (layer == 0)
    kv, spans, _, _ = step([(8, 5)])
    assert isinstance(backend.plan(spans, kv).mask, CausalBias)
