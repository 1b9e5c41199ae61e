import ast
import textwrap

from klineage.transforms.whole_row_tile import FUSED_CAP, WholeRowTile, column_sweeps, one_tile_twin, reused
from tests.transforms.roundtrip import assert_round_trips

T = WholeRowTile()

LOOPED = textwrap.dedent("""
    @triton.jit
    def lse_looped(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        m = tl.full((BLOCK,), -float("inf"), dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            m = tl.maximum(m, tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")))
        row_max = tl.max(m, axis=0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        # the second sweep
        for start in tl.range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.exp(tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf")) - row_max)
        tl.store(y_ptr + row, row_max + tl.log(tl.sum(acc, axis=0)))
""")

HEAD = (
    textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def lse_one_tile(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
        row_max = tl.max(x, axis=0)
        tl.store(y_ptr + row, row_max + tl.log(tl.sum(tl.exp(x - row_max), axis=0)))

""")
    + LOOPED
)

EXPERT = HEAD + textwrap.dedent("""

    def lse(x):
        n_rows, n_cols = x.shape
        y = torch.empty(n_rows, device=x.device)
        BLOCK = triton.next_power_of_2(n_cols)
        # One tile when the row fits.
        if n_cols <= 32768:
            lse_one_tile[(n_rows,)](x, y, n_cols, BLOCK=BLOCK, num_warps=8)
        else:
            lse_looped[(n_rows,)](x, y, n_cols, BLOCK=4096)
        return y
""")

SIMPLE = HEAD + textwrap.dedent("""

    def lse(x):
        n_rows, n_cols = x.shape
        y = torch.empty(n_rows, device=x.device)
        BLOCK = triton.next_power_of_2(n_cols)
        # One tile when the row fits.
        lse_looped[(n_rows,)](x, y, n_cols, BLOCK=1024)
        return y
""")

NAIVE = (
    textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl

""")
    + LOOPED
    + textwrap.dedent("""

    def lse(x):
        x2 = x.contiguous()
        y = torch.empty(x2.shape[0], device=x.device)
        lse_looped[(x2.shape[0],)](x2, y, x2.shape[1], BLOCK=128)
        return y
""")
)


def test_sites_and_params():
    (site,) = T.sites(EXPERT)
    assert site.function == "lse"
    assert site.params["leading"] == ["# One tile when the row fits."]
    assert site.params["dispatch"].startswith("if n_cols <= 32768:\n")
    assert site.after == "# One tile when the row fits.\nlse_looped[(n_rows,)](x, y, n_cols, BLOCK=1024)"


def test_simplify_keeps_the_looped_kernel_with_a_fixed_tile():
    assert T.simplify(EXPERT, T.sites(EXPERT)[0]) == SIMPLE
    flipped = EXPERT.replace("if n_cols <= 32768:", "if n_cols > 32768:")
    flipped = (
        flipped.replace("lse_one_tile[(n_rows,)](x, y, n_cols, BLOCK=BLOCK, num_warps=8)", "@@")
        .replace(
            "lse_looped[(n_rows,)](x, y, n_cols, BLOCK=4096)", "lse_one_tile[(n_rows,)](x, y, n_cols, BLOCK=BLOCK)"
        )
        .replace("@@", "lse_looped[(n_rows,)](x, y, n_cols, BLOCK=4096)")
    )
    (site,) = T.sites(flipped)  # either order
    assert "\n    lse_looped[(n_rows,)](x, y, n_cols, BLOCK=1024)\n" in T.simplify(flipped, site)


def test_not_sites():
    # both kernels sweep: not a one-tile dispatch
    both = EXPERT.replace("lse_one_tile[(n_rows,)]", "lse_looped[(n_rows,)]")
    assert T.sites(both) == []
    # a branch with more than its launch
    extra = EXPERT.replace(
        "        lse_looped[(n_rows,)](x, y, n_cols, BLOCK=4096)\n",
        "        lse_looped[(n_rows,)](x, y, n_cols, BLOCK=4096)\n        wide = True\n",
    )
    assert extra != EXPERT
    assert T.sites(extra) == []
    # different grids
    assert T.sites(EXPERT.replace("lse_looped[(n_rows,)]", "lse_looped[(n_rows, 1)]")) == []


def test_round_trip():
    # in the expert's own program its dispatch comes back: its one-tile kernel, no generated twin
    sites = assert_round_trips(T, EXPERT)
    assert len(sites) == 1
    assert "lse_looped_one_tile" not in T.optimize(SIMPLE, T.optimize_sites(SIMPLE)[0], sites[0].params)


def test_optimize_writes_a_twin_and_a_dispatch():
    (site,) = T.optimize_sites(NAIVE)
    assert site.params == {"kernel": "lse_looped", "tile": "BLOCK", "width": "x2.shape[1]"}
    out = T.optimize(NAIVE, site, {})  # the cap defaults to FUSED_CAP
    ast.parse(out)
    assert f"    if x2.shape[1] <= {FUSED_CAP}:\n" in out
    assert "        row_tile = triton.next_power_of_2(x2.shape[1])\n" in out
    assert "lse_looped_one_tile[(x2.shape[0],)](x2, y, x2.shape[1], BLOCK=row_tile, num_warps=row_warps)" in out
    assert "    else:\n        lse_looped[(x2.shape[0],)](x2, y, x2.shape[1], BLOCK=128)\n" in out
    twin = out[out.index("def lse_looped_one_tile") : out.index("def lse(")]
    assert "for " not in twin and twin.count("    start = 0\n") == 1 and twin.count("cols = start") == 1
    # the second sweep's `start = 0` and `cols = ...` hold what the first bound: dropped, their comment kept
    assert "    # the second sweep\n    acc += tl.exp(" in twin
    assert out.index("def lse_looped(") < out.index("def lse_looped_one_tile(") < out.index("def lse(")
    assert T.optimize_sites(out) == []  # applied: the looped launch is now the fallback
    small = T.optimize(NAIVE, site, {"cap": "4096"})
    assert "    if x2.shape[1] <= 4096:\n" in small


def test_column_sweeps_only_in_row_kernels():
    import libcst as cst

    def kernel(code):
        return cst.parse_module(textwrap.dedent(code)).body[0]

    assert column_sweeps(kernel(LOOPED))[1:] == ("n_cols", "BLOCK")
    gemm = """
        @triton.jit
        def mm(a, b, c, K, BLOCK_K: tl.constexpr):
            acc = tl.zeros((16, 16), dtype=tl.float32)
            for k in range(0, K, BLOCK_K):
                acc += tl.dot(tl.load(a + k), tl.load(b + k))
            tl.store(c, acc)
    """
    nested = """
        @triton.jit
        def f(x, n, R, BLOCK: tl.constexpr):
            for r in range(R):
                for start in range(0, n, BLOCK):
                    tl.store(x + start + tl.arange(0, BLOCK), 0.0)
    """
    early = """
        @triton.jit
        def f(x, n, BLOCK: tl.constexpr):
            for start in range(0, n, BLOCK):
                if start > 4:
                    break
    """
    offset = """
        @triton.jit
        def f(x, n, BLOCK: tl.constexpr):
            for start in range(BLOCK, n, BLOCK):
                tl.store(x + start + tl.arange(0, BLOCK), 0.0)
    """
    runtime_step = """
        @triton.jit
        def f(x, n, step):
            for start in range(0, n, step):
                tl.store(x + start, 0.0)
    """
    two_widths = """
        @triton.jit
        def f(x, n, m, BLOCK: tl.constexpr):
            for start in range(0, n, BLOCK):
                tl.store(x + start + tl.arange(0, BLOCK), 0.0)
            for start in range(0, m, BLOCK):
                tl.store(x + start + tl.arange(0, BLOCK), 1.0)
    """
    for code in (gemm, nested, early, offset, runtime_step, two_widths):
        assert column_sweeps(kernel(code)) is None, code


def test_twin_runs_each_sweep_once():
    import libcst as cst

    twin = one_tile_twin(cst.parse_module(LOOPED).body[0])
    code = cst.Module([]).code_for_node(twin)
    assert "def lse_looped_one_tile(" in code and "for " not in code
    assert "# One tile covers the row" in code


def test_a_one_program_launch_is_not_a_site():
    """A final sum of partials in one program: its width grows with the input (MSE's twin ran at x1.000, run 11)."""
    from klineage.suites import SUITES

    mse = (SUITES["heldout"] / "mse_loss" / "naive.py").read_text()
    assert T.optimize_sites(mse) == []
    assert len(T.optimize_sites(mse.replace("mean_of_partials_kernel[(1,)]", "mean_of_partials_kernel[(4,)]"))) == 1
    kl = (SUITES["heldout"] / "kl_div" / "naive.py").read_text()
    assert [s.params["kernel"] for s in T.optimize_sites(kl)] == ["kl_rows_kernel"]


def test_launch_without_a_keyword_tile_is_not_a_site():
    positional = NAIVE.replace("x2.shape[1], BLOCK=128)", "x2.shape[1], 128)")
    assert T.optimize_sites(positional) == []
    called_width = NAIVE.replace("x2, y, x2.shape[1], BLOCK=128", "x2, y, int(x2.shape[1]), BLOCK=128")
    assert T.optimize_sites(called_width) == []


def _body(code):
    import libcst as cst

    return list(cst.parse_module(textwrap.dedent(code)).body)


def _code(statements):
    import libcst as cst

    return cst.Module(body=statements).code


SWEEPS = """
    x = tl.load(x_ptr + cols, mask=mask, other=0.0)
    tl.store(h_ptr + cols, x + 1.0, mask=mask)
    acc += x
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    x = tl.load(x_ptr + cols, mask=mask, other=0.0)
    acc += x
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
"""


def test_reused_keeps_a_value_only_while_nothing_could_change_it():
    # a store through a buffer another argument might alias: the load is repeated
    assert _code(reused(_body(SWEEPS))).count("tl.load") == 2
    # the store goes to a buffer the host allocated for that argument alone: the first load is kept
    kept = _code(reused(_body(SWEEPS), frozenset({"h_ptr"})))
    assert kept.count("tl.load") == 1
    # acc was accumulated into between its two zeroings: both stay
    assert kept.count("acc = tl.zeros") == 2
    # a rebound input: `cols` moved, so x is loaded again
    moved = SWEEPS.replace("    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n    x =", "    cols = cols + 1\n    x =")
    assert _code(reused(_body(moved), frozenset({"h_ptr"}))).count("tl.load") == 2
    # writes and volatile loads are never dropped, even when repeated word for word
    atomics = (
        "old = tl.atomic_add(p, 1)\nold = tl.atomic_add(p, 1)\nv = tl.load(p, volatile=True)\n"
        "v = tl.load(p, volatile=True)\n"
    )
    assert _code(reused(_body(atomics))) == atomics


def test_a_residual_store_between_sweeps_keeps_the_loads_only_for_a_buffer_of_its_own():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "src" / "klineage" / "suites" / "heldout" / "residual_layernorm"
    source = (root / "naive.py").read_text()
    (site,) = T.optimize_sites(source)
    out = T.optimize(source, site, {})
    twin = out[out.index("def add_layernorm_kernel_one_tile") : out.index("class ModelNew")]
    assert twin.count("tl.load(x_ptr") == 1 and twin.count("tl.load(r_ptr") == 1  # h is torch.empty_like(x)
    # the caller passes one of its inputs as h: a store through h may change x, so the twin loads x again after
    # it (the third sweep still reuses the second's load: no store between them)
    aliased = source.replace("h = torch.empty_like(x)", "h = r")
    out = T.optimize(aliased, T.optimize_sites(aliased)[0], {})
    twin = out[out.index("def add_layernorm_kernel_one_tile") : out.index("class ModelNew")]
    assert twin.count("tl.load(x_ptr") == 2


def test_one_load_writes_a_repeated_load_with_another_fill_as_the_first_one_masked():
    from klineage.transforms.whole_row_tile import one_load

    code = """
    mask = cols < n
    a = tl.load(p + cols, mask=cols < n, other=-float("inf"))
    b = tl.load(p + cols, mask=mask, other=0.0)
    c = tl.load(p + cols, mask=mask, other=-float("inf"))
    d = tl.load(q + cols, mask=mask, other=0.0)
    e = tl.load(p + cols)
    """
    out = _code(one_load(_body(code)))
    # the mask named `mask` is the same `cols < n`: the second load becomes the first, its masked lanes refilled
    assert 'b = tl.where(mask, tl.load(p + cols, mask=cols < n, other=-float("inf")), 0.0)\n' in out
    assert 'c = tl.load(p + cols, mask=mask, other=-float("inf"))\n' in out  # the same load already
    assert "d = tl.load(q + cols, mask=mask, other=0.0)\n" in out and "e = tl.load(p + cols)\n" in out
    for barrier in (
        "tl.store(p + cols, a, mask=mask)",
        "cols = cols + 1",
        "mask = cols < m",
        "old = tl.atomic_add(p, 1.0)",
    ):
        code_ = code.replace("    b =", f"    {barrier}\n    b =")
        # b is loaded afresh (and c, after it, refills b's load: nothing lies between them)
        assert "b = tl.load(p + cols, mask=mask, other=0.0)\n" in _code(one_load(_body(code_))), barrier
