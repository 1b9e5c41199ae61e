"""Every naive program of the held-out suite passes the compile and correctness gates on the CPU (Triton
interpreter, tiny cases), and no held-out workload's check is weak (zeros, a constant, an input or the mean)."""

import pytest

from klineage.audit import audit
from klineage.check import check
from klineage.program import load_program
from klineage.suites import suite_instances
from klineage.workload import load_workload

pytestmark = pytest.mark.interpreter

PAIRS = suite_instances("heldout")
IDS = [workload.parent.name for workload, _ in PAIRS]


@pytest.mark.parametrize("workload, program", PAIRS, ids=IDS)
def test_naive_program_passes(workload, program, settings, sandbox):
    wl = load_workload(workload)
    report = check(wl, load_program(program), settings, "cpu", ("compile", "correctness"), sandbox)
    compile_v, correct_v = report.verdicts
    assert compile_v.passed, compile_v.reason
    assert compile_v.metrics["specializations"] >= 1
    assert correct_v.passed, f"{correct_v.code}: {correct_v.reason} ({correct_v.evidence.get('trial')})"
    assert correct_v.metrics["trials"] >= settings.seeds + len(wl.check_cases("cpu"))


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
