"""looped_tile through the gates on the CPU: the looped twin of a one-tile kernel, forced to sweep its dimension in
tiles narrower than it (the interpreter's tiny cases fit one tile, where the dispatch keeps the original), passes
the compile gate for sm_90 and the correctness gate; the same twin with its last pass's first tile skipped fails."""

import pytest

from klineage.check import check
from klineage.program import Program, load_program
from klineage.sass import kernel_metrics
from klineage.suites import suite_instances
from klineage.transforms.looped_tile import LoopedTile
from klineage.workload import load_workload
from tests.sm90 import compile_sm90, load_module

pytestmark = pytest.mark.interpreter

EXAMPLES = "src/klineage/examples"
CASES = {
    "rmsnorm": (f"{EXAMPLES}/rmsnorm/workload.py", f"{EXAMPLES}/rmsnorm/naive.py"),
    "softmax": (f"{EXAMPLES}/softmax/workload.py", f"{EXAMPLES}/softmax/naive.py"),
    **{w.parent.name: (w, p) for w, p in suite_instances("heldout") if w.parent.name == "softmax_scale_mask"},
}


def _forced(source: str) -> str:
    """The rewrite with its dispatch always taking the twin, in tiles of 4 elements (several a row)."""
    t = LoopedTile()
    (site,) = t.optimize_sites(source)
    out = t.optimize(source, site, {})
    cap = next(line for line in out.splitlines() if line.strip().startswith("if ") and "<= 1024 *" in line)
    forced = out.replace(cap, cap[: cap.index("if ") + 3] + "False:")
    swept = forced.replace("256 * 4", "4").replace("256 * 8", "4")
    assert swept != forced
    return swept


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_twin_sweeping_narrow_tiles_passes_and_one_that_skips_a_tile_fails(name, settings, sandbox):
    workload, program = CASES[name]
    wl = load_workload(workload)
    source = load_program(program).source
    twin = _forced(source)
    report = check(wl, Program(name, twin), settings, "cpu", ("compile", "correctness"), sandbox)
    assert all(v.passed for v in report.verdicts), [(v.code, v.reason) for v in report.verdicts]
    skipping = twin.replace("in range(0, ", "in range(4, ")  # the last pass starts past its first tile
    assert skipping != twin
    report = check(wl, Program(name, skipping), settings, "cpu", ("compile", "correctness"), sandbox)
    assert not report.verdicts[-1].passed


def test_the_twin_of_a_whole_group_tile_compiles_without_spilling(tmp_path):
    """Static, no GPU: the group norm written in test_looped_tile's form, at a group of 32 channels x 4096 positions
    (FlagGems's bench case): the one-tile kernel spills at 4 warps, its twin in 1024-element tiles does not."""
    from tests.transforms.test_looped_tile import SIMPLE

    t = LoopedTile()
    module = load_module(t.optimize(SIMPLE, t.optimize_sites(SIMPLE)[0], {}), tmp_path, "group_looped")
    signature = {"X": "*fp32", "Y": "*fp32", "Mean": "*fp32", "group_size": "i32", "HW": "i32", "eps": "fp32"}
    spills = {}
    for name, hw in (("group_kernel", 4096), ("group_kernel_looped", 32)):
        compiled = compile_sm90(
            getattr(module, name),
            {**signature, "BLOCK_G": "constexpr", "BLOCK_HW": "constexpr"},
            {"BLOCK_G": 32, "BLOCK_HW": hw},
            num_warps=4,
        )
        spills[name] = kernel_metrics(compiled, "sm_90").get("spill_store_bytes")
    assert spills["group_kernel"] > 0 and spills["group_kernel_looped"] == 0, spills
