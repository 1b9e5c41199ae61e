"""Every naive program of the held-out suite passes the compile and correctness gates on the CPU (Triton
interpreter, tiny cases), and no held-out workload's check is weak (zeros, a constant, an input or the mean)."""

import pytest

from klineage.audit import audit
from klineage.check import check
from klineage.program import load_program
from klineage.suites import suite_instances
from klineage.workload import load_workload
from tests.sm90 import compile_sm90, load_module

pytestmark = pytest.mark.interpreter

PAIRS = suite_instances("heldout")
IDS = [workload.parent.name for workload, _ in PAIRS]


@pytest.mark.sweep
@pytest.mark.parametrize("workload, program", PAIRS, ids=IDS)
def test_naive_program_passes(workload, program, settings, sandbox):
    wl = load_workload(workload)
    report = check(wl, load_program(program), settings, "cpu", ("compile", "correctness"), sandbox)
    compile_v, correct_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert compile_v.metrics["specializations"] >= 1
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason} ({correct_v.evidence.get('trial')})"
    assert correct_v.metrics["trials"] >= settings.seeds + len(wl.check_cases("cpu"))


@pytest.mark.sweep
@pytest.mark.parametrize("workload", [w for w, _ in PAIRS], ids=IDS)
def test_check_is_not_weak(workload, settings, sandbox):
    report = audit(load_workload(workload), settings, sandbox)
    assert not report.error, report.error
    assert not report.passing_fakes, f"fakes that pass the check: {report.passing_fakes}"


WHOLE_ROW = ["layernorm", "log_softmax", "kl_div"]


@pytest.mark.parametrize("name", WHOLE_ROW)
def test_one_tile_twin_passes_and_a_truncating_one_fails(name, settings, sandbox, tmp_path):
    """whole_row_tile's generated twin (each sweep run once) is right on the held-out row kernels; the same twin
    launched with a tile narrower than the row (the dispatch's guard dropped) silently truncates rows, and the
    correctness gate says so."""
    from klineage.program import Program
    from klineage.transform import load_families

    load_families()
    from klineage.transforms.whole_row_tile import WholeRowTile

    workload, program = next((w, p) for w, p in PAIRS if w.parent.name == name)
    wl = load_workload(workload)
    source = program.read_text()
    (site,) = [s for s in WholeRowTile().optimize_sites(source) if s.params["width"] == "n_cols"]
    twin = WholeRowTile().optimize(source, site, {})
    report = check(wl, Program(name, twin), settings, "cpu", ("compile", "correctness"), sandbox)
    assert all(v.passed for v in report.verdicts), [v.reason for v in report.verdicts]
    truncating = twin.replace("row_tile = triton.next_power_of_2(n_cols)", "row_tile = 16")
    assert truncating != twin
    report = check(wl, Program(name, truncating), settings, "cpu", ("compile", "correctness"), sandbox)
    assert not report.verdicts[-1].passed


@pytest.mark.parametrize(
    "name, kernel, signature, loads",
    [
        ("log_softmax", "log_softmax_kernel", {"x_ptr": "*fp32", "y_ptr": "*fp32"}, 1),
        ("kl_div", "kl_rows_kernel", {"q_ptr": "*bf16", "p_ptr": "*bf16", "row_kl_ptr": "*fp32"}, 2),
    ],
)
def test_the_twin_reads_each_input_row_once(name, kernel, signature, loads, tmp_path):
    """Static, no GPU: compiled for sm_90 at the bench case's 32768-wide tile, the twin of log-softmax loads x once
    and KL divergence's twin q and p once each (before `one_load`, 2 and 4 loads: their last sweep fills masked
    lanes with 0 where the first two use -inf)."""
    from klineage.transform import load_families

    load_families()
    from klineage.transforms.whole_row_tile import WholeRowTile

    _, program = next((w, p) for w, p in PAIRS if w.parent.name == name)
    source = program.read_text()
    (site,) = [s for s in WholeRowTile().optimize_sites(source) if s.params["width"] == "n_cols"]
    module = load_module(WholeRowTile().optimize(source, site, {}), tmp_path, f"{name}_twin")
    twin = getattr(module, kernel + "_one_tile")
    ints = {p: "i32" for p in twin.arg_names if p not in signature and p != "BLOCK"}
    compiled = compile_sm90(twin, {**signature, **ints, "BLOCK": "constexpr"}, {"BLOCK": 32768}, num_warps=32)
    assert compiled.asm["ttgir"].count("tt.load") == loads


ONE_ID = ("+ tl.arange(0, BLOCK_ROW)[:, None]", "+ 0 * tl.arange(0, BLOCK_ROW)[:, None]")
WHOLE_BLOCK = ("axis=1, keep_dims=True", "axis=None, keep_dims=True")


@pytest.mark.parametrize(
    "name, wrong",
    [("rope", ONE_ID), ("mse_loss", ONE_ID), ("softmax_scale_mask", WHOLE_BLOCK)],
    ids=["rope", "mse_loss", "softmax_scale_mask"],
)
def test_rows_twin_passes_and_a_broken_one_fails(name, wrong, settings, sandbox):
    """rows_per_program's generated twin (BLOCK_ROW rows per program, masked to the live rows) is right on the
    held-out kernels that handle a narrow row or block per program; their tiny cases take the twin, with the last
    block partly past the end. A twin whose rows all take the block's first id (rows left unwritten), or whose
    reductions span the whole block (rows mixing their statistics), fails the correctness gate."""
    from klineage.program import Program
    from klineage.transform import load_families

    load_families()
    from klineage.transforms.rows_per_program import RowsPerProgram

    workload, program = next((w, p) for w, p in PAIRS if w.parent.name == name)
    wl = load_workload(workload)
    source = program.read_text()
    (site,) = [s for s in RowsPerProgram().optimize_sites(source) if s.params.get("kernel")]
    twin = RowsPerProgram().optimize(source, site, {})
    report = check(wl, Program(name, twin), settings, "cpu", ("compile", "correctness"), sandbox)
    assert all(v.passed for v in report.verdicts), [v.reason for v in report.verdicts]
    assert any(f.endswith("_rows") for f in report.verdicts[-1].evidence["functions_run"])  # the twin ran
    broken = twin.replace(*wrong)
    assert broken != twin
    report = check(wl, Program(name, broken), settings, "cpu", ("compile", "correctness"), sandbox)
    assert not report.verdicts[-1].passed


def test_the_check_records_what_each_launch_asked_for(settings, sandbox):
    """RoPE's tile is computed at launch (`next_power_of_2(half)`): only the launch knows it is 16 on the tiny case
    (D = 32), over 12 programs. The rows twin asks for BLOCK_ROW 16 rows of it in one program (12 rows, a grid
    lambda reading BLOCK_ROW). Optimize caps carried warps by these sizes (klineage.optimize.bench_launches)."""
    from klineage.program import Program
    from klineage.transform import load_families

    load_families()
    from klineage.transforms.rows_per_program import RowsPerProgram

    workload, program = next((w, p) for w, p in PAIRS if w.parent.name == "rope")
    wl = load_workload(workload)
    report = check(wl, load_program(program), settings, "cpu", ("correctness",), sandbox)
    assert report.verdicts[-1].evidence["launches"] == {
        "tiny": [{"kernel": "rope_kernel", "constexprs": {"BLOCK": 16}, "num_warps": None, "programs": 12}]
    }
    source = program.read_text()
    (site,) = [s for s in RowsPerProgram().optimize_sites(source) if s.params.get("kernel")]
    twin = RowsPerProgram().optimize(source, site, {}).replace("BLOCK=triton", "num_warps=2, BLOCK=triton")
    twin = Program("rope", twin)
    report = check(wl, twin, settings, "cpu", ("correctness",), sandbox)
    assert report.verdicts[-1].passed, report.verdicts[-1].reason
    assert report.verdicts[-1].evidence["launches"]["tiny"] == [
        {"kernel": "rope_kernel_rows", "constexprs": {"BLOCK_ROW": 16, "BLOCK": 16}, "num_warps": 2, "programs": 1}
    ]


@pytest.mark.parametrize("twin", [False, True], ids=["loop", "one_tile_twin"])
def test_merged_argmax_passes_and_a_last_index_merge_fails(twin, settings, sandbox):
    """merged_reductions on row argmax (its tile loop, and whole_row_tile's one-tile twin, which the tiny case
    takes): one `tl.max(..., return_indices=True)` per tile is right on the tiny case, whose rows tie on their
    maximum within a tile; the same merge with the last-index tie break (`return_indices_tie_break_left=False`)
    returns other indices and fails the check."""
    from klineage.program import Program
    from klineage.transform import load_families

    load_families()
    from klineage.transforms.merged_reductions import MergedReductions
    from klineage.transforms.whole_row_tile import WholeRowTile

    workload, program = next((w, p) for w, p in PAIRS if w.parent.name == "row_argmax")
    wl = load_workload(workload)
    merged = program.read_text()
    if twin:
        (site,) = [s for s in WholeRowTile().optimize_sites(merged) if s.params["width"] == "n_cols"]
        merged = WholeRowTile().optimize(merged, site, {})
    while sites := MergedReductions().optimize_sites(merged):
        merged = MergedReductions().optimize(merged, sites[0], {})
    assert merged.count("return_indices_tie_break_left=True)") == 1 + twin and "tl.argmax" not in merged
    report = check(wl, Program("row_argmax", merged), settings, "cpu", ("compile", "correctness"), sandbox)
    assert all(v.passed for v in report.verdicts), [v.reason for v in report.verdicts]
    ran = report.verdicts[-1].evidence["functions_run"]
    assert ("row_argmax_kernel_one_tile" in ran) == twin
    last = merged.replace("return_indices_tie_break_left=True", "return_indices_tie_break_left=False")
    report = check(wl, Program("row_argmax", last), settings, "cpu", ("compile", "correctness"), sandbox)
    assert not report.verdicts[-1].passed and report.verdicts[-1].code == "mismatch", report.verdicts[-1].reason
