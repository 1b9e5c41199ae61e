"""best_first's order: evidence first, then the families' forward rank; with `spread`, a family's second candidate
in one kernel that no evidence speaks for waits behind every other family's first."""

from klineage.program import Program
from klineage.proposers.base import Candidate, best_first, uninformed

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def k(x, y):
    a = tl.load(x)
    b = tl.load(y)
    tl.store(x, a + b)


@triton.jit
def k2(x):
    tl.store(x, tl.load(x) * 2)


def f(x, y):
    k[(1,)](x, y)
    k2[(1,)](x)
"""
PROGRAM = Program("p", "import m\n", modules={"m": KERNELS})


def _c(transform, label, expected=1.0, origin="catalog", like=None, site="k[grid](x)", recorded=None, function="f"):
    transfer = {} if like is None else {"like_kernel": like, "recorded": recorded}
    return Candidate(label, origin, transform, "m", function, {"l": label}, expected, "", (), None, site, transfer)


def test_spread_puts_every_family_first_candidate_before_a_second_variant_of_one():
    knobs = [_c("launch_knobs", "warps 4", origin="launch_knobs.x.s1", like=False)]
    # measured on a like kernel at no gain: no evidence for it either
    knobs += [_c("launch_knobs", f"warps {w}", origin="launch_knobs.y.s1", like=True, recorded=0.9996) for w in (8, 16)]
    # a variant expecting a loss, listed first, does not take the family's first turn
    knobs.insert(0, _c("launch_knobs", "warps 1", expected=0.75, origin="launch_knobs.z.s1", like=True, recorded=0.7))
    looped = _c("looped_tile", "looped")
    hints = _c("cache_hints", "hint")
    listed = [*knobs, looped, hints]
    plain = [c.label for c in best_first(listed)]
    spread = [c.label for c in best_first(listed, spread=PROGRAM)]
    assert plain[:4] == ["warps 4", "warps 8", "warps 16", "looped"]  # launch knobs rank before the looped tile
    assert spread[:3] == ["warps 4", "looped", "hint"]
    assert spread[3:] == ["warps 8", "warps 16", "warps 1"]
    # another launch of the same family is a first candidate of its own
    other = _c("launch_knobs", "other launch", origin="launch_knobs.y.s1", like=False, site="k2[grid](x)")
    assert [c.label for c in best_first([*listed, other], spread=PROGRAM)][:2] == ["warps 4", "other launch"]


def test_evidence_still_goes_first_and_like_kernel_variants_keep_their_order():
    tiles = [_c("launch_config", f"tile {i}", origin="launch_config", like=True) for i in range(3)]
    measured = _c("pipelining", "measured", expected=1.3, origin="pipelining.e.s1", like=True)
    order = [c.label for c in best_first([*tiles, _c("pipelining", "catalog pipelining"), measured], spread=PROGRAM)]
    assert order == ["measured", "tile 0", "tile 1", "tile 2", "catalog pipelining"]
    assert not uninformed(tiles[0]) and uninformed(_c("x", "y")) and uninformed(_c("x", "y", origin="s", like=False))
    assert not uninformed(measured) and uninformed(_c("x", "y", like=True, recorded=1.3, expected=1.001))


def test_a_family_at_every_load_of_one_kernel_takes_one_turn_there():
    # cache hints at both loads of kernel k, one kernel: the second load's hint takes the family's second turn there
    hints = [
        _c("cache_hints", f"hint {v}", site=f"{v} = tl.load({x})", function="k") for v, x in (("a", "x"), ("b", "y"))
    ]
    other_kernel = _c("cache_hints", "hint k2", site="tl.store(x, tl.load(x) * 2)", function="k2")
    loop = _c("pipelining", "pipelined", site="for i in range(n):", function="k")
    order = [c.label for c in best_first([*hints, other_kernel, loop], spread=PROGRAM)]
    # another kernel's first hint is a first turn of its own; the second load's hint comes after every first turn
    assert order == ["pipelined", "hint a", "hint k2", "hint b"]
    # without the program nothing is spread: the families' rank, then proposal order
    assert [c.label for c in best_first([*hints, other_kernel, loop])] == ["pipelined", "hint a", "hint b", "hint k2"]
