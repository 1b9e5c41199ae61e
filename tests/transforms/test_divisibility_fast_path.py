import ast
import textwrap
from pathlib import Path

import klineage
from klineage.transform import matching_optimize_site
from klineage.transforms.divisibility_fast_path import DivisibilityFastPath

T = DivisibilityFastPath()
MATMUL = Path(klineage.__file__).parent / "examples" / "matmul" / "tuned.py"

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.heuristics({"EVEN_N": lambda args: args["N"] % args["BLOCK"] == 0, "HAS_B": lambda args: args["b"] > 0})
    @triton.jit
    def add_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr, EVEN_N: tl.constexpr, HAS_B: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        if EVEN_N:
            a = tl.load(a_ptr + offs)
        else:
            a = tl.load(a_ptr + offs, mask=offs < N, other=0.0)
        if HAS_B:
            a += tl.load(b_ptr + offs, mask=offs < N, other=0.0)
        tl.store(c_ptr + offs, a, mask=offs < N)
""")

SIMPLE = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.heuristics({"HAS_B": lambda args: args["b"] > 0})
    @triton.jit
    def add_kernel(a_ptr, b_ptr, c_ptr, N, BLOCK: tl.constexpr, HAS_B: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + offs, mask=offs < N, other=0.0)
        if HAS_B:
            a += tl.load(b_ptr + offs, mask=offs < N, other=0.0)
        tl.store(c_ptr + offs, a, mask=offs < N)
""")

# The flag is used outside its branch: not a site.
OTHER_USE = EXPERT.replace("tl.store(c_ptr + offs, a, mask=offs < N)", "tl.store(c_ptr + offs, a, mask=EVEN_N)")


def test_sites_and_params():
    (site,) = T.sites(EXPERT)
    assert site.function == "add_kernel"
    assert site.params["flag"] == "EVEN_N"
    assert site.params["heuristic"] == '"EVEN_N": lambda args: args["N"] % args["BLOCK"] == 0'
    assert site.params["unmasked"] == "a = tl.load(a_ptr + offs)"
    assert not site.params["whole_decorator"]


def test_simplify_keeps_the_masked_branch():
    (site,) = T.sites(EXPERT)
    assert T.simplify(EXPERT, site) == SIMPLE


def test_optimize_with_params():
    (site,) = T.sites(EXPERT)
    (opt,) = T.optimize_sites(SIMPLE)
    assert T.optimize(SIMPLE, opt, site.params) == EXPERT


def test_round_trip_fixture():
    (site,) = T.sites(EXPERT)
    simplified = T.simplify(EXPERT, site)
    opt = matching_optimize_site(T, simplified, site)
    assert T.optimize(simplified, opt, site.params) == EXPERT


def test_round_trip_matmul_tuned():
    source = MATMUL.read_text()
    (site,) = T.sites(source)
    assert site.params["flag"] == "EVEN_K" and site.params["whole_decorator"]
    simplified = T.simplify(source, site)
    ast.parse(simplified)
    assert "if EVEN_K" not in simplified and "@triton.heuristics" not in simplified
    assert "mask=rk[None, :] < k_left" in simplified
    opt = matching_optimize_site(T, simplified, site)
    assert T.optimize(simplified, opt, site.params) == source


def test_no_sites_without_the_pattern():
    assert T.sites(SIMPLE) == []
    assert T.sites(OTHER_USE) == []
    assert T.sites("def broken(:\n") == []
