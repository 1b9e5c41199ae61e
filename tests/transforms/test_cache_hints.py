import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transforms.cache_hints import CacheHints
from tests.transforms.roundtrip import assert_round_trips, installed_source, simplify_all

T = CacheHints()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < n, other=0.0, cache_modifier=".ca")
        w = tl.load(
            w_ptr + cols,
            mask=cols < n,
            eviction_policy="evict_last",  # every program re-reads w
        )
        tl.store(y_ptr + cols, x * w, mask=cols < n, eviction_policy="evict_first", cache_modifier=".cs")

    def host(x):
        return x.load(0, eviction_policy="evict_last")
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, w_ptr, y_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        w = tl.load(
            w_ptr + cols,
            mask=cols < n,  # every program re-reads w
        )
        tl.store(y_ptr + cols, x * w, mask=cols < n)

    def host(x):
        return x.load(0, eviction_policy="evict_last")
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    assert [s.params for s in sites] == [
        {"cache_modifier": '".ca"'},
        {"eviction_policy": '"evict_last"'},
        {"eviction_policy": '"evict_first"', "cache_modifier": '".cs"'},
    ]
    assert all(s.function == "k" for s in sites)
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert len(sites) == 3  # the host-side .load is not a kernel access
    out = T.optimize(SIMPLE, sites[2], {"eviction_policy": '"evict_first"', "cache_modifier": '".cs"'})
    assert 'tl.store(y_ptr + cols, x * w, mask=cols < n, eviction_policy="evict_first", cache_modifier=".cs")' in out
    out = T.optimize(SIMPLE, sites[0], {"eviction_policy": '"evict_last"'})
    assert 'x = tl.load(x_ptr + cols, mask=cols < n, other=0.0, eviction_policy="evict_last")' in out


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 3


def test_round_trip_bundled_rmsnorm():
    path = Path(__file__).resolve().parents[2] / "src/klineage/examples/rmsnorm/tuned.py"
    assert len(assert_round_trips(T, path.read_text())) == 1


@pytest.mark.parametrize("module", ["liger_kernel.ops.softmax", "liger_kernel.ops.sparsemax"])
def test_round_trip_liger(module):
    assert assert_round_trips(T, installed_source(module))


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.sites("def f(x):\n    return x\n") == []
    assert T.sites("def broken(:\n") == []
