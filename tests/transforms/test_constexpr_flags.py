import textwrap

import pytest

from klineage.transforms.constexpr_flags import ConstexprFlags
from tests.transforms.roundtrip import installed_source, round_trip

EXPERT = textwrap.dedent(
    """\
    import triton
    import triton.language as tl


    @triton.jit
    def k(x_ptr, b_ptr, y_ptr, n, HAS_BIAS: tl.constexpr, SKIP: tl.constexpr = False, BLOCK: tl.constexpr = 128):
        offs = tl.arange(0, BLOCK)
        y = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        if HAS_BIAS:
            b = tl.load(b_ptr + offs, mask=offs < n, other=0.0)
            y += b
        if not SKIP:
            tl.store(y_ptr + offs, y, mask=offs < n)
    """
)
SIMPLE_0 = EXPERT.replace("HAS_BIAS: tl.constexpr,", "HAS_BIAS,")
SIMPLE_1 = EXPERT.replace("SKIP: tl.constexpr = False", "SKIP = False")


def test_simplify_fixture():
    t = ConstexprFlags()
    sites = t.sites(EXPERT)  # BLOCK shapes tl.arange: not a flag
    assert [(s.function, s.before, s.after) for s in sites] == [
        ("k", "HAS_BIAS: tl.constexpr", "HAS_BIAS"),
        ("k", "SKIP: tl.constexpr = False", "SKIP = False"),
    ]
    assert sites[0].params == {"annotation": "tl.constexpr"}
    assert t.simplify(EXPERT, sites[0]) == SIMPLE_0
    assert t.simplify(EXPERT, sites[1]) == SIMPLE_1


def test_optimize_fixture():
    t = ConstexprFlags()
    (site,) = t.optimize_sites(SIMPLE_0)
    assert site.before == "HAS_BIAS" and site.after == "HAS_BIAS: tl.constexpr"
    assert t.optimize(SIMPLE_0, site, {"annotation": "tl.constexpr"}) == EXPERT
    assert t.optimize(SIMPLE_0, site, {}) == EXPERT


def test_round_trip_fixture():
    assert round_trip(ConstexprFlags(), EXPERT) == 2


@pytest.mark.parametrize("module", ["dyt", "cross_entropy", "rope"])
def test_round_trip_liger(module):
    src = installed_source(f"liger_kernel.ops.{module}")
    assert round_trip(ConstexprFlags(), src) >= 1


def test_skips_flags_a_runtime_branch_cannot_express():
    t = ConstexprFlags()
    # defined only inside the guarded branch, read after it: undefined after a runtime if
    defined_inside = EXPERT.replace("        y += b\n", "").replace(
        "    if not SKIP:\n", "    if HAS_BIAS:\n        y += b\n    if not SKIP:\n"
    )
    assert [s.before for s in t.sites(defined_inside)] == ["SKIP: tl.constexpr = False"]
    # rebinding a live variable may change its type (x.to(...)): not offered
    rebinds = EXPERT.replace("        y += b\n", "        y = y.to(tl.float32) + b\n")
    assert [s.before for s in t.sites(rebinds)] == ["SKIP: tl.constexpr = False"]
    # used other than as an if test, or inside a return-bearing branch
    assert [s.before for s in t.sites(EXPERT.replace("mask=offs < n)\n", "mask=SKIP)\n"))] == ["HAS_BIAS: tl.constexpr"]
    assert [
        s.before for s in t.sites(EXPERT.replace("    if not SKIP:\n", "    if not SKIP:\n        return\n    if n:\n"))
    ] == ["HAS_BIAS: tl.constexpr"]


def test_no_pattern():
    t = ConstexprFlags()
    assert t.sites("x = 1\n") == [] and t.optimize_sites("x = 1\n") == []
    host = EXPERT.replace("@triton.jit\n", "")  # not a kernel
    assert t.sites(host) == [] and t.optimize_sites(host) == []
    assert t.sites("def broken(:\n") == []
