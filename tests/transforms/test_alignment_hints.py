import ast
import textwrap
from pathlib import Path

from klineage.transforms.alignment_hints import AlignmentHints
from tests.transforms.roundtrip import assert_round_trips, simplify_all

T = AlignmentHints()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(a_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)
        for start_n in range(0, N, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            x = tl.load(a_ptr + ram + start_n + tl.multiple_of(rm, 16))
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(a_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        ram = rm % M
        for start_n in range(0, N, BLOCK_N):
            start_n = start_n
            x = tl.load(a_ptr + ram + start_n + tl.multiple_of(rm, 16))
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    # The hint inside the load's address is not the whole value of an assignment: left alone.
    assert [s.params for s in sites] == [
        {"hints": [["tl.max_contiguous", "BLOCK_M"], ["tl.multiple_of", "BLOCK_M"]]},
        {"hints": [["tl.multiple_of", "BLOCK_N"]]},
    ]
    assert sites[0].after == "rm % M"
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [s.before for s in sites] == ["tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)", "rm % M", "start_n"]
    out = T.optimize(SIMPLE, sites[1], {"hints": [["tl.max_contiguous", "BLOCK_M"], ["tl.multiple_of", "BLOCK_M"]]})
    assert "ram = tl.max_contiguous(tl.multiple_of(rm % M, BLOCK_M), BLOCK_M)" in out
    out = T.optimize(SIMPLE, sites[2], {"hints": [["tl.multiple_of", "BLOCK_N"]]})
    assert "start_n = tl.multiple_of(start_n, BLOCK_N)" in out


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 2


def test_round_trip_bundled_matmul():
    path = Path(__file__).resolve().parents[2] / "src/klineage/examples/matmul/tuned.py"
    assert len(assert_round_trips(T, path.read_text())) == 2


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(simplify_all(T, EXPERT))
    assert T.sites(SIMPLE) == []
    host = "import triton.language as tl\ndef f(x, n):\n    y = tl.multiple_of(x, n)\n    return y\n"
    assert T.sites(host) == []  # not a kernel
    assert T.sites("def broken(:\n") == []


def test_a_value_of_two_dimensions_gets_no_hint():
    """One bound on a block of two is a compile error (`Shape of input to multiple_of does not match the length of
    values`): FlagGems's amax moves its pointer by `rows * N`, `rows` a column (RESULTS.md#wild-h100)."""
    source = (
        "import triton\nimport triton.language as tl\n@triton.jit\n"
        "def k(inp, out, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):\n"
        "    pid = tl.program_id(0)\n"
        "    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]\n"
        "    inp = inp + rows * N\n"
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)\n"
        "    total = acc + 1\n"
        "    cols = tl.arange(0, BLOCK_N)\n"
        "    tl.store(out + cols, tl.sum(tl.load(inp + cols[None, :]), axis=0))\n"
    )
    assert [s.before for s in T.optimize_sites(source)] == ["tl.program_id(0)", "tl.arange(0, BLOCK_N)"]
