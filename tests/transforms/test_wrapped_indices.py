import ast
import textwrap
from pathlib import Path

import klineage
from klineage.transform import matching_optimize_site
from klineage.transforms.wrapped_indices import WrappedIndices

T = WrappedIndices()
MATMUL = Path(klineage.__file__).parent / "examples" / "matmul" / "tuned.py"

EXPERT = textwrap.dedent("""
    import triton
    import triton.language as tl


    @triton.jit
    def mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        offs_am = (pid_m * BM + tl.arange(0, BM)) % M
        offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
        offs_k = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = tl.load(a_ptr + offs_am[:, None] * K + offs_k[None, :], mask=offs_k[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptr + offs_k[:, None] * N + offs_bn[None, :])
            acc = tl.dot(a, b, acc)
        offs_cm = pid_m * BM + tl.arange(0, BM)
        offs_cn = pid_n * BN + tl.arange(0, BN)
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        tl.store(c_ptr + offs_cm[:, None] * N + offs_cn[None, :], acc, mask=c_mask)
""")

SIMPLE = (
    EXPERT.replace("offs_am = (pid_m * BM + tl.arange(0, BM)) % M", "offs_am = pid_m * BM + tl.arange(0, BM)")
    .replace("offs_bn = (pid_n * BN + tl.arange(0, BN)) % N", "offs_bn = pid_n * BN + tl.arange(0, BN)")
    .replace(
        "mask=offs_k[None, :] < K - k * BK, other=0.0)",
        "mask=(offs_am[:, None] < M) & (offs_k[None, :] < K - k * BK), other=0.0)",
    )
    .replace("offs_bn[None, :])\n", "offs_bn[None, :], mask=offs_bn[None, :] < N, other=0.0)\n")
)

# offs_am also addresses the store: wrapping it would overwrite valid rows, so only offs_bn is taken.
STORE_WRAPPED = EXPERT.replace("tl.store(c_ptr + offs_cm[:, None]", "tl.store(c_ptr + offs_am[:, None]")


def test_sites_and_params():
    (site,) = T.sites(EXPERT)
    assert site.function == "mm"
    assert site.params["wrapped"] == {
        "offs_am": {"bound": "M", "value": "(pid_m * BM + tl.arange(0, BM)) % M"},
        "offs_bn": {"bound": "N", "value": "(pid_n * BN + tl.arange(0, BN)) % N"},
    }
    assert site.params["loads"] == [{"other": False, "paren": True}, {"other": True, "paren": False}]


def test_simplify_masks_the_loads():
    (site,) = T.sites(EXPERT)
    simplified = T.simplify(EXPERT, site)
    assert simplified == SIMPLE
    ast.parse(simplified)


def test_optimize_default_wraps_candidates():
    (opt,) = T.optimize_sites(SIMPLE)
    assert opt.params["candidates"] == {"offs_am": "M", "offs_bn": "N"}
    out = T.optimize(SIMPLE, opt, {})
    assert "offs_am = (pid_m * BM + tl.arange(0, BM)) % M" in out
    assert "b = tl.load(b_ptr + offs_k[:, None] * N + offs_bn[None, :])\n" in out
    ast.parse(out)


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
    assert set(site.params["wrapped"]) == {"ram", "rbn"}
    simplified = T.simplify(source, site)
    assert "a = tl.load(a_ptrs, mask=ram[:, None] < M, other=0.0)" in simplified
    assert "rm % M" not in simplified
    opt = matching_optimize_site(T, simplified, site)
    assert T.optimize(simplified, opt, site.params) == source


def test_no_sites_without_the_pattern():
    assert T.sites(SIMPLE) == []
    (site,) = T.sites(STORE_WRAPPED)
    assert list(site.params["wrapped"]) == ["offs_bn"]
    assert T.sites("def broken(:\n") == []


def test_a_load_left_with_no_mask_loses_its_other_too():
    """Carried from the matmul expert (whose A load keeps a K mask, hence its `other`) onto a 1-D load whose only
    mask term is the wrapped bound: Triton rejects `other` without `mask`, so both go."""
    source = textwrap.dedent("""
        import triton
        import triton.language as tl


        @triton.jit
        def rowsum(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
            cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + cols, mask=cols < n_cols, other=0.0)
            tl.store(y_ptr + tl.program_id(0), tl.sum(x, axis=0))
    """)
    (site,) = T.optimize_sites(source)
    new = T.optimize(source, site, {"loads": [{"other": False, "paren": True}]})
    assert "tl.load(x_ptr + cols)" in new and "(tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)) % n_cols" in new
    ast.parse(new)
