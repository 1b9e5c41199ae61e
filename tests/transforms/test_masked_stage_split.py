import ast
import textwrap
from pathlib import Path

from klineage.transforms.causal_bound import CausalBound
from klineage.transforms.masked_stage_split import MaskedStageSplit
from tests.transforms.roundtrip import assert_round_trips, simplify_all

T = MaskedStageSplit()
ROOT = Path(__file__).resolve().parents[2]

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        mid = n // BLOCK * BLOCK
        for start in range(0, mid, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols)
        for start in range(mid, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        tl.store(y_ptr, tl.sum(acc, axis=0))
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        mid = n // BLOCK * BLOCK
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        tl.store(y_ptr, tl.sum(acc, axis=0))
""")

# What optimize writes for SIMPLE's loop: its own split point (a fresh name beside the old `mid`) and the copy.
SPLIT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def rows(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        mid = n // BLOCK * BLOCK
        mid2 = n // BLOCK * BLOCK
        for start in range(0, mid2, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols)
        for start in range(mid2, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        tl.store(y_ptr, tl.sum(acc, axis=0))
""")

# Loops whose masks are not comparisons of the block's indices, or that are not read: no optimize site.
UNREAD = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def value_mask(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + cols, mask=cols < n, other=0.0)
            tl.store(y_ptr + cols, tl.where(x > 0, x, 0.0), mask=cols < n)

    @triton.jit
    def runtime_branch(x_ptr, y_ptr, n, flag, BLOCK: tl.constexpr):
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            if flag:
                tl.store(y_ptr + cols, tl.load(x_ptr + cols, mask=cols < n), mask=cols < n)

    @triton.jit
    def rebound(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            cols = cols + 1
            tl.store(y_ptr + cols, tl.load(x_ptr + cols, mask=cols < n), mask=cols < n)

    @triton.jit
    def offset_start(x_ptr, y_ptr, lo, n, BLOCK: tl.constexpr):
        for start in range(lo, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            tl.store(y_ptr + cols, tl.load(x_ptr + cols, mask=cols < n), mask=cols < n)
""")


def test_simplify_fixture():
    (site,) = T.sites(EXPERT)
    assert (site.function, site.before, site.after, site.params) == (
        "rows",
        "for start in range(mid, n, BLOCK):",
        "for start in range(0, n, BLOCK):",
        {"mid": "mid"},
    )
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    (site,) = T.optimize_sites(SIMPLE)
    assert (site.before, site.after) == ("for start in range(0, n, BLOCK):", "mid = n // BLOCK * BLOCK")
    assert T.optimize(SIMPLE, site, {"mid": "mid"}) == SPLIT
    assert T.optimize_sites(UNREAD) == []


def test_optimize_causal_masks_under_a_flag():
    naive = (ROOT / "src/klineage/examples/attention/naive.py").read_text()
    cut = CausalBound()
    naive = cut.optimize(naive, cut.optimize_sites(naive)[0], {"order": "diagonal_first"})
    (site,) = T.optimize_sites(naive)
    out = T.optimize(naive, site, {})
    ast.parse(out)
    # the least of the bounds check's and the causal mask's whole blocks, the causal one only when CAUSAL
    assert (
        "mid = tl.minimum(seq_len // BLOCK_N * BLOCK_N, (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N) if CAUSAL "
        "else seq_len // BLOCK_N * BLOCK_N"
    ) in out
    free, masked = out.split("for start_n in range(0, mid, BLOCK_N):")[1].split("for start_n in range(mid, ")
    assert "mask=" not in free and "tl.where" not in free and "keep" not in free and "col_ok" not in free
    assert "if CAUSAL:" not in free and "p = tl.exp(s - m_new[:, None])" in free
    assert "mask=col_ok[None, :]" in masked and 's = tl.where(keep, s, float("-inf"))' in masked
    assert T.optimize_sites(out) == []  # split once: neither loop is a site again


def test_round_trip_fixture():
    # optimize writes its own split point under a fresh name, so the round trip holds up to that name
    (site,) = T.sites(EXPERT)
    simplified = T.simplify(EXPERT, site)
    (match,) = T.optimize_sites(simplified)
    assert match.before == site.after
    redone = T.optimize(simplified, match, site.params)
    assert redone == SPLIT and simplify_all(T, redone).replace("mid2 = n // BLOCK * BLOCK\n    ", "") == SIMPLE
    assert assert_round_trips(T, SIMPLE) == []  # the simple form has no expert site


def test_simplify_bundled_attention_expert():
    # the expert's mask-free stage (TMA loads) goes; its masked stage then starts at 0 and covers every block.
    # Optimize does not rebuild the TMA stage: the expert's masked loop rebinds start_n and branches on EVEN
    expert = (ROOT / "src/klineage/examples/attention/expert.py").read_text()
    (site,) = T.sites(expert)
    assert site.function == "_attn_fwd" and site.before == "for start_n in tl.range(mid, hi, BLOCK_N, num_stages=2):"
    out = T.simplify(expert, site)
    assert "desc_k.load(" not in out and "for start_n in tl.range(0, hi, BLOCK_N, num_stages=2):" in out
    ast.parse(out)


def test_optimize_reads_through_a_hint_on_the_loop_index():
    # `start = tl.multiple_of(start, BLOCK)` (or `start = start`, what an undone hint leaves) is the same index
    for hint in ("tl.multiple_of(start, BLOCK)", "start"):
        line = "        cols = start + tl.arange(0, BLOCK)\n"
        source = SIMPLE.replace(line, f"        start = {hint}\n" + line)
        assert source != SIMPLE
        (site,) = T.optimize_sites(source)
        out = T.optimize(source, site, {})
        free = out.split("for start in range(0, mid2, BLOCK):")[1].split("for start in range(mid2, n, BLOCK):")[0]
        assert "mask=" not in free and "acc += tl.load(x_ptr + cols)" in free
