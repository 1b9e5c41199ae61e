import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transform import matching_optimize_site
from klineage.transforms.merged_reductions import MergedReductions
from tests.transforms.roundtrip import assert_round_trips, simplify_all

T = MergedReductions()
ROW_ARGMAX = Path(__file__).resolve().parents[2] / "src/klineage/suites/heldout/row_argmax/naive.py"

HEAD = "import triton\nimport triton.language as tl\n\n\n"


def kernel(body: str, params: str = "x_ptr, out_ptr, TIE: tl.constexpr") -> str:
    return HEAD + f"@triton.jit\ndef k({params}):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


# The expert's merged forms: tie break implicit and explicit, axis positional, keep_dims first or last, a constexpr
# tie break, and a comment on the statement.
EXPERT = kernel("""
    x = tl.load(x_ptr + tl.arange(0, 16))
    m, i = tl.max(x, axis=0, return_indices=True)
    n, j = tl.max(x, 0, return_indices=True, return_indices_tie_break_left=False)
    # both at once
    p, q = tl.max(x, axis=0, keep_dims=True, return_indices=True, return_indices_tie_break_left=True)  # kept
    r, s = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=TIE, keep_dims=True)
    tl.store(out_ptr, m + n + tl.sum(p) + tl.sum(r) + i + j + tl.sum(q) + tl.sum(s))
""")

SIMPLE = kernel("""
    x = tl.load(x_ptr + tl.arange(0, 16))
    m = tl.max(x, axis=0)
    i = tl.argmax(x, axis=0)
    n = tl.max(x, 0)
    j = tl.argmax(x, 0, tie_break_left=False)
    # both at once
    p = tl.max(x, axis=0, keep_dims=True)  # kept
    q = tl.argmax(x, axis=0, keep_dims=True, tie_break_left=True)
    r = tl.max(x, axis=0, keep_dims=True)
    s = tl.argmax(x, axis=0, keep_dims=True, tie_break_left=TIE)
    tl.store(out_ptr, m + n + tl.sum(p) + tl.sum(r) + i + j + tl.sum(q) + tl.sum(s))
""")

ROW = kernel(
    """
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + tl.arange(0, BLOCK))
        tile_max = tl.max(x, axis=0)
        tile_index = start + tl.argmax(x, axis=0, tie_break_left=True)
        tl.store(out_ptr + row, tile_max + tile_index)
""",
    "x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr",
)

ROW_MERGED = ROW.replace(
    "tile_max = tl.max(x, axis=0)\n        tile_index = start + tl.argmax(x, axis=0, tie_break_left=True)",
    "tile_max, tile_max_at = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)\n"
    "        tile_index = start + tile_max_at",
)


def test_optimize_row_argmax_example():
    (site,) = T.optimize_sites(ROW)
    assert (site.function, site.line, site.index) == ("k", 10, 0)
    assert site.before == "tile_max = tl.max(x, axis=0)\ntile_index = start + tl.argmax(x, axis=0, tie_break_left=True)"
    assert site.after == (
        "tile_max, tile_max_at = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True)\n"
        "tile_index = start + tile_max_at"
    )
    out = T.optimize(ROW, site, {})
    assert out == ROW_MERGED != ROW
    ast.parse(out)
    assert T.optimize_sites(out) == []


def test_optimize_adjacent_index_takes_the_tuple():
    src = kernel("x = tl.load(x_ptr)\nv = tl.max(x, axis=1)\nidx = tl.argmax(x, axis=1)\ntl.store(out_ptr, v + idx)")
    (site,) = T.optimize_sites(src)
    assert site.after == "v, idx = tl.max(x, axis=1, return_indices=True, return_indices_tie_break_left=True)"
    assert "idx = tl.argmax" not in T.optimize(src, site, {})
    # the expert's parameters: the default tie break stays implicit
    out = T.optimize(src, site, {"tie_break": "default"})
    assert "    v, idx = tl.max(x, axis=1, return_indices=True)\n    tl.store" in out


def test_optimize_tie_break_false_is_carried_exactly():
    src = kernel("x = tl.load(x_ptr)\nv = tl.max(x, 0)\nw = v + 1\ny = 2 * tl.argmax(x, 0, False)")
    (site,) = T.optimize_sites(src)
    out = T.optimize(src, site, {"tie_break": "default"})
    assert "v, v_at = tl.max(x, 0, return_indices=True, return_indices_tie_break_left=False)" in out
    assert "w = v + 1\n    y = 2 * v_at\n" in out


def test_optimize_fresh_name_avoids_the_functions_names():
    src = ROW.replace("tl.store(out_ptr + row, tile_max + tile_index)", "tile_max_at = 1\n        tl.store(out_ptr, 0)")
    (site,) = T.optimize_sites(src)
    assert "tile_max, tile_max_at_1 = tl.max(" in T.optimize(src, site, {})


def test_optimize_expert_keyword_order():
    src = kernel("x = tl.load(x_ptr)\nv = tl.max(x, axis=0, keep_dims=True)\ni = tl.argmax(x, axis=0, keep_dims=True)")
    (site,) = T.optimize_sites(src)
    order = "axis,return_indices,return_indices_tie_break_left,keep_dims"
    out = T.optimize(src, site, {"tie_break": "explicit", "order": order})
    assert "v, i = tl.max(x, axis=0, return_indices=True, return_indices_tie_break_left=True, keep_dims=True)" in out
    # an order naming other keywords than this call has is ignored
    out = T.optimize(src, site, {"order": "axis,return_indices"})
    assert "v, i = tl.max(x, axis=0, keep_dims=True, return_indices=True, return_indices_tie_break_left=True)" in out


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    assert [s.params["tie_break"] for s in sites] == ["default", "explicit", "explicit", "explicit"]
    assert sites[2].params["order"] == "axis,keep_dims,return_indices,return_indices_tie_break_left"
    assert sites[0].before == "m, i = tl.max(x, axis=0, return_indices=True)"
    assert sites[0].after == "m = tl.max(x, axis=0)\ni = tl.argmax(x, axis=0)"
    assert simplify_all(T, EXPERT) == SIMPLE
    ast.parse(SIMPLE)


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert len(sites) == 4 and [s.line for s in sites] == [8, 10, 13, 15]
    assert all(s.function == "k" for s in sites)


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 4


def test_round_trip_both_ways():
    # expert -> simple -> expert, for each site
    sites = assert_round_trips(T, EXPERT)
    # simple -> merged -> simple, where the index has a statement of its own next to the max (the tie break
    # written where the argmax wrote one)
    for site in T.optimize_sites(SIMPLE):
        tie_break = "explicit" if "tie_break_left" in site.before else "default"
        merged = T.optimize(SIMPLE, site, {"tie_break": tie_break})
        (back,) = [s for s in T.sites(merged) if s.line == site.line]
        assert T.simplify(merged, back) == SIMPLE
    # the row example: the fresh index name stays, as a statement of its own
    merged = T.optimize(ROW, T.optimize_sites(ROW)[0], {})
    (site,) = T.sites(merged)
    simple = T.simplify(merged, site)
    assert "tile_max = tl.max(x, axis=0)\n        tile_max_at = tl.argmax(x, axis=0, tie_break_left=True)\n" in simple
    match = matching_optimize_site(T, simple, site)
    assert match is not None and T.optimize(simple, match, site.params) == merged
    assert len(sites) == 4


def test_round_trip_row_argmax_suite_program():
    source = ROW_ARGMAX.read_text()
    (site,) = T.optimize_sites(source)
    merged = T.optimize(source, site, {})
    ast.parse(merged)
    assert len(assert_round_trips(T, merged)) == 1


@pytest.mark.parametrize(
    "body",
    [
        # x rebound between the calls
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\nx = x * 2\ni = tl.argmax(x, axis=0)",
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\nx += 1\ni = tl.argmax(x, axis=0)",
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\nfor x in range(3):\n    pass\ni = tl.argmax(x, axis=0)",
        "x = tl.load(x_ptr)\nx = tl.max(x, axis=0)\ni = tl.argmax(x, axis=0)",
        # the axes differ
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\ni = tl.argmax(x, axis=1)",
        "x = tl.load(x_ptr)\nv = tl.max(x, 1)\ni = tl.argmax(x, axis=0)",
        # different inputs
        "x = tl.load(x_ptr)\ny = x + 1\nv = tl.max(x, axis=0)\ni = tl.argmax(y, axis=0)",
        # different blocks
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\nif v > 0:\n    i = tl.argmax(x, axis=0)\n    tl.store(out_ptr, i)",
        "x = tl.load(x_ptr)\nif TIE:\n    v = tl.max(x, axis=0)\ni = tl.argmax(x, axis=0)",
        "x = tl.load(x_ptr)\nif TIE:\n    v = tl.max(x, axis=0)\nelse:\n    i = tl.argmax(x, axis=0)",
        # no max, or no argmax
        "x = tl.load(x_ptr)\ni = tl.argmax(x, axis=0)",
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\ntl.store(out_ptr, v)",
        # the argmax first (not merged)
        "x = tl.load(x_ptr)\ni = tl.argmax(x, axis=0)\nv = tl.max(x, axis=0)",
        # other keywords on one call only, or unknown ones, or no axis
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0, keep_dims=True)\ni = tl.argmax(x, axis=0)",
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\ni = tl.argmax(x, axis=0, keep_dims=True)",
        "x = tl.load(x_ptr)\nv = tl.max(x)\ni = tl.argmax(x, axis=0)",
        # an input that is not a name, a method call, an expression as the tie break
        "x = tl.load(x_ptr)\nv = tl.max(x + 1, axis=0)\ni = tl.argmax(x + 1, axis=0)",
        "x = tl.load(x_ptr)\nv = x.max(axis=0)\ni = x.argmax(axis=0)",
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\ni = tl.argmax(x, axis=0, tie_break_left=not TIE)",
        # the tie break's name rebound between
        "x = tl.load(x_ptr)\nv = tl.max(x, axis=0)\nt = TIE\nt = False\ni = tl.argmax(x, axis=0, tie_break_left=t)",
    ],
)
def test_no_optimize_site(body):
    assert T.optimize_sites(kernel(body)) == []


def test_no_site_outside_kernels_or_in_odd_code():
    host = HEAD + "def host(x):\n    v = tl.max(x, axis=0)\n    i = tl.argmax(x, axis=0)\n    return v, i\n"
    assert T.optimize_sites(host) == []
    assert T.sites(host.replace("v = tl.max(x, axis=0)", "v, i = tl.max(x, axis=0, return_indices=True)")) == []
    assert T.sites("def broken(:\n") == [] and T.optimize_sites("def broken(:\n") == []


def test_the_nearest_max_takes_the_argmax():
    src = kernel("x = tl.load(x_ptr)\nu = tl.max(x, axis=0)\nv = tl.max(x, axis=0)\ni = tl.argmax(x, axis=0)")
    (site,) = T.optimize_sites(src)
    assert site.before.startswith("v = tl.max")


@pytest.mark.parametrize(
    "stmt",
    [
        "x, i = tl.max(x, axis=0, return_indices=True)",  # the split max would rebind the argmax's input
        "v, v = tl.max(x, axis=0, return_indices=True)",
        "(v, i) = tl.max(x, axis=0, return_indices=True)",  # a layout the round trip does not write back
        "v, i = tl.max(x, 0, True)",
        "v, i = tl.max(x, axis=0, return_indices=False)",
        "v = tl.max(x, axis=0)",
        "v, i = tl.min(x, axis=0, return_indices=True)",
    ],
)
def test_no_simplify_site(stmt):
    assert T.sites(kernel(f"x = tl.load(x_ptr)\n{stmt}")) == []
