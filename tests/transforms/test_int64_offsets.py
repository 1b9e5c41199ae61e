import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transforms.int64_offsets import Int64Offsets
from tests.transforms.roundtrip import assert_round_trips, installed_source, simplify_all

T = Int64Offsets()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, idx_ptr, y_ptr, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = (row * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
        tok = tl.load(idx_ptr + row).to(tl.int64)
        x = tl.load(x_ptr + row * stride + offs)
        tl.store(y_ptr + tok * stride + offs, x)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, idx_ptr, y_ptr, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = row * BLOCK + tl.arange(0, BLOCK)
        tok = tl.load(idx_ptr + row).to(tl.int64)
        x = tl.load(x_ptr + row * stride + offs)
        tl.store(y_ptr + tok * stride + offs, x)
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    # The cast of a loaded index is not matched: its dtype is unknown.
    assert [(s.before, s.after) for s in sites] == [
        ("tl.program_id(0).to(tl.int64)", "tl.program_id(0)"),
        ("(row * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)", "row * BLOCK + tl.arange(0, BLOCK)"),
    ]
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [s.before for s in sites] == ["tl.program_id(0)", "row * BLOCK + tl.arange(0, BLOCK)"]
    out = T.optimize(SIMPLE, sites[1], {"dtype": "tl.int64"})
    assert "offs = (row * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)" in out
    assert T.optimize(SIMPLE, sites[0], {"dtype": "tl.int64"}).count("tl.program_id(0).to(tl.int64)") == 1


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 2


@pytest.mark.parametrize("example", ["softmax", "rmsnorm"])
def test_round_trip_bundled(example):
    path = Path(__file__).resolve().parents[2] / f"src/klineage/examples/{example}/tuned.py"
    assert len(assert_round_trips(T, path.read_text())) == 1


def test_round_trip_liger():
    assert assert_round_trips(T, installed_source("liger_kernel.ops.geglu"))


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.sites("import triton.language as tl\ndef host(i):\n    j = i.to(tl.int64)\n") == []
    assert T.sites("def broken(:\n") == []
