"""config_knobs through the gates on the CPU: an autotuner over a config list its module builds at run time (as
FlagGems's libtuner reads its tuning files) compiles for sm_90 at the warps the rewrite set, every config, and
computes what it computed before."""

import pytest

from klineage.check import check
from klineage.program import Program, load_program
from klineage.transforms.config_knobs import ConfigKnobs
from klineage.workload import load_workload
from tests.conftest import FIXTURES

pytestmark = pytest.mark.interpreter

LITERAL = """configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=16),
    ],"""
TUNED = '''

def _tuned(name):
    """The configs a library's tuning file would hold for `name`."""
    return [triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((256, 2), (1024, 4), (2048, 8), (4096, 16))]

'''


def _run_time_list() -> Program:
    """The autotuned row max with its configs built at run time."""
    source = load_program(FIXTURES / "optimize" / "rowmax_autotuned.py").source
    assert LITERAL in source
    source = source.replace(LITERAL, 'configs=_tuned("rowmax"),')
    return Program("rowmax_run_time_configs", source.replace("\n\n@triton.autotune", TUNED + "\n@triton.autotune"))


def _warps(report) -> set[str]:
    compile_v = report.verdict("compile")
    assert compile_v.passed, compile_v.reason
    return {s["specialization"].split(" warps=")[1].split()[0] for s in compile_v.evidence["specializations"]}


def test_the_warps_set_on_a_run_time_config_list_are_what_compiles_and_the_result_is_unchanged(settings, sandbox):
    workload = load_workload(FIXTURES / "optimize" / "rowmax_workload.py")
    start = _run_time_list()
    t = ConfigKnobs()
    (site,) = t.optimize_sites(start.source)
    rewritten = start.with_source("program", t.optimize(start.source, site, {"num_warps": "8"}))
    gates = ("compile", "correctness")
    before, after = (check(workload, p, settings, "cpu", gates, sandbox) for p in (start, rewritten))
    assert before.passed and after.passed, (before.verdicts, after.verdicts)
    assert _warps(before) == {"2", "4", "8", "16"}  # the tuning list's own
    assert _warps(after) == {"8"}  # every config at the warps the rewrite set
