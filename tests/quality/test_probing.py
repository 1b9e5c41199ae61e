"""Condition probing on the CPU: a second planted expert (tests/fixtures/probed) whose optimizations each have a
condition only a probe can show: autotune on an atomic-accumulating kernel (ablation of its reset_to_zero), an
in-place write (a caller that reads its input again), an early exit for fully masked rows (the workload's own probe
case), an fp32 upcast (float16 inputs). Mining must accept all four, probing must back each with its
counterexample, and the library built from both planted experts must show them, with a guard skill."""

import json

import pytest

from klineage.library import Library

pytestmark = pytest.mark.interpreter

# (transform, predicate) -> (status, form the counterexample breaks, gate codes it may show)
EXPECTED = {
    ("autotune_single_config", "idempotent_launch"): ("condition", "optimized", {"mismatch"}),
    ("fp32_upcast", "dtype_fp16"): ("required", "simple", {"mismatch"}),
    ("inplace_aliasing", "no_aliasing"): ("condition", "optimized", {"input_mutated"}),
    ("work_skipping", "fully_masked_rows"): ("required", "simple", {"nan_mismatch", "mismatch"}),
}


def backed(skills) -> dict[tuple[str, str], dict]:
    """(transform, predicate) -> failure record, for every condition a counterexample backs."""
    return {(s.transform["id"], f["violated"]): f for s in skills for f in s.failures if s.kind == "optimization"}


def test_every_planted_optimization_is_accepted(probed):
    _, lineage, _ = probed
    assert lineage.finished and not lineage.rejected
    assert [s.transform for s in lineage.accepted] == [
        "autotune_single_config",
        "fp32_upcast",
        "inplace_aliasing",
        "work_skipping",
    ]


def test_each_condition_is_backed_by_its_counterexample(probed):
    _, _, skills = probed
    found = backed(skills)
    assert set(found) == set(EXPECTED)
    for key, (status, breaks, codes) in EXPECTED.items():
        failure = found[key]
        assert failure["breaks"] == breaks and failure["code"] in codes, (key, failure)
        (skill,) = [s for s in skills if s.transform["id"] == key[0]]
        (condition,) = [c for c in skill.conditions if c["predicate"] == key[1]]
        assert condition["status"] == status and condition["probe"]["name"] == failure["case"]


def test_autotune_condition_says_what_the_ablation_showed(probed):
    """The autotune skill's condition names the guard the ablation removed, and says the kernel is not idempotent:
    exactly what was shown, not a claim that autotune itself broke."""
    _, _, skills = probed
    (autotune,) = [s for s in skills if s.transform["id"] == "autotune_single_config"]
    (condition,) = autotune.conditions
    assert condition["probe"]["ablation"]["removed"] == 'reset_to_zero=["s_ptr"]'
    assert 'without `reset_to_zero=["s_ptr"]`' in condition["evidence"] and "not idempotent" in condition["evidence"]
    assert autotune.transform["params"]["reset_to_zero"] == '["s_ptr"]'  # the optimize direction puts it back


def test_probe_reasons_are_specific(probed):
    _, _, skills = probed
    (upcast,) = [s for s in skills if s.transform["id"] == "fp32_upcast"]
    statuses = {c["predicate"]: (c["status"], c["evidence"]) for c in upcast.conditions}
    assert statuses["dtype_bf16"] == ("not_probed", "bfloat16 is outside the workload's domain")
    (aliasing,) = [s for s in skills if s.transform["id"] == "inplace_aliasing"]
    assert "reads input 0 again" in aliasing.conditions[0]["probe"]["name"]


def test_library_holds_counterexample_backed_conditions_and_a_guard(planted, probed, tmp_path):
    """Across both planted experts: divisibility for a mask-free path, autotune on an accumulating kernel, in-place
    aliasing, a dtype and fully masked rows, each with its counterexample; the rejected step is a guard skill."""
    skills = planted[2] + probed[2]
    with Library(tmp_path / "lib") as library:
        for skill in skills:
            library.save(skill)
        stored = library.list()
        guards = library.list(kind="guard")
    assert {("divisibility_fast_path", "divisible_by_block"), *EXPECTED} <= set(backed(stored))
    assert len({s.id for s in stored if s.failures and s.kind == "optimization"}) >= 5
    assert [g.transform["id"] for g in guards] == ["fp32_upcast"]
    (guard,) = guards
    assert guard.intent.startswith("Keep this") and guard.failures[0]["gate"] == "correctness"


def test_steps_probed_side_by_side_give_the_same_conditions(probed, tmp_path, sandbox):
    """Two workers, one of them on a sandbox of its own, reach the verdicts the one-worker run reached."""
    import shutil

    from klineage.probing import probe_lineage
    from klineage.workload import load_workload
    from tests.conftest import FIXTURES

    settings, lineage, _ = probed
    home = tmp_path / "home"
    shutil.copytree(settings.data_dir, home)
    (home / "lineages" / lineage.id / "probes.json").unlink()
    again = probe_lineage(
        lineage,
        load_workload(FIXTURES / "probed" / "workload.py"),
        settings.replace(data_dir=home, probe_workers=2),
        "cpu",
        sandbox,
    )
    first = json.loads((settings.data_dir / "lineages" / lineage.id / "probes.json").read_text())
    strip = lambda rows: [(r["predicate"], r["status"], r["parent"].get("code"), r["child"].get("code")) for r in rows]
    assert {int(k): strip(v) for k, v in first.items()} == {k: strip(v) for k, v in again.items()}
    assert list(json.loads((home / "lineages" / lineage.id / "probes.json").read_text())) == sorted(first, key=int)
