import ast
import textwrap

from klineage.transform import matching_optimize_site
from klineage.transforms.rows_per_program import RowsPerProgram
from tests.transforms.roundtrip import installed_source

T = RowsPerProgram()

HEAD = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def norm_row(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(y_ptr + row * n_cols + cols, x / tl.sum(x * x, axis=0), mask=cols < n_cols)


    @triton.jit
    def norm_rows(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr, BLOCK_ROW: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_ROW + tl.arange(0, BLOCK_ROW)
        cols = tl.arange(0, BLOCK)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        offs = rows[:, None] * n_cols + cols[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(y_ptr + offs, x / tl.sum(x * x, axis=1)[:, None], mask=mask)
""")

EXPERT = HEAD + textwrap.dedent("""

    def norm(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        # Narrow rows, many of them: 16 rows per program.
        if BLOCK > 256 or n_rows < 32768:
            norm_row[(n_rows,)](x, y, n_cols, BLOCK=BLOCK)
        else:
            BLOCK_ROW = 16
            norm_rows[(triton.cdiv(n_rows, BLOCK_ROW),)](x, y, n_rows, n_cols, BLOCK=BLOCK, BLOCK_ROW=BLOCK_ROW)
        return y
""")

SIMPLE = HEAD + textwrap.dedent("""

    def norm(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        # Narrow rows, many of them: 16 rows per program.
        norm_row[(n_rows,)](x, y, n_cols, BLOCK=BLOCK)
        return y
""")

NO_DISPATCH = HEAD + textwrap.dedent("""

    def norm(x, flag):
        y = torch.empty_like(x)
        if flag:
            norm_row[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
        else:
            norm_row[(x.shape[0],)](x, y, x.shape[1], BLOCK=2048)
        return y
""")


def test_sites_and_params():
    (site,) = T.sites(EXPERT)
    assert site.function == "norm" and site.params["one_row"] == "body"
    assert site.params["condition"] == "BLOCK > 256 or n_rows < 32768"
    assert site.params["leading"] == ["# Narrow rows, many of them: 16 rows per program."]
    assert site.params["rows_branch"].startswith("BLOCK_ROW = 16\nnorm_rows[")


def test_simplify_folds_the_dispatch():
    assert T.simplify(EXPERT, T.sites(EXPERT)[0]) == SIMPLE


def test_optimize_with_params():
    (site,) = T.sites(EXPERT)
    (opt,) = T.optimize_sites(SIMPLE)
    assert opt.before == site.after
    assert T.optimize(SIMPLE, opt, site.params) == EXPERT


def test_optimize_dispatch_in_else_branch():
    (site,) = T.sites(EXPERT)
    swapped = dict(site.params)
    swapped["dispatch"] = (
        "if not (BLOCK > 256 or n_rows < 32768):\n    BLOCK_ROW = 16\n"
        "    norm_rows[(triton.cdiv(n_rows, BLOCK_ROW),)](x, y, n_rows, n_cols, BLOCK=BLOCK, BLOCK_ROW=BLOCK_ROW)\n"
        "else:\n    norm_row[(n_rows,)](x, y, n_cols, BLOCK=BLOCK)"
    )
    out = T.optimize(SIMPLE, T.optimize_sites(SIMPLE)[0], swapped)
    assert "    else:\n        norm_row[(n_rows,)](x, y, n_cols, BLOCK=BLOCK)\n    return y" in out
    (again,) = T.sites(out)
    assert again.params["one_row"] == "orelse"


def test_round_trip_fixture():
    (site,) = T.sites(EXPERT)
    simplified = T.simplify(EXPERT, site)
    opt = matching_optimize_site(T, simplified, site)
    assert T.optimize(simplified, opt, site.params) == EXPERT


def test_round_trip_liger_rms_norm():
    source = installed_source("liger_kernel.ops.rms_norm")
    sites = T.sites(source)
    assert [s.function for s in sites] == ["rms_norm_forward"]
    simplified = T.simplify(source, sites[0])
    ast.parse(simplified)
    assert "_block_rms_norm_forward_kernel[" not in simplified
    opt = matching_optimize_site(T, simplified, sites[0])
    assert T.optimize(simplified, opt, sites[0].params) == source


def test_no_sites_without_a_rows_dispatch():
    assert T.sites(NO_DISPATCH) == [] and T.sites(SIMPLE) == []
    assert T.sites("def broken(:\n") == []
