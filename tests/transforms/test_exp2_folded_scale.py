import ast
import textwrap
from pathlib import Path

import pytest

from klineage.transforms.exp2_folded_scale import Exp2FoldedScale
from tests.transforms.roundtrip import assert_round_trips, simplify_all

T = Exp2FoldedScale()
ROOT = Path(__file__).resolve().parents[2]

EXPERT = textwrap.dedent("""
    import math
    import triton
    import triton.language as tl

    LOG2E = 1.4426950408889634

    @triton.jit
    def _block(acc, m_i, s, scale):
        m_new = tl.maximum(m_i, tl.max(s, 1) * scale)
        p = tl.exp2(s * scale - m_new[:, None])
        return acc * tl.exp2(m_i - m_new)[:, None] + p, m_new

    @triton.jit
    def attn(x_ptr, o_ptr, qk_scale, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        m_i = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for start in range(0, n, BLOCK):
            s = tl.load(x_ptr + start + cols[:, None] * BLOCK + cols[None, :])
            acc, m_i = _block(acc, m_i, s, qk_scale)
        tl.store(o_ptr + cols[:, None] * BLOCK + cols[None, :], acc)

    @triton.jit
    def rows(x_ptr, y_ptr, scale, BLOCK: tl.constexpr):
        z = tl.load(x_ptr + tl.arange(0, BLOCK)) * scale
        e = tl.exp2(z - tl.max(z, 0))
        tl.store(y_ptr + tl.arange(0, BLOCK), e / tl.sum(e, 0))

    def forward(x, o, d):
        qk_scale = LOG2E / math.sqrt(d)
        attn[(1,)](x, o, qk_scale, 64, BLOCK=16)
        rows[(1,)](x, o, d * 1.44269504, BLOCK=16)
""")

SIMPLE = textwrap.dedent("""
    import math
    import triton
    import triton.language as tl

    LOG2E = 1.4426950408889634

    @triton.jit
    def _block(acc, m_i, s, scale):
        m_new = tl.maximum(m_i, tl.max(s, 1) * scale)
        p = tl.exp(s * scale - m_new[:, None])
        return acc * tl.exp(m_i - m_new)[:, None] + p, m_new

    @triton.jit
    def attn(x_ptr, o_ptr, qk_scale, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        m_i = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for start in range(0, n, BLOCK):
            s = tl.load(x_ptr + start + cols[:, None] * BLOCK + cols[None, :])
            acc, m_i = _block(acc, m_i, s, qk_scale)
        tl.store(o_ptr + cols[:, None] * BLOCK + cols[None, :], acc)

    @triton.jit
    def rows(x_ptr, y_ptr, scale, BLOCK: tl.constexpr):
        z = tl.load(x_ptr + tl.arange(0, BLOCK)) * scale
        e = tl.exp(z - tl.max(z, 0))
        tl.store(y_ptr + tl.arange(0, BLOCK), e / tl.sum(e, 0))

    def forward(x, o, d):
        qk_scale = 1.0 / math.sqrt(d)
        attn[(1,)](x, o, qk_scale, 64, BLOCK=16)
        rows[(1,)](x, o, d, BLOCK=16)
""")

# Kernels the fold would break, each with no optimize site: an additive bias beside the scaled scores, a scale that
# is a stride (it reaches addresses), a logarithm of the statistics, an exponential the scale does not reach, and
# an exp2 already there.
UNSAFE = textwrap.dedent("""
    import triton
    import triton.language as tl

    @triton.jit
    def biased(x_ptr, b_ptr, y_ptr, scale, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        z = tl.load(x_ptr + cols) * scale + tl.load(b_ptr + cols)
        e = tl.exp(z - tl.max(z, 0))
        tl.store(y_ptr + cols, e / tl.sum(e, 0))

    @triton.jit
    def strided(x_ptr, y_ptr, stride, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK) * stride
        z = tl.load(x_ptr + cols)
        tl.store(y_ptr + cols, tl.exp(z - tl.max(z, 0)))

    @triton.jit
    def lse(x_ptr, y_ptr, scale, BLOCK: tl.constexpr):
        z = tl.load(x_ptr + tl.arange(0, BLOCK)) * scale
        m = tl.max(z, 0)
        tl.store(y_ptr, m + tl.log(tl.sum(tl.exp(z - m), 0)))

    @triton.jit
    def unreached(x_ptr, y_ptr, scale, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        z = tl.load(x_ptr + cols)
        tl.store(y_ptr + cols, tl.exp(z) * scale)

    @triton.jit
    def mixed(x_ptr, y_ptr, scale, BLOCK: tl.constexpr):
        z = tl.load(x_ptr + tl.arange(0, BLOCK)) * scale
        tl.store(y_ptr + tl.arange(0, BLOCK), tl.exp(z) + tl.exp2(z))

    def forward(x, b, y, s, d):
        biased[(1,)](x, b, y, s, BLOCK=16)
        strided[(1,)](x, y, x.stride(0), BLOCK=16)
        lse[(1,)](x, y, s, BLOCK=16)
        unreached[(1,)](x, y, s, BLOCK=16)
        mixed[(1,)](x, y, s, BLOCK=16)
""")


def test_simplify_fixture():
    sites = T.sites(EXPERT)
    assert [(s.function, s.before, s.after, s.params) for s in sites] == [
        ("attn", "LOG2E / math.sqrt(d)", "1.0 / math.sqrt(d)", {"form": "div", "constant": "LOG2E"}),
        ("rows", "d * 1.44269504", "d", {"form": "x*c", "constant": "1.44269504"}),
    ]
    assert simplify_all(T, EXPERT) == SIMPLE


def test_optimize_fixture():
    sites = T.optimize_sites(SIMPLE)
    assert [(s.function, s.before) for s in sites] == [("attn", "1.0 / math.sqrt(d)"), ("rows", "d")]
    out = T.optimize(SIMPLE, sites[0], {"form": "div", "constant": "LOG2E"})
    assert "qk_scale = LOG2E / math.sqrt(d)" in out
    assert out.count("tl.exp2(") == 2 and "rows[(1,)](x, o, d, BLOCK=16)" in out  # the other kernel is untouched
    out = T.optimize(SIMPLE, sites[1], {"form": "div", "constant": "LOG2E"})
    assert "rows[(1,)](x, o, d * LOG2E, BLOCK=16)" in out  # no `1.0 / x` to take the factor: a product
    with pytest.raises(ValueError, match="unknown form"):
        T.optimize(SIMPLE, sites[0], {"form": "pow"})


def test_optimize_writes_the_literal_where_the_constant_is_not_log2e():
    # an expert's constant name this program lacks (or binds to something else) is not carried over
    simple = SIMPLE.replace("LOG2E = 1.4426950408889634\n", "")
    (site, _) = T.optimize_sites(simple)
    out = T.optimize(simple, site, {"form": "div", "constant": "LOG2E"})
    assert "qk_scale = 1.4426950408889634 / math.sqrt(d)" in out


def test_optimize_refuses_the_unsafe_kernels():
    assert T.optimize_sites(UNSAFE) == []


def test_no_site_where_the_host_does_not_fold():
    # exp2 in the kernel with a host scale that carries no log2(e): the local form, fast_math's, not this one
    assert T.sites(SIMPLE.replace("tl.exp(", "tl.exp2(")) == []


def test_round_trip_fixture():
    assert len(assert_round_trips(T, EXPERT)) == 2


def test_round_trip_bundled_attention_expert():
    sites = assert_round_trips(T, (ROOT / "src/klineage/examples/attention/expert.py").read_text())
    assert [(s.function, s.before) for s in sites] == [("_attn_fwd", "LOG2E / math.sqrt(D)")]


def test_optimize_bundled_naive_attention():
    naive = (ROOT / "src/klineage/examples/attention/naive.py").read_text()
    (site,) = T.optimize_sites(naive)
    out = T.optimize(naive, site, {"form": "div", "constant": "LOG2E"})
    assert "1.4426950408889634 / D**0.5, S," in out
    assert "p = tl.exp2(s - m_new[:, None])" in out and "alpha = tl.exp2(m_i - m_new)" in out
    assert "tl.exp(" not in out
    ast.parse(out)


def test_heldout_scaled_masked_softmax_has_no_site():
    # its additive mask is not scaled: folding log2(e) into the scale alone would change the softmax
    naive = (ROOT / "src/klineage/suites/heldout/softmax_scale_mask/naive.py").read_text()
    assert T.optimize_sites(naive) == []


def test_no_expert_site_where_an_exponential_is_not_the_scales():
    # a second exp2 of a value the scale does not reach (fast_math's local form) would be undone into the wrong base
    local = EXPERT.replace(
        "    e = tl.exp2(z - tl.max(z, 0))\n", "    e = tl.exp2(z - tl.max(z, 0)) + tl.exp2(tl.load(x_ptr) * LOG2E)\n"
    )
    assert local != EXPERT
    assert [s.function for s in T.sites(local)] == ["attn"]
