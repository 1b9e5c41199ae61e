import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transforms.fp32_upcast import Fp32Upcast
from tests.transforms.roundtrip import assert_round_trips, installed_source, simplify_all

T = Fp32Upcast()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, w_ptr, y_ptr, eps, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols)
        w = tl.load(w_ptr + cols).to(tl.float32)
        x = x.to(tl.float32)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        s = tl.sum(x * x, axis=0) + eps.to(tl.float32)
        y = (x * w).to(tl.float32) + acc.to(tl.float32)
        tl.store(y_ptr + cols, y / s)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, w_ptr, y_ptr, eps, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols)
        w = tl.load(w_ptr + cols)
        x = x
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        s = tl.sum(x * x, axis=0) + eps.to(tl.float32)
        y = (x * w).to(tl.float32) + acc.to(tl.float32)
        tl.store(y_ptr + cols, y / s)
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    # Casts of a product, an accumulator and a scalar argument are not upcasts of loaded values.
    assert [(s.before, s.after) for s in sites] == [
        ("w = tl.load(w_ptr + cols).to(tl.float32)", "w = tl.load(w_ptr + cols)"),
        ("x = x.to(tl.float32)", "x = x"),
    ]
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [(s.line, s.before) for s in sites[:3]] == [
        (8, "x = tl.load(x_ptr + cols)"),
        (9, "w = tl.load(w_ptr + cols)"),
        (10, "x = x"),
    ]
    assert len(sites) == 7  # then each read of x and w
    out = T.optimize(SIMPLE, sites[2], {"dtype": "tl.float32"})
    assert out == SIMPLE.replace("    x = x\n", "    x = x.to(tl.float32)\n")
    out = T.optimize(SIMPLE, sites[1], {"dtype": "tl.float32"})
    assert "    w = tl.load(w_ptr + cols).to(tl.float32)\n" in out


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 2


@pytest.mark.parametrize("example", ["softmax", "rmsnorm"])
def test_round_trip_bundled(example):
    path = Path(__file__).resolve().parents[2] / f"src/klineage/examples/{example}/tuned.py"
    assert assert_round_trips(T, path.read_text())


def test_round_trip_liger():
    assert assert_round_trips(T, installed_source("liger_kernel.ops.swiglu"), limit=2)


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.sites("import triton.language as tl\ndef host(p):\n    return tl.load(p).to(tl.float32)\n") == []
    assert T.sites("def broken(:\n") == []


def test_a_program_is_parsed_once_for_its_sites_and_their_rewrite(monkeypatch):
    """`sites` then `simplify` (and a proposer asking once a skill) read the same program: one parse, kept by the
    transform and shared with every other family (`_anchored.parsed`); and the sites it hands out are copies, so a
    caller cannot change what the next one gets."""
    from klineage.transforms import _anchored

    _anchored.parsed.cache_clear()  # another test of this worker may have parsed the fixture
    parses = []
    real = _anchored.Module

    def counted(source):
        parses.append(source)
        return real(source)

    monkeypatch.setattr(_anchored, "Module", counted)
    t = Fp32Upcast()
    first = t.sites(EXPERT)
    first[0].params["dtype"] = "changed"
    again = t.sites(EXPERT)
    simplified = t.simplify(EXPERT, again[0])
    assert len(parses) == 1 and again[0].params.get("dtype") != "changed"
    assert t.optimize_sites(simplified) == t.optimize_sites(simplified) and len(parses) == 2
    assert simplified == Fp32Upcast().simplify(EXPERT, again[0])  # a fresh transform agrees
    assert len(parses) == 2  # and parsed nothing again
