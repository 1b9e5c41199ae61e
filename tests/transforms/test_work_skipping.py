import ast
import textwrap

from klineage.transform import matching_optimize_site
from klineage.transforms.work_skipping import WorkSkipping
from tests.transforms.roundtrip import installed_source

T = WorkSkipping()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def nll_kernel(x_ptr, y_ptr, loss_ptr, grad_ptr, n_cols, ignore_index, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        y = tl.load(y_ptr + row)
        cols = tl.arange(0, BLOCK)

        # Ignored rows: zero gradient and loss, nothing else to do.
        if y == ignore_index:
            tl.store(grad_ptr + row * n_cols + cols, 0.0, mask=cols < n_cols)
            tl.store(loss_ptr + row, 0.0)
            return
        x = tl.load(x_ptr + row * n_cols + y)
        tl.store(loss_ptr + row, -x)
        tl.store(grad_ptr + row * n_cols + cols, tl.where(cols == y, -1.0, 0.0), mask=cols < n_cols)


    @triton.jit
    def tail_kernel(x_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        if pid * BLOCK >= n:
            return
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 1.0, mask=offs < n)
""")

SIMPLE_NLL = EXPERT.replace(
    """    cols = tl.arange(0, BLOCK)

    # Ignored rows: zero gradient and loss, nothing else to do.
    if y == ignore_index:
        tl.store(grad_ptr + row * n_cols + cols, 0.0, mask=cols < n_cols)
        tl.store(loss_ptr + row, 0.0)
        return
""",
    "    cols = tl.arange(0, BLOCK)\n",
)

NO_EXIT = textwrap.dedent("""
    import triton
    import triton.language as tl


    def host(x):
        if x is None:
            return
        return x


    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        if n > 0:
            x = tl.load(x_ptr + offs)
            x = x + 1
            return
""")


def test_sites_and_params():
    sites = T.sites(EXPERT)
    assert [(s.function, s.params["kind"], s.params["index"]) for s in sites] == [
        ("nll_kernel", "writes", 3),
        ("tail_kernel", "pure", 1),
    ]
    assert sites[0].params["leading"] == ["", "# Ignored rows: zero gradient and loss, nothing else to do."]
    assert sites[1].params["exit"] == "if pid * BLOCK >= n:\n    return"


def test_simplify_removes_the_exit():
    simplified = T.simplify(EXPERT, T.sites(EXPERT)[0])
    assert simplified == SIMPLE_NLL and SIMPLE_NLL != EXPERT
    ast.parse(T.simplify(EXPERT, T.sites(EXPERT)[1]))


def test_optimize_inserts_the_exit():
    source = SIMPLE_NLL
    site = T.optimize_sites(source)[0]
    assert site.function == "nll_kernel"
    params = {
        "exit": "if y == ignore_index:\n    tl.store(loss_ptr + row, 0.0)\n    return",
        "index": 3,
        "leading": ["# skip"],
    }
    out = T.optimize(source, site, params)
    expected = "    # skip\n    if y == ignore_index:\n        tl.store(loss_ptr + row, 0.0)\n        return\n    x = "
    assert expected in out


def test_round_trip_fixture():
    for site in T.sites(EXPERT):
        simplified = T.simplify(EXPERT, site)
        opt = matching_optimize_site(T, simplified, site)
        assert T.optimize(simplified, opt, site.params) == EXPERT


def test_round_trip_liger_cross_entropy():
    source = installed_source("liger_kernel.ops.cross_entropy")
    sites = T.sites(source)
    assert [s.function for s in sites] == ["liger_cross_entropy_kernel"] and sites[0].params["kind"] == "writes"
    simplified = T.simplify(source, sites[0])
    assert "if y == ignore_index" not in simplified
    opt = matching_optimize_site(T, simplified, sites[0])
    assert T.optimize(simplified, opt, sites[0].params) == source


def test_no_sites_without_an_exit():
    assert T.sites(NO_EXIT) == []
    assert T.sites("def broken(:\n") == []
