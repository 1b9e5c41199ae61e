import ast
import textwrap

from klineage.transforms.static_range import StaticRange
from tests.transforms.roundtrip import assert_round_trips, installed_source, simplify_all

T = StaticRange()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, E: tl.constexpr, BLOCK: tl.constexpr):
        acc = 0.0
        for start in tl.static_range(0, E, BLOCK):
            acc += tl.sum(tl.load(x_ptr + start + tl.arange(0, BLOCK)))
        for i in tl.static_range(4):
            acc += i
        tl.store(x_ptr, acc)

    def host(n):
        for i in range(n):
            pass
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, E: tl.constexpr, BLOCK: tl.constexpr):
        acc = 0.0
        for start in range(0, E, BLOCK):
            acc += tl.sum(tl.load(x_ptr + start + tl.arange(0, BLOCK)))
        for i in range(4):
            acc += i
        tl.store(x_ptr, acc)

    def host(n):
        for i in range(n):
            pass
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    assert [(s.before, s.after, s.params) for s in sites] == [
        ("tl.static_range(0, E, BLOCK)", "range(0, E, BLOCK)", {"fn": "tl.static_range"}),
        ("tl.static_range(4)", "range(4)", {"fn": "tl.static_range"}),
    ]
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [(s.function, s.before) for s in sites] == [("k", "range(0, E, BLOCK)"), ("k", "range(4)")]  # not host
    out = T.optimize(SIMPLE, sites[1], {"fn": "tl.static_range"})
    assert "for i in tl.static_range(4):" in out and "for start in range(0, E, BLOCK):" in out


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 2


def test_round_trip_liger():
    assert assert_round_trips(T, installed_source("liger_kernel.ops.attn_res"))


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    assert T.sites("import triton.language as tl\nx = list(tl.static_range(3))\n") == []
    assert T.sites("def broken(:\n") == []


def test_unrolling_is_offered_only_where_the_trip_count_is_known_at_compile_time():
    """Attention's `range(lo, hi, BLOCK_N)` takes its bounds from the program id: `tl.static_range` there failed to
    compile (blind on the H200, run 5). A loop over constexpr bounds is still offered."""
    source = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr, STAGES: tl.constexpr):
            lo = tl.program_id(0) * BLOCK
            for start in range(lo, n, BLOCK):
                tl.store(x_ptr + start, 0.0)
            for i in range(0, STAGES):
                tl.store(x_ptr + i, 1.0)
    """)
    sites = T.optimize_sites(source)
    assert [s.before for s in sites] == ["range(0, STAGES)"]
