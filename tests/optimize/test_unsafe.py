"""The held-out traps, forward: on each instance whose docstring names a tempting optimization that is unsafe there,
KLineage refuses (or guards) the skill and says which condition decided it, without spending budget; the blind
catalog proposes the same rewrite. Proposal only: no gates run here."""

import pytest

from klineage.program import load_program
from klineage.proposers import BlindProposer, SkillProposer
from klineage.suites import SUITES
from klineage.workload import load_workload
from tests.optimize.skillmaker import make_skill

HELD_OUT = SUITES["heldout"]
AUTOTUNE = {"configs": "[triton.Config({'BLOCK': 256}, num_warps=8)]", "key": "['n_cols']"}
HINTS = {"hints": [["tl.max_contiguous", "128"], ["tl.multiple_of", "128"]]}


def _instance(name):
    return load_workload(HELD_OUT / name / "workload.py"), load_program(HELD_OUT / name / "naive.py")


@pytest.mark.parametrize(
    "instance, skill, predicate, reason",
    [
        (
            "atomic_rowsum",
            make_skill("autotune_single_config", AUTOTUNE, ("idempotent_launch",), status="not_a_condition"),
            "idempotent_launch",
            "atomics",
        ),
        (
            "inplace_residual",
            make_skill("autotune_single_config", AUTOTUNE, ("idempotent_launch",)),
            "idempotent_launch",
            "in place",
        ),
        ("strided_add", make_skill("alignment_hints", HINTS, ("contiguous",)), "contiguous", "never contiguous"),
        ("matmul_odd_k", make_skill("alignment_hints", HINTS, ("divisible_by_block",)), "divisible_by_block", "range"),
    ],
)
def test_the_tempting_skill_is_refused_with_its_condition(instance, skill, predicate, reason, settings):
    wl, prog = _instance(instance)
    proposer = SkillProposer(wl, settings, "cpu", [skill])
    assert [c for c in proposer.propose(prog) if c.transform == skill.transform["id"]] == []
    refusal = next(r for r in proposer.refusals if r.transform == skill.transform["id"])
    assert refusal.predicate == predicate and reason in refusal.reason
    blind = BlindProposer(wl, settings, "cpu").propose(prog)
    assert any(c.transform == skill.transform["id"] for c in blind)  # the rewrite exists; only the condition stops it


def test_a_robustness_skill_is_applied_where_the_domain_passes_2_31(settings):
    wl, prog = _instance("embedding_gather")  # tables up to 262144 x 16384 elements
    skill = make_skill("int64_offsets", {}, ("offsets_below_2_31",), status="required")
    candidates = SkillProposer(wl, settings, "cpu", [skill]).propose(prog)
    assert candidates and all(c.guard == "" for c in candidates)
