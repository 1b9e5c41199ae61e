"""A self-reference workload on a real GPU: its reference process is forked before CUDA is up in the judge (the
correctness gate, and the profile gate's timed-output check), so it runs the original program on the GPU."""

import importlib.util

import pytest

from klineage.check import check
from klineage.program import Program, load_program
from klineage.reference import load_self_reference
from tests.conftest import FIXTURES

pytestmark = pytest.mark.gpu
FIXTURE = FIXTURES / "self_reference"


@pytest.fixture
def settings(gpu_home):
    from klineage.config import Settings

    return Settings(data_dir=gpu_home, use_cache=False, seeds=2)


def test_a_self_reference_passes_all_gates_and_a_changed_copy_fails(settings, sandbox):
    original = load_program(FIXTURE / "needs_cuda.py")
    wl = load_self_reference(FIXTURE / "inputs.py", original, settings.data_dir)
    report = check(wl, original, settings, "cuda", sandbox=sandbox)
    assert [v.status for v in report.verdicts] == ["pass"] * 3, [(v.gate, v.code, v.reason) for v in report.verdicts]
    wrong = Program("wrong", original.source.replace("* 2 + 1", "* 2 + 1.5"))
    verdict = check(wl, wrong, settings, "cuda", ("correctness",), sandbox).verdicts[0]
    assert (verdict.status, verdict.code) == ("fail", "mismatch")


@pytest.mark.skipif(importlib.util.find_spec("flag_gems") is None, reason="needs FlagGems")
def test_flag_gems_softmax_starts_against_itself(settings, sandbox, monkeypatch):
    from klineage.bench.suites import wild_instances
    from klineage.suites import wild
    from klineage.workload import load_workload

    monkeypatch.setenv("GEMS_VENDOR", "nvidia")
    (kernel,) = [k for k in wild.catalogue() if k.name == "gems_softmax"]
    (inst,), _ = wild_instances(settings, (kernel,))
    report = check(load_workload(inst.workload), inst.start, settings, "cuda", sandbox=sandbox)
    assert [v.status for v in report.verdicts] == ["pass"] * 3, [(v.gate, v.code, v.reason) for v in report.verdicts]
