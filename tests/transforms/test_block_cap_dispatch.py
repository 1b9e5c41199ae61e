import textwrap

from klineage.transform import matching_optimize_site
from klineage.transforms.block_cap_dispatch import BlockCapDispatch
from tests.transforms.roundtrip import assert_round_trips, installed_source

T = BlockCapDispatch()

HEAD = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl

    MAX_FUSED_SIZE = 65536 // 2


    @triton.jit
    def lse_kernel(x_ptr, out_ptr, n_cols, BLOCK_SIZE: tl.constexpr):
        row = tl.program_id(0)
        m = float("-inf")
        s = 0.0
        for i in range(0, n_cols, BLOCK_SIZE):
            cols = i + tl.arange(0, BLOCK_SIZE)
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
        tl.store(out_ptr + row, m + tl.log(s))


    @triton.jit
    def softmax_one_tile(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
        y = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * n_cols + cols, y / tl.sum(y, axis=0), mask=cols < n_cols)
""")

EXPERT = HEAD + textwrap.dedent("""

    def lse(x):
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, device=x.device)
        BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(n_cols))
        lse_kernel[(n_rows,)](x, out, n_cols, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
        return out


    def softmax(x):
        # Single tile: capping here would truncate rows, so this is not a site.
        BLOCK = min(65536, triton.next_power_of_2(x.shape[1]))
        y = torch.empty_like(x)
        softmax_one_tile[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK)
        return y
""")

SIMPLE = EXPERT.replace("BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(n_cols))", "BLOCK_SIZE = 1024")


def test_sites_and_params():
    (site,) = T.sites(EXPERT)
    assert site.function == "lse"
    assert site.params == {"value": "min(MAX_FUSED_SIZE, triton.next_power_of_2(n_cols))", "cap": "MAX_FUSED_SIZE"}
    assert site.after == "BLOCK_SIZE = 1024"


def test_simplify_fixes_the_block():
    assert T.simplify(EXPERT, T.sites(EXPERT)[0]) == SIMPLE
    small_cap = EXPERT.replace("min(MAX_FUSED_SIZE,", "min(256,")
    (site,) = T.sites(small_cap)
    assert "    BLOCK_SIZE = 256\n" in T.simplify(small_cap, site)


def test_optimize_restores_the_capped_block():
    (opt,) = T.optimize_sites(SIMPLE)
    assert opt.before == "BLOCK_SIZE = 1024" and opt.function == "lse"
    out = T.optimize(SIMPLE, opt, {"value": "min(4096, triton.next_power_of_2(n_cols))"})
    assert "    BLOCK_SIZE = min(4096, triton.next_power_of_2(n_cols))\n" in out


def test_round_trip_fixture():
    (site,) = T.sites(EXPERT)
    simplified = T.simplify(EXPERT, site)
    opt = matching_optimize_site(T, simplified, site)
    assert T.optimize(simplified, opt, site.params) == EXPERT


def test_round_trip_liger():
    for name in ("liger_kernel.ops.cross_entropy", "liger_kernel.ops.kl_div"):
        assert assert_round_trips(T, installed_source(name)), name


def test_no_sites_without_a_looped_kernel():
    assert T.sites(SIMPLE) == []
    one_tile = HEAD + "\n\ndef f(x):\n    BLOCK = 1024\n    softmax_one_tile[(1,)](x, x, 4, BLOCK=BLOCK)\n"
    assert T.optimize_sites(one_tile) == []
    assert T.sites("def broken(:\n") == []
