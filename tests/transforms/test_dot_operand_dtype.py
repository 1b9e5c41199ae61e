import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transforms.dot_operand_dtype import DotOperandDtype
from tests.transforms.roundtrip import assert_round_trips, simplify_all

T = DotOperandDtype()
ROOT = Path(__file__).resolve().parents[2]

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(p, v, w, acc):
        acc = tl.dot(p.to(v.dtype), v, acc)
        acc = tl.dot(v, (p * 2.0).to(tl.bfloat16), acc=acc)
        acc = tl.dot(p.to(tl.float16), w.to(tl.float16), acc)
        acc = tl.dot(p, v, acc)
        acc = tl.dot(p.to(w.dtype), v, acc)

    def host(p, v):
        return tl.dot(p.to(v.dtype), v)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(p, v, w, acc):
        acc = tl.dot(p, v.to(tl.float32), acc)
        acc = tl.dot(v.to(tl.float32), (p * 2.0), acc=acc)
        acc = tl.dot(p.to(tl.float16), w.to(tl.float16), acc)
        acc = tl.dot(p, v, acc)
        acc = tl.dot(p.to(w.dtype), v, acc)

    def host(p, v):
        return tl.dot(p.to(v.dtype), v)
""")


def test_simplify_fixture():
    # both operands cast, no cast, a cast to a third tensor's dtype and a host function: no site
    assert [s.params for s in T.sites(EXPERT)] == [
        {"operand": 0, "cast": "other"},
        {"operand": 1, "cast": "tl.bfloat16"},
    ]
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [(s.before, s.params) for s in sites] == [
        ("tl.dot(p, v.to(tl.float32), acc)", {"raised": 1}),
        ("tl.dot(v.to(tl.float32), (p * 2.0), acc=acc)", {"raised": 0}),
    ]
    assert "acc = tl.dot(p.to(v.dtype), v, acc)" in T.optimize(SIMPLE, sites[0], {"cast": "other"})
    assert "tl.dot(v, (p * 2.0).to(v.dtype), acc=acc)" in T.optimize(SIMPLE, sites[1], {"cast": "other"})
    with pytest.raises(ValueError, match="unknown cast"):
        T.optimize(SIMPLE, sites[0], {"cast": "torch.float32"})


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 2


def test_round_trip_bundled_attention_expert():
    # the expert rounds P to V's dtype for P @ V in its online-softmax helper
    sites = assert_round_trips(T, (ROOT / "src/klineage/examples/attention/expert.py").read_text())
    assert [(s.function, s.before) for s in sites] == [("_online_softmax_block", "tl.dot(p.to(v.dtype), v, acc)")]


def test_optimize_bundled_naive_attention():
    naive = (ROOT / "src/klineage/examples/attention/naive.py").read_text()
    (site,) = T.optimize_sites(naive)
    out = T.optimize(naive, site, {"operand": 0, "cast": "other"})
    assert "tl.dot(p.to(v.dtype), v)" in out and "v.to(tl.float32)" not in out
    ast.parse(out)


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.optimize_sites(EXPERT) == []
    assert T.sites("def broken(:\n") == []
