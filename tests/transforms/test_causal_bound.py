import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transforms.causal_bound import CausalBound
from tests.transforms.roundtrip import assert_round_trips, simplify_all

T = CausalBound()
ROOT = Path(__file__).resolve().parents[2]

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def split(x, n, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        q_start = tl.program_id(0) * BM
        offs_m = q_start + tl.arange(0, BM)
        if CAUSAL:
            hi = tl.minimum(q_start + BM, n)
        else:
            hi = n
        for start_n in range(0, hi, BN):
            cols = start_n + tl.arange(0, BN)
            keep = cols[None, :] < n
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            tl.store(x + cols, keep)

    @triton.jit
    def inline(x, n, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        pid = tl.program_id(0)
        rows = pid * BM + tl.arange(0, BM)
        for s in range(0, tl.minimum(n, pid * BM + BM) if CAUSAL else n, BN):
            offs = tl.arange(0, BN)
            cols = s + offs
            if CAUSAL:
                x = tl.where(cols[None, :] <= rows[:, None], x, 0.0)

    @triton.jit
    def always(x, n, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.arange(0, BM) + tl.program_id(0) * BM
        for s in tl.range(0, min(n, tl.program_id(0) * BM + BM), BN, num_stages=2):
            cols = s + tl.arange(0, BN)
            x = tl.where(rows[:, None] >= cols[None, :], x, 0.0)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def split(x, n, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        q_start = tl.program_id(0) * BM
        offs_m = q_start + tl.arange(0, BM)
        if CAUSAL:
            hi = n
        else:
            hi = n
        for start_n in range(0, hi, BN):
            cols = start_n + tl.arange(0, BN)
            keep = cols[None, :] < n
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None])
            tl.store(x + cols, keep)

    @triton.jit
    def inline(x, n, CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        pid = tl.program_id(0)
        rows = pid * BM + tl.arange(0, BM)
        for s in range(0, n, BN):
            offs = tl.arange(0, BN)
            cols = s + offs
            if CAUSAL:
                x = tl.where(cols[None, :] <= rows[:, None], x, 0.0)

    @triton.jit
    def always(x, n, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.arange(0, BM) + tl.program_id(0) * BM
        for s in tl.range(0, n, BN, num_stages=2):
            cols = s + tl.arange(0, BN)
            x = tl.where(rows[:, None] >= cols[None, :], x, 0.0)
""")

# No site: the mask in the other direction (keys after the query), a mask under a run-time test, a row tensor
# assigned twice, and a host function.
NOT_CAUSAL = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def anti(x, n, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        for s in range(0, n, BN):
            cols = s + tl.arange(0, BN)
            x = tl.where(cols[None, :] >= rows[:, None], x, 0.0)

    @triton.jit
    def runtime(x, n, flag, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        for s in range(0, n, BN):
            cols = s + tl.arange(0, BN)
            if flag > 0:
                x = tl.where(cols[None, :] <= rows[:, None], x, 0.0)

    @triton.jit
    def moved(x, n, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        rows = rows + 1
        for s in range(0, n, BN):
            cols = s + tl.arange(0, BN)
            x = tl.where(cols[None, :] <= rows[:, None], x, 0.0)

    def host(x, n, BM, BN):
        rows = BM + tl.arange(0, BM)
        for s in range(0, n, BN):
            cols = s + tl.arange(0, BN)
            x = cols[None, :] <= rows[:, None]
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    assert [(s.function, s.before, s.after, s.params) for s in sites] == [
        ("split", "tl.minimum(q_start + BM, n)", "n", {"order": "diagonal_first", "fn": "tl.minimum"}),
        (
            "inline",
            "tl.minimum(n, pid * BM + BM) if CAUSAL else n",
            "n",
            {"order": "end_first", "fn": "tl.minimum", "inline": True},
        ),
        ("always", "min(n, tl.program_id(0) * BM + BM)", "n", {"order": "end_first", "fn": "min"}),
    ]
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    # inside `if CAUSAL:` the cut is bare; at a bound outside the flag's branch it is written inline with the flag
    assert [(s.function, s.before, s.after) for s in sites] == [
        ("split", "n", "tl.minimum(n, q_start + BM)"),
        ("inline", "n", "tl.minimum(n, pid * BM + BM) if CAUSAL else n"),
        ("always", "n", "tl.minimum(n, tl.program_id(0) * BM + BM)"),
    ]
    out = T.optimize(SIMPLE, sites[1], {"order": "diagonal_first"})
    assert "for s in range(0, tl.minimum(pid * BM + BM, n) if CAUSAL else n, BN):" in out
    with pytest.raises(ValueError, match="unknown order"):
        T.optimize(SIMPLE, sites[0], {"order": "sideways"})


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 3


def test_round_trip_bundled_attention_expert():
    # the expert's masked stage stops at the diagonal block under CAUSAL; its mask-free stage has no causal mask
    sites = assert_round_trips(T, (ROOT / "src/klineage/examples/attention/expert.py").read_text())
    assert [(s.function, s.before, s.after) for s in sites] == [
        ("_attn_fwd", "tl.minimum(q_start + BLOCK_M, N_CTX)", "N_CTX")
    ]


def test_optimize_bundled_naive_attention():
    naive = (ROOT / "src/klineage/examples/attention/naive.py").read_text()
    (site,) = T.optimize_sites(naive)
    out = T.optimize(naive, site, {"order": "diagonal_first"})
    assert "range(0, tl.minimum(pid_m * BLOCK_M + BLOCK_M, seq_len) if CAUSAL else seq_len, BLOCK_N)" in out
    assert T.optimize_sites(out) == [] and len(T.sites(out)) == 1
    # the non-causal held-out attention has no causal mask: nothing to cut
    assert T.optimize_sites((ROOT / "src/klineage/suites/heldout/attention_d64/naive.py").read_text()) == []


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.sites(NOT_CAUSAL) == [] and T.optimize_sites(NOT_CAUSAL) == []
    assert T.sites("def broken(:\n") == []
