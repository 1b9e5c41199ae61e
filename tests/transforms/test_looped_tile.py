import textwrap

import pytest

from klineage.transforms._anchored import Module
from klineage.transforms.looped_tile import LoopedTile, looped_body, looped_twin
from tests.transforms.roundtrip import assert_round_trips, installed_source, round_trip

# a group norm holding a whole group (channels x positions) in one tile, and a row softmax holding a whole row;
# written here, in the form FlagGems's group norm takes
SIMPLE = textwrap.dedent(
    """\
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def group_kernel(X, Y, Mean, group_size, HW, eps, BLOCK_G: tl.constexpr, BLOCK_HW: tl.constexpr):
        pid = tl.program_id(0)
        g = tl.arange(0, BLOCK_G)
        hw = tl.arange(0, BLOCK_HW)
        offs = pid * group_size * HW + g[:, None] * HW + hw[None, :]
        mask = (g[:, None] < group_size) & (hw[None, :] < HW)
        x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x) / (group_size * HW)
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d) / (group_size * HW) + eps)
        tl.store(Y + offs, d * rstd, mask=mask)
        tl.store(Mean + pid, mean)


    @triton.jit
    def softmax_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=float("-inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * n + cols, e / tl.sum(e, axis=0), mask=cols < n)


    def group(x, groups, eps=1e-5):
        n, c, hw = x.shape
        y = torch.empty_like(x)
        mean = torch.empty(n * groups, device=x.device)
        group_kernel[(n * groups,)](
            x, y, mean, c // groups, hw, eps,
            BLOCK_G=triton.next_power_of_2(c // groups),
            BLOCK_HW=triton.next_power_of_2(hw),
        )
        return y, mean


    def softmax(x):
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(x.shape[1])
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK, num_warps=8)
        return y
    """
)


def _expert() -> str:
    t = LoopedTile()
    source = SIMPLE
    for _ in range(2):
        source = t.optimize(source, t.optimize_sites(source)[0], {})
    return source


def test_simplify_fixture():
    t = LoopedTile()
    expert = _expert()
    sites = t.sites(expert)
    assert [(s.function, s.params) for s in sites] == [
        ("group", {"kernel": "group_kernel"}),
        ("softmax", {"kernel": "softmax_kernel"}),
    ]
    once = t.simplify(expert, sites[0])
    assert "group_kernel_looped" not in once and "softmax_kernel_looped" in once
    assert t.simplify(once, t.sites(once)[0]) == SIMPLE


def test_optimize_fixture():
    t = LoopedTile()
    plain = t.optimize_sites(SIMPLE)
    assert [(s.function, s.params["kernel"], s.params["others"], s.params["warps"]) for s in plain] == [
        ("group", "group_kernel", "(triton.next_power_of_2(c // groups))", "4"),
        ("softmax", "softmax_kernel", "1", "8"),
    ]
    out = t.optimize(SIMPLE, plain[0], {})
    # the one-tile kernel where the group fits 32 values a thread, the twin in tiles of 8 a thread elsewhere
    assert "if triton.next_power_of_2(hw) * (triton.next_power_of_2(c // groups)) <= 1024 * 4:" in out
    assert "BLOCK_HW=max(1, min(triton.next_power_of_2(hw), 256 * 4 // (triton.next_power_of_2(c // groups))))" in out
    twin = Module(out).kernels()["group_kernel_looped"]
    code = Module(out).tree.code_for_node(twin)
    # three passes: the mean, the variance (each with its first tile peeled), then the stores
    assert code.count("for _kl_start in range(") == 3
    assert code.count("range(BLOCK_HW, HW, BLOCK_HW)") == 2 and "range(0, HW, BLOCK_HW)" in code
    assert "_kl_reduced0 = _kl_reduced0 + tl.sum(x)" in code
    assert code.index("tl.store(Y + offs") < code.index("tl.store(Mean + pid, mean)")
    softmax = t.optimize(SIMPLE, plain[1], {"per_thread": "16"})
    assert "BLOCK=max(1, min(BLOCK, 512 * 8))" in softmax
    assert "_kl_reduced0 = tl.maximum(_kl_reduced0, tl.max(x, axis=0))" in softmax
    with pytest.raises(ValueError, match="power of two"):
        t.optimize(SIMPLE, plain[1], {"per_thread": "3"})


def test_round_trip_fixture():
    assert round_trip(LoopedTile(), _expert()) == 2


def test_round_trip_flag_gems_group_norm():
    source = installed_source("flag_gems.ops.groupnorm")
    t = LoopedTile()
    kernels = [s.params["kernel"] for s in t.optimize_sites(source)]
    assert kernels == ["group_norm_kernel", "weight_bias_backward_kernel"]
    expert = t.optimize(source, t.optimize_sites(source)[0], {})
    assert_round_trips(t, expert)


def _kernel(body: str, params: str = "x_ptr, y_ptr, n, BLOCK: tl.constexpr"):
    source = f"import triton.language as tl\n\n@triton.jit\ndef k({params}):\n" + textwrap.indent(
        textwrap.dedent(body), "    "
    )
    return Module(source).kernels()["k"]


ROW = """\
row = tl.program_id(0)
cols = tl.arange(0, BLOCK)
x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
"""


@pytest.mark.parametrize(
    "body, why",
    [
        (ROW + "tl.store(y_ptr + row * n + cols, x / tl.sum(x, axis=0), mask=cols < n)\n", None),
        (ROW + "for i in range(3):\n    x = x * 2\ntl.store(y_ptr + cols, x, mask=cols < n)\n", "a loop"),
        (ROW + "tl.store(y_ptr + cols, x / BLOCK, mask=cols < n)\n", "the tile constexpr read as a number"),
        (ROW + "tl.store(y_ptr + cols, tl.cumsum(x, axis=0), mask=cols < n)\n", "a scan sees the order"),
        (ROW + "x = x + 1\ntl.store(y_ptr + cols, x, mask=cols < n)\n", "a name bound twice"),
        (
            ROW + "tl.store(y_ptr + cols, x, mask=cols < n)\n"
            "s = tl.sum(x, axis=0)\ntl.store(y_ptr + cols, x * s, mask=cols < n)\n",
            "a store before the last pass",
        ),
        (
            "row = tl.program_id(0)\ncols = tl.arange(0, BLOCK)\n"
            "x = tl.load(x_ptr + cols)\ntl.store(y_ptr + cols, x)\n",
            "no bound to sweep to",
        ),
        (
            ROW + "tl.store(y_ptr + row, tl.sum(x, axis=0))\nz = tl.load(y_ptr)\ntl.store(y_ptr + 1, z)\n",
            "a load after a store, which the twin would hoist above it",
        ),
        (
            ROW + "if tl.sum(x, axis=0) > 0:\n    y = x\nelse:\n    y = -x\ntl.store(y_ptr + cols, y, mask=cols < n)\n",
            "a branch on a reduced value around tile work",
        ),
    ],
)
def test_what_splits_and_what_does_not(body, why):
    plan = looped_body(_kernel(body))
    assert (plan is None) == (why is not None), why


def test_a_store_in_the_middle_pass_is_refused_but_scalar_stores_move_after_the_sweeps():
    body = ROW + "s = tl.sum(x, axis=0)\ntl.store(y_ptr + row, s)\n"
    body += "m = tl.max(x - s, axis=0)\ntl.store(y_ptr + n + row, m)\n"
    twin = looped_twin(_kernel(body))
    code = Module("import triton.language as tl\n").tree.code_for_node(twin)
    # s needs one pass, m (which reads s) a second; the two stores of reduced values after both
    assert code.count("for _kl_start in range(BLOCK, n, BLOCK)") == 2
    assert code.rindex("for _kl_start") < code.index("tl.store(y_ptr + row, s)")


def test_untimed_where_the_bench_case_tile_fits_the_one_tile_kernel():
    t = LoopedTile()
    site = t.optimize_sites(SIMPLE)[0]

    def rows(hw, warps=4):
        return [{"kernel": "m.group_kernel", "constexprs": {"BLOCK_G": 32, "BLOCK_HW": hw}, "num_warps": warps}]

    assert "4096-element tile" in t.untimed(SIMPLE, site, rows(128))  # 32 x 128 fits 1024 x 4: the original runs
    assert t.untimed(SIMPLE, site, rows(4096)) == ""  # FlagGems's bench case: the twin runs
    assert t.untimed(SIMPLE, site, rows(256, warps=8)) != ""  # 8192 elements at 8 warps fit
    assert t.untimed(SIMPLE, site, None) == ""  # not known (the interpreter does not run the bench case)


def test_the_swept_tile_is_a_ladder_of_values_a_thread():
    """The twin's swept tile is computed at launch (`max(1, min(WHOLE, per_thread * 32 * W // OTHERS))`): the
    launch-configuration search has no literal to move, so the family names it as a ladder, scaled by powers of
    two within 1..32 values a thread; the scaled dispatch is still this family's expert form."""
    t = LoopedTile()
    source = t.optimize(SIMPLE, t.optimize_sites(SIMPLE)[0], {})
    assert t.ladders(SIMPLE) == {}
    assert t.ladders(source) == {"group_kernel": ("group_kernel_looped", "per_thread")}
    up = t.scaled_ladder(source, "group_kernel", t.ladder_first)
    assert t.ladder_first == 2.0
    assert "BLOCK_HW=max(1, min(triton.next_power_of_2(hw), 512 * 4 // (triton.next_power_of_2(c // groups))))" in up
    assert "256 * 4 //" not in up and "<= 1024 * 4:" in up  # the dispatch's cap is not the ladder
    assert "128 * 4 //" in t.scaled_ladder(source, "group_kernel", 0.5)
    assert (
        t.scaled_ladder(t.optimize(SIMPLE, t.optimize_sites(SIMPLE)[0], {"per_thread": "32"}), "group_kernel", 2)
        is None
    )
    assert t.scaled_ladder(source, "softmax_kernel", 2) is None  # no twin there
    assert [s.params for s in t.sites(up)] == [{"kernel": "group_kernel"}]
    assert t.simplify(up, t.sites(up)[0]) == SIMPLE
