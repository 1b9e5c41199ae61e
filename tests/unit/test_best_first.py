"""best_first's order: evidence first, then the families' forward rank; with `spread`, a family's second candidate
that no evidence speaks for waits behind every other family's first."""

from klineage.proposers.base import Candidate, best_first, uninformed


def _c(transform, label, expected=1.0, origin="catalog", like=None, function="k"):
    transfer = {} if like is None else {"like_kernel": like}
    return Candidate(label, origin, transform, "m", function, {"l": label}, expected, "", (), None, "", transfer)


def test_spread_puts_every_family_first_candidate_before_a_second_variant_of_one():
    knobs = [_c("launch_knobs", f"warps {w}", origin="launch_knobs.x.s1", like=False) for w in (4, 8, 16)]
    looped = _c("looped_tile", "looped")
    hints = _c("cache_hints", "hint")
    listed = [*knobs, looped, hints]
    plain = [c.label for c in best_first(listed)]
    spread = [c.label for c in best_first(listed, spread=True)]
    assert plain[:3] == ["warps 4", "warps 8", "warps 16"]  # launch knobs rank before the looped tile
    assert spread[:3] == ["warps 4", "looped", "hint"]
    assert spread[3:] == ["warps 8", "warps 16"]


def test_evidence_still_goes_first_and_like_kernel_variants_keep_their_order():
    tiles = [_c("launch_config", f"tile {i}", origin="launch_config", like=True) for i in range(3)]
    measured = _c("pipelining", "measured", expected=1.3, origin="pipelining.e.s1", like=True)
    order = [c.label for c in best_first([*tiles, _c("pipelining", "catalog pipelining"), measured], spread=True)]
    assert order == ["measured", "tile 0", "tile 1", "tile 2", "catalog pipelining"]
    assert not uninformed(tiles[0]) and uninformed(_c("x", "y")) and uninformed(_c("x", "y", origin="s", like=False))
