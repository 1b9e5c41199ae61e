import ast
import textwrap

from klineage.transform import matching_optimize_site
from klineage.transforms.assume_hints import AssumeHints

T = AssumeHints()

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(a_ptr, c_ptr, stride_am, BLOCK: tl.constexpr):
        pid_m = tl.program_id(0)
        tl.assume(pid_m >= 0)
        # guide the integer analysis of the offsets
        tl.assume(stride_am > 0)
        offs = pid_m * stride_am + tl.arange(0, BLOCK)
        tl.store(c_ptr + offs, tl.load(a_ptr + offs))

    @triton.jit
    def other(x_ptr):
        tl.store(x_ptr, 1)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def k(a_ptr, c_ptr, stride_am, BLOCK: tl.constexpr):
        pid_m = tl.program_id(0)
        offs = pid_m * stride_am + tl.arange(0, BLOCK)
        tl.store(c_ptr + offs, tl.load(a_ptr + offs))

    @triton.jit
    def other(x_ptr):
        tl.store(x_ptr, 1)
""")


def assert_round_trips(source):
    sites = T.sites(source)
    for site in sites:
        simplified = T.simplify(source, site)
        ast.parse(simplified)
        match = matching_optimize_site(T, simplified, site)
        assert match is not None, site
        assert T.optimize(simplified, match, site.params) == source
    return sites


def test_simplify_fixture():
    (site,) = T.sites(EXPERT)
    assert site.function == "k"
    comment = ["# guide the integer analysis of the offsets"]
    assert site.params == {"assume": [[1, "pid_m >= 0"], [2, "stride_am > 0", comment]]}
    assert T.simplify(EXPERT, site) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [s.function for s in sites] == ["k", "other"]
    out = T.optimize(SIMPLE, sites[0], {"assume": [[1, "pid_m >= 0"], [2, "stride_am > 0"]]})
    assert "pid_m = tl.program_id(0)\n    tl.assume(pid_m >= 0)\n    tl.assume(stride_am > 0)\n    offs =" in out


def test_round_trip_fixture():
    assert len(assert_round_trips(EXPERT)) == 1


def test_simplified_parses_and_no_pattern_no_sites():
    ast.parse(T.simplify(EXPERT, T.sites(EXPERT)[0]))
    assert T.sites(SIMPLE) == []
    only = "import triton\nimport triton.language as tl\n@triton.jit\ndef k(s):\n    tl.assume(s > 0)\n"
    assert T.sites(only) == []  # deleting would leave an empty body
    assert T.sites("def broken(:\n") == []
