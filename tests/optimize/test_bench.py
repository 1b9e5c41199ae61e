"""The evaluation harness on the CPU: suites, a small methods x instance run, the stamped report, and the escape
re-check (hidden seeds and in-domain probe cases) that catches a final program the run's own checks passed."""

import json

import pytest

from klineage.bench import escapes, markdown, run_bench, suite, write_report
from klineage.library import Library
from klineage.program import Program, load_program
from klineage.workload import load_workload
from tests.conftest import FIXTURES
from tests.optimize.skillmaker import make_skill

pytestmark = pytest.mark.interpreter
OPT = FIXTURES / "optimize"


def test_naive_suite_pairs_each_naive_program_with_its_tuned_expert(settings):
    found = {i.name: i for i in suite("naive", settings)}
    assert {"softmax", "rmsnorm", "matmul"} <= set(found)
    assert found["matmul"].expert is not None and "32" in found["matmul"].start.source


def test_experts_suite_is_empty_without_lineages(settings):
    assert suite("experts", settings) == []


def test_small_run_writes_a_stamped_report_and_invents_no_time(settings, tmp_path):
    with Library(tmp_path / "lib") as lib:
        lib.save(make_skill("launch_knobs", {"num_warps": "8"}, ("shared_memory_fits",)))
    softmax = [i for i in suite("naive", settings) if i.name == "softmax"]
    result = run_bench(softmax, ["klineage", "autotune"], 3, settings, "cpu", tmp_path / "lib")
    assert result["stamp"]["timed"] is False and result["stamp"]["budget"] == 3 and result["stamp"]["commit"]
    rows = {r["method"]: r for r in result["rows"]}
    assert rows["klineage"]["kept"] == 1 and rows["klineage"]["escapes"] == []
    assert rows["autotune"]["kept"] == 0  # nothing to decide launch configurations on without timing
    assert all(r["speedup"] is None and r["vs_torch_compile"] is None for r in result["rows"])
    text = markdown(result)
    assert "No GPU: nothing was timed" in text and "| klineage |" in text
    paths = write_report(result, tmp_path / "report")
    assert json.loads(paths["json"].read_text())["summary"]["klineage"]["escapes"] == 0


def test_escape_recheck_catches_a_program_wrong_only_off_the_checked_sizes(settings, sandbox):
    wl = load_workload(OPT / "rowsum_workload.py")
    start = load_program(OPT / "rowsum_naive.py")
    # passes the check cases (N=200, a multiple of 8) but drops a row's tail when N is not a multiple of 8
    wrong = Program("wrong", start.source.replace("mask=cols < N,", "mask=cols < N - N % 8,"))
    assert wrong.source != start.source
    found = escapes(wl, start, wrong, settings, "cpu", sandbox)
    assert found and found[0]["check"].startswith("divisible_by_block") and found[0]["code"] == "mismatch"
    assert escapes(wl, start, start, settings, "cpu", sandbox) == []
