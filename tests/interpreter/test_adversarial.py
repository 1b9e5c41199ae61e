"""The gates are the product's conscience: every cheating program in tests/adversarial fails for its expected
reason, and every honest control passes. GPU-only cheats (side stream, split-reduction race) run in tests/gpu.
Issue 30's attacks run as untrusted programs, each hole main leaves open a strict xfail (tests/adversarial/runner.py);
their effects on the host are checked in test_adversarial_effects.py."""

import pytest

from klineage.check import check
from klineage.gates.correctness import CHECK_PHASES
from klineage.program import load_program
from klineage.workload import load_workload
from tests.adversarial.manifest import CASES, CONTROLS, ROOT
from tests.adversarial.runner import first_failure, params, run_case

pytestmark = pytest.mark.interpreter

CPU_CASES = [c for c in CASES if not c.gpu_only and not c.issue_class]
ATTACKS = [c for c in CASES if not c.gpu_only and c.issue_class]


def test_corpus_is_large_enough():
    assert len(CASES) >= 14
    assert {c.expected[0] for c in CASES} >= {
        "torch_compute",
        "output_not_from_kernel",
        "unwritten_output",
        "stale_output",
        "input_mutated",
        "out_of_bounds_write",
        "background_thread",
        "tensor_subclass",
        "mismatch",
        "nan_mismatch",
        "shape_mismatch",
        "dtype_mismatch",
        "side_stream",
    }


def test_issue_30_attacks_cover_every_class():
    attacks = [c for c in CASES if c.issue_class]
    assert len(attacks) >= 25
    assert {c.issue_class for c in attacks} == {1, 2, 3, 4, 5}
    assert all((ROOT / c.program).exists() for c in attacks)


# not a sweep: every attack runs in the interpreter tier (about 4 s each on 2 cores), since one case cannot stand
# for holes of five kinds
@pytest.mark.parametrize("case", params(ATTACKS, "cpu"))
def test_attack_fails_with_its_code(case, settings, sandbox):
    verdict = first_failure(run_case(case, settings, "cpu", sandbox))
    assert verdict.status == "fail", f"{case.program} passed: {case.why}"
    assert verdict.code in case.expected, f"{case.program}: got {verdict.code} ({verdict.reason[:300]}); {case.why}"


@pytest.mark.sweep
@pytest.mark.parametrize("case", CPU_CASES, ids=[c.program.removeprefix("programs/") for c in CPU_CASES])
def test_cheat_fails_for_the_right_reason(case, settings, sandbox):
    report = check(
        load_workload(ROOT / case.workload),
        load_program(ROOT / case.program),
        settings,
        "cpu",
        ("correctness",),
        sandbox,
    )
    verdict = report.verdicts[0]
    assert verdict.status == "fail", f"{case.program} passed: {case.why}"
    assert verdict.code in case.expected, f"{case.program}: got {verdict.code} ({verdict.reason}); {case.why}"
    if "autotune" in case.program:  # the failure names the config that ran
        assert "BLOCK: 64" in verdict.evidence["autotune_configs"]["_softmax_kernel"]


@pytest.mark.sweep
@pytest.mark.parametrize("program, workload", CONTROLS, ids=[p for p, _ in CONTROLS])
def test_honest_control_passes(program, workload, settings, sandbox):
    report = check(load_workload(ROOT / workload), load_program(ROOT / program), settings, "cpu", sandbox=sandbox)
    assert report.passed, [(v.gate, v.code, v.reason) for v in report.verdicts]


def test_every_autotune_config_is_checked_on_every_named_case(settings, sandbox):
    """The honest autotuned control passes with each of its three configs run on the tiny and wide cases; the
    trials say which config ran."""
    workload, program = ROOT / "workloads/softmax.py", ROOT / "controls/softmax_autotuned_ok.py"
    report = check(load_workload(workload), load_program(program), settings, "cpu", ("correctness",), sandbox)
    verdict = report.verdicts[0]
    assert verdict.passed, verdict.reason
    assert verdict.metrics["autotune_configs"] == 3
    tuned = [t for t in verdict.evidence["trials"] if "autotune config" in t]
    seconds = verdict.evidence["trial_seconds"]  # where the check's time went, trial by trial
    assert len(seconds) == len(verdict.evidence["trials"]) and all(s > 0 for s in seconds)
    assert sum(seconds) <= verdict.seconds
    phases = verdict.evidence["phase_seconds"]  # and what the check spent outside its trials
    assert set(phases) == set(CHECK_PHASES) and phases["candidate_start"] > 0
    assert sum(seconds) + sum(phases.values()) <= verdict.seconds + 0.05  # each part rounded to 0.01 s
    assert sorted(tuned) == sorted(
        f"case {case}, seed 0, normal inputs, autotune config {k}" for case in ("tiny", "wide") for k in (2, 3)
    )
