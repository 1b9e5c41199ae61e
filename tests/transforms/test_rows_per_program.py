import ast
import textwrap

import pytest

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


# --- the twin written without an expert's dispatch (mechanical optimize) ---------------------------------------------

ROW_KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_row(x_ptr, w_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0)
        tl.store(y_ptr + row * n_cols + cols, x * w / tl.sum(x * x, axis=0), cols < n_cols)


    def scale(x, w):
        y = torch.empty_like(x)
        scale_row[(x.shape[0],)](x, w, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
""")


def _twin(source: str) -> str:
    (site,) = [s for s in T.optimize_sites(source) if s.params.get("kernel")]
    return T.optimize(source, site, {})


def test_the_twin_takes_a_block_of_rows_per_program():
    out = _twin(ROW_KERNEL)
    ast.parse(out)
    twin = out[out.index("def scale_row_rows(") : out.index("def scale(")]
    assert "n_cols, BLOCK: tl.constexpr, n_programs, BLOCK_ROW: tl.constexpr):" in twin
    assert "row = (tl.program_id(0) * BLOCK_ROW + tl.arange(0, BLOCK_ROW)[:, None]).to(tl.int64)" in twin
    assert "row_live = row < n_programs" in twin
    assert "cols = tl.arange(0, BLOCK)[None, :]" in twin
    # the row's loads and stores are masked to the live rows (the last block may run past the end) ...
    assert "tl.load(x_ptr + row * n_cols + cols, mask=(cols < n_cols) & row_live, other=0.0)" in twin
    assert "tl.sum(x * x, axis=1, keep_dims=True), (cols < n_cols) & row_live)" in twin
    # ... and the weight row, which no row id reaches, is loaded once per program as it was
    assert "w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0)" in twin
    host = out[out.index("def scale(") :]
    assert "    if triton.next_power_of_2(x.shape[1]) <= 256:\n" in host
    assert (
        'scale_row_rows[lambda META: (triton.cdiv(x.shape[0], META["BLOCK_ROW"]),)](x, w, y, x.shape[1], '
        "BLOCK=triton.next_power_of_2(x.shape[1]), n_programs=x.shape[0], BLOCK_ROW=16)"
    ) in host
    assert "    else:\n        scale_row[(x.shape[0],)](" in host


def test_the_twin_is_written_once_and_its_block_of_rows_is_tunable():
    from klineage import launch_config

    out = _twin(ROW_KERNEL)
    assert T.optimize_sites(out) == []  # the fallback launch is no site: no second twin, no expert dispatch on it
    (rows,) = [t for t in launch_config.tunables(out) if t.keyword == "BLOCK_ROW"]
    assert (rows.kernel, rows.value, rows.bound) == ("scale_row_rows", 16, "literal")
    retuned = launch_config.with_values(out, {rows.key: 32})
    assert "BLOCK_ROW=32)" in retuned and 'META["BLOCK_ROW"]' in retuned  # the grid reads the launch's value


def _kernel(
    body: str,
    signature: str = "x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr",
    grid: str = "(n_rows,)",
    launch: str = "BLOCK=128",
) -> str:
    return textwrap.dedent("""
        import triton
        import triton.language as tl


        @triton.jit
        def k(%s):
        %s


        def host(x, y, n_rows, n_cols):
            k[%s](x, y, n_cols, %s)
    """) % (signature, textwrap.indent(textwrap.dedent(body), "    "), grid, launch)


PLAIN = """
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(y_ptr + row * n_cols + cols, tl.load(x_ptr + row * n_cols + cols), cols < n_cols)
"""


def test_a_plain_row_kernel_is_a_site():
    assert [s.params for s in T.optimize_sites(_kernel(PLAIN))] == [{"kernel": "k", "count": "n_rows", "tile": "128"}]


@pytest.mark.parametrize(
    "source",
    [
        _kernel(PLAIN.replace("row = tl.program_id(0)", "row = tl.program_id(1)")),
        _kernel(PLAIN + "    tl.store(y_ptr + tl.program_id(0), 0.0)\n"),
        _kernel(PLAIN.replace("row = tl.program_id(0)", "row = tl.program_id(0) + tl.num_programs(0)")),
        _kernel(PLAIN + "    for i in range(0, n_cols, BLOCK):\n        pass\n"),
        _kernel(PLAIN + "    if n_cols > 0:\n        tl.store(y_ptr, 0.0)\n"),
        _kernel(PLAIN + "    return\n"),
        _kernel(PLAIN + "    tl.store(y_ptr + cols[:, None], 0.0)\n"),
        _kernel(PLAIN + "    tl.store(y_ptr + row, tl.sum(tl.load(x_ptr + cols), axis=1))\n"),
        _kernel(PLAIN + "    tl.store(y_ptr + row, tl.sum(tl.load(x_ptr + cols), axis=0, keep_dims=True))\n"),
        _kernel(PLAIN + "    tl.store(y_ptr + row, tl.cumsum(tl.load(x_ptr + cols), axis=0))\n"),
        _kernel(PLAIN + "    tl.store(y_ptr + row, helper(tl.load(x_ptr + cols)))\n"),
        _kernel(PLAIN + "    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n"),
        _kernel(PLAIN + "    tl.store(y_ptr + row, tl.softmax(tl.load(x_ptr + cols)))\n"),
        _kernel(PLAIN + "    row_live = 1\n"),
        _kernel(PLAIN, signature="x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr = 128"),
        _kernel(PLAIN, grid="(1,)"),
        _kernel(PLAIN, launch="128"),
        _kernel(PLAIN, launch="BLOCK=512"),
    ],
    ids=[
        "program_id(1)",
        "id read twice",
        "num_programs",
        "loop",
        "branch",
        "return",
        "2-D",
        "axis 1",
        "keep_dims",
        "scan",
        "helper call",
        "tile-shaped constant",
        "softmax",
        "name taken",
        "default",
        "fixed grid",
        "tile not by keyword",
        "tile wider than the cap",
    ],
)
def test_kernels_the_twin_cannot_take_are_no_sites(source):
    ast.parse(source)
    assert all(not s.params for s in T.optimize_sites(source))
