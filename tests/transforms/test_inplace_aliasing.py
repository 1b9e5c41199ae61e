import ast
import importlib.util
import textwrap

import pytest

from klineage.transform import matching_optimize_site
from klineage.transforms.inplace_aliasing import InplaceAliasing

T = InplaceAliasing()

KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(y_ptr + offs, x * 2, mask=offs < n)
""")

EXPERT = KERNEL + textwrap.dedent("""

    def scale(x, in_place):
        if in_place:
            y = x
        else:
            y = torch.zeros_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y


    def scale2(x, in_place):
        y = x if in_place else torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
""")

SIMPLE_FIRST = EXPERT.replace("        y = x\n", "        y = torch.empty_like(x)\n")

NO_LAUNCH = textwrap.dedent("""
    import torch


    def f(x):
        y = x
        return y + 1
""")


def test_sites_and_params():
    sites = T.sites(EXPERT)
    assert [s.function for s in sites] == ["scale", "scale2"]
    assert sites[0].before == "y = x" and sites[0].after == "y = torch.empty_like(x)"
    assert sites[0].params["value"] == "x" and sites[0].params["input"] == "x"
    assert sites[1].after == "y = torch.empty_like(x)"
    assert sites[1].params["value"] == "x if in_place else torch.empty_like(x)"


def test_simplify_allocates_a_separate_output():
    site = T.sites(EXPERT)[0]
    assert T.simplify(EXPERT, site) == SIMPLE_FIRST
    ast.parse(T.simplify(EXPERT, T.sites(EXPERT)[1]))


def test_optimize_default_aliases():
    sites = T.optimize_sites(SIMPLE_FIRST)
    # the zeros_like of the first function's else branch is also a plain site
    assert [s.before for s in sites] == ["y = torch.empty_like(x)", "y = torch.zeros_like(x)"]
    assert T.optimize(SIMPLE_FIRST, sites[0], {}) == EXPERT


def test_optimize_with_params():
    site = T.sites(EXPERT)[1]
    simplified = T.simplify(EXPERT, site)
    assert "    y = torch.empty_like(x)\n    scale_kernel" in simplified
    opt = matching_optimize_site(T, simplified, site)
    assert T.optimize(simplified, opt, site.params) == EXPERT


def test_round_trip_fixture():
    for site in T.sites(EXPERT):
        simplified = T.simplify(EXPERT, site)
        opt = matching_optimize_site(T, simplified, site)
        assert opt is not None
        assert T.optimize(simplified, opt, site.params) == EXPERT


def test_round_trip_liger():
    if importlib.util.find_spec("liger_kernel") is None:
        pytest.skip("liger_kernel not installed")
    for name in ("liger_kernel.ops.rms_norm", "liger_kernel.ops.swiglu"):
        source = open(importlib.util.find_spec(name).origin).read()
        sites = T.sites(source)
        assert sites, name
        for site in sites:
            simplified = T.simplify(source, site)
            ast.parse(simplified)
            opt = matching_optimize_site(T, simplified, site)
            assert opt is not None
            assert T.optimize(simplified, opt, site.params) == source


def test_no_sites_without_a_launch():
    assert T.sites(NO_LAUNCH) == [] and T.optimize_sites(NO_LAUNCH) == []
    assert T.sites("def broken(:\n") == []
