import ast
import textwrap

from klineage.transforms.dot_precision import DotPrecision
from tests.transforms.roundtrip import assert_round_trips, simplify_all

T = DotPrecision()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(a, b, acc, P: tl.constexpr):
        acc = tl.dot(a, b, acc, allow_tf32=True)
        acc = tl.dot(a, b, acc=acc, input_precision="tf32", out_dtype=tl.float32)
        acc = tl.dot(a, b, acc, input_precision='tf32x3')
        acc = tl.dot(a, b, acc, input_precision=P)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        acc = tl.dot(a, b, acc)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(a, b, acc, P: tl.constexpr):
        acc = tl.dot(a, b, acc, input_precision="ieee")
        acc = tl.dot(a, b, acc=acc, input_precision="ieee", out_dtype=tl.float32)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        acc = tl.dot(a, b, acc, input_precision=P)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        acc = tl.dot(a, b, acc)
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    assert [s.params for s in sites] == [
        {"kwarg": "allow_tf32", "value": "True"},
        {"kwarg": "input_precision", "value": '"tf32"'},
        {"kwarg": "input_precision", "value": "'tf32x3'"},
    ]
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert len(sites) == 4  # every explicit ieee dot; not the constexpr precision nor the bare dot
    out = T.optimize(SIMPLE, sites[0], {"kwarg": "allow_tf32", "value": "True"})
    assert "acc = tl.dot(a, b, acc, allow_tf32=True)" in out
    out = T.optimize(SIMPLE, sites[3], {"kwarg": "input_precision", "value": '"tf32"'})
    assert out.count('input_precision="tf32"') == 1


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 3


def test_round_trip_bundled_matmul_has_no_sites():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "src/klineage/examples/matmul/tuned.py"
    assert assert_round_trips(T, path.read_text()) == []  # its dots use the default precision: left alone


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.sites("import triton.language as tl\ndef host(a, b):\n    return tl.dot(a, b, allow_tf32=True)\n") == []
    assert T.sites("def broken(:\n") == []
