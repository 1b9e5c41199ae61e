"""Forward quality: skills mined from the planted expert, applied to that expert's simplest form on the CPU, give
back the planted optimizations that are valid on the workload's domain and need no timer, and refuse, with the
deciding condition, the one whose probe found a counterexample (the fast path behind the wrong divisibility test)
and the robustness skill the domain does not need."""

import pytest

from klineage.mine import LineageStore
from klineage.optimize import optimize, report
from klineage.proposers import SkillProposer
from klineage.workload import load_workload
from tests.conftest import FIXTURES

pytestmark = pytest.mark.interpreter


@pytest.fixture(scope="module")
def forward(planted, sandbox):
    settings, lineage, skills = planted
    store = LineageStore(settings.data_dir / "lineages" / lineage.id)
    start = store.load_program(lineage.simplest, lineage.expert)
    workload = load_workload(FIXTURES / "planted" / "workload.py")
    proposer = SkillProposer(workload, settings, "cpu", skills)
    return start, optimize(workload, start, proposer, settings, "cpu", budget=10, sandbox=sandbox)


def test_valid_planted_optimizations_come_back(forward):
    start, trajectory = forward
    kept = sorted(a.candidate.transform for a in trajectory.attempts if a.kept)
    assert kept == ["cache_hints"]  # the planted num_warps is a number: on the CPU it waits for a timer
    assert 'eviction_policy="evict_first"' in trajectory.best.source
    assert all(a.outcome != "failed_gate" for a in trajectory.attempts)  # nothing unsafe was tried


def test_unsafe_and_unneeded_skills_are_refused_with_their_condition(forward):
    _, trajectory = forward
    refused = {(r.transform, r.predicate) for r in trajectory.refusals}
    assert ("divisibility_fast_path", "divisible_by_block") in refused
    assert ("int64_offsets", "offsets_below_2_31") in refused
    fast = next(r for r in trajectory.refusals if r.transform == "divisibility_fast_path")
    assert "range" in fast.reason  # the domain's column counts are a range: some are not multiples of the block
    assert "divisible_by_block" in report(trajectory)
