import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transforms.fast_math import FastMath
from tests.transforms.roundtrip import assert_round_trips, installed_source, simplify_all

T = FastMath()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    LOG2_E = tl.constexpr(1.4426950408889634)

    @triton.jit
    def k(x_ptr, m, d, eps):
        x = tl.load(x_ptr)
        p = tl.exp2((x - m) * LOG2_E) / d
        q = tl.exp2(x * 1.44269504)
        r = x * tl.rsqrt(d + eps)
        rstd = tl.math.rsqrt(d)
        tl.store(x_ptr, p + q + r + rstd)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    LOG2_E = tl.constexpr(1.4426950408889634)

    @triton.jit
    def k(x_ptr, m, d, eps):
        x = tl.load(x_ptr)
        p = tl.exp(x - m) / d
        q = tl.exp(x)
        r = x * (1.0 / tl.sqrt(d + eps))
        rstd = 1.0 / tl.sqrt(d)
        tl.store(x_ptr, p + q + r + rstd)
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    assert [s.params["kind"] for s in sites] == ["exp2", "exp2", "rsqrt", "rsqrt"]
    assert sites[0].params == {"kind": "exp2", "fn": "tl.exp2", "scale": "LOG2_E", "order": "x*c", "parens": "yes"}
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [s.before for s in sites] == ["tl.exp(x - m)", "tl.exp(x)", "(1.0 / tl.sqrt(d + eps))", "1.0 / tl.sqrt(d)"]
    out = T.optimize(SIMPLE, sites[0], {"kind": "exp2", "scale": "LOG2_E", "order": "x*c"})
    assert "p = tl.exp2((x - m) * LOG2_E) / d" in out
    out = T.optimize(SIMPLE, sites[2], {"kind": "rsqrt", "fn": "tl.rsqrt"})
    assert "r = x * tl.rsqrt(d + eps)" in out
    with pytest.raises(ValueError):
        T.optimize(SIMPLE, sites[2], {"kind": "exp2"})


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 4


def test_round_trip_bundled_rmsnorm():
    path = Path(__file__).resolve().parents[2] / "src/klineage/examples/rmsnorm/tuned.py"
    assert len(assert_round_trips(T, path.read_text())) == 1


@pytest.mark.parametrize("module", ["liger_kernel.ops.cross_entropy", "liger_kernel.ops.layer_norm"])
def test_round_trip_liger(module):
    assert assert_round_trips(T, installed_source(module), limit=2)


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    # the bundled softmax folds LOG2E across statements: not a local site
    path = Path(__file__).resolve().parents[2] / "src/klineage/examples/softmax/tuned.py"
    assert T.sites(path.read_text()) == []
    assert T.sites("import triton.language as tl\ndef host(x):\n    return tl.exp2(x * 1.4426950408889634)\n") == []
    assert T.sites("def broken(:\n") == []
