"""Transfer by likeness in the skill proposer (klineage.likeness, issue 31 item 6): a skill's expected effect is
discounted by how unlike its expert's context the target's is; a family tuned to its kernel counts only from a like
kernel; every candidate says where it came from, in the trajectory and in the report. Nothing here runs a program."""

import math
from dataclasses import replace

import pytest

from klineage.likeness import NO_LIKE_KERNEL
from klineage.optimize import SkillProposer, features, report
from klineage.program import load_program
from klineage.trajectory import Attempt, Trajectory
from klineage.workload import load_workload
from tests.conftest import EXAMPLES
from tests.optimize.skillmaker import make_skill

# the cross-entropy expert's construct flags as mined (Liger's module), its regime left unknown: a third-party
# target without the roofline extensions had the same regime "memory" before likeness (issue 31)
CROSS_ENTROPY = {
    "dot": 0.0,
    "reduction": 1.0,
    "exp": 1.0,
    "atomic": 0.0,
    "loop": 1.0,
    "mask": 1.0,
    "where": 1.0,
    "fp32_cast": 1.0,
    "rsqrt": 0.0,
    "two_d": 0.0,
    "dtype_float32": 0.0,
    "dtype_float16": 0.0,
    "dtype_bfloat16": 1.0,
}
GROUPED = {"GROUP_SIZE_M": "8", "num_pid_in_group": "per_group", "group_id": "group"}


@pytest.fixture(scope="module")
def matmul():
    wl, prog = load_workload(EXAMPLES / "matmul" / "workload.py"), load_program(EXAMPLES / "matmul" / "naive.py")
    return wl, prog, features(prog, wl)


def _skill(transform, params, speedup, context, rank, name):
    skill = make_skill(transform, params, (), speedup, features=context, tile_rank=rank)
    expert = "liger" if name == "cross_entropy" else "expert"
    return replace(skill, id=f"{transform}.{name}", provenance={**skill.provenance, "workload": name, "expert": expert})


def test_the_expected_effect_is_discounted_by_the_likeness(settings, matmul):
    wl, prog, here = matmul
    like = _skill("grouped_ordering", GROUPED, 1.5, here, 3, "matmul")
    unlike = _skill("grouped_ordering", GROUPED, 1.5, CROSS_ENTROPY, 1, "cross_entropy")
    proposer = SkillProposer(wl, settings, "cpu", [like, unlike])
    proposer.propose(prog)
    assert proposer.likeness(like).value == 1.0 and proposer.expected(like) == pytest.approx(1.5)
    value = proposer.likeness(unlike).value
    assert 0 < value < 0.25  # another operator class, tile rank and constructs
    assert proposer.expected(unlike) == pytest.approx(math.exp(math.log(1.5) * value))
    assert 1.0 < proposer.expected(unlike) < proposer.expected(like)


def test_a_launch_knob_from_a_cross_entropy_like_kernel_ranks_below_a_structural_skill_on_a_matmul(settings, matmul):
    """The cross-entropy lineage's warps (x1.5 here, more than the structural skill's x1.03) were measured on a
    reduction: on the matmul they are no evidence, rank as uninformed (x1.0) and say so; the same knobs mined on a
    matmul keep their evidence and rank first."""
    wl, prog, here = matmul
    grouped = _skill("grouped_ordering", GROUPED, 1.03, here, 3, "matmul")
    knobs = _skill("launch_knobs", {"num_warps": "8"}, 1.5, CROSS_ENTROPY, 1, "cross_entropy")
    proposer = SkillProposer(wl, settings, "cpu", [knobs, grouped])
    ranked = proposer.propose(prog)
    first = ranked[0]
    assert first.transform == "grouped_ordering" and first.expected == pytest.approx(1.03)
    warps = [c for c in ranked if c.origin == knobs.id]
    assert warps and all(c.expected == 1.0 for c in warps)
    assert ranked.index(warps[0]) > 0
    transfer = warps[0].transfer
    assert transfer["note"] == NO_LIKE_KERNEL and transfer["recorded"] == 1.5 and transfer["expected"] == 1.0
    assert transfer["phrase"].startswith("from cross_entropy/liger (reduction) to matmul, likeness 0.")
    assert not transfer["like_kernel"] and transfer["another_operator"]
    # the control: the same knobs mined on a matmul are evidence there
    mined_here = _skill("launch_knobs", {"num_warps": "8"}, 1.5, here, 3, "matmul")
    ranked = SkillProposer(wl, settings, "cpu", [mined_here, grouped]).propose(prog)
    assert ranked[0].origin == mined_here.id and ranked[0].expected == pytest.approx(1.5)
    assert "note" not in ranked[0].transfer and ranked[0].transfer["phrase"] == "likeness 1.00"


def test_the_report_and_the_json_say_where_a_skill_came_from(settings, matmul):
    wl, prog, here = matmul
    unlike = _skill("grouped_ordering", GROUPED, 1.5, CROSS_ENTROPY, 1, "cross_entropy")
    knobs = _skill("launch_knobs", {"num_warps": "8"}, 1.5, CROSS_ENTROPY, 1, "cross_entropy")
    ranked = SkillProposer(wl, settings, "cpu", [unlike, knobs]).propose(prog)
    moved = next(c for c in ranked if c.origin == unlike.id)
    warps = next(c for c in ranked if c.origin == knobs.id)
    unmeasured = {"measured": False, "why": "test"}
    attempts = [Attempt(2, moved, True, "unmeasured", [], unmeasured), Attempt(3, warps, False, "failed_gate", [], {})]
    t = Trajectory(
        "klineage", wl.name, prog.name, "cpu", 4, 3, attempts, [], prog, prog, None, None, None, "budget spent", False,
        {}, "today", 1.0,
    )  # fmt: skip
    text = report(t)
    like = moved.transfer["likeness"]
    kept = f"; from cross_entropy/liger (reduction) to matmul, likeness {like:.2f}, expected x{moved.expected:.3f}"
    assert kept + " (recorded x1.500)" in text
    assert "expected x1.000 (recorded x1.500): no evidence from a like kernel" in text
    d = t.as_dict()["attempts"][0]["candidate"]["transfer"]
    assert d["likeness"] == like and d["recorded"] == 1.5 and d["expected"] == pytest.approx(moved.expected, abs=1e-4)
    assert d["source"]["operator"] == "reduction" and d["target"]["operator"] == "matmul"
    assert set(d["factors"]) == {"operator", "constructs", "bound", "dtype", "tile"}


def test_the_families_tuned_to_their_kernel_are_named_on_the_family():
    from klineage.proposers.base import families

    tuned = {tid for tid, t in families().items() if t.tuned_to_kernel}
    assert tuned == {"launch_knobs", "config_knobs", "autotune_single_config", "pipelining"}
