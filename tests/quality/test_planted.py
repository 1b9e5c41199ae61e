"""Mining quality: a synthetic expert carrying known optimizations, each with a known condition
(tests/fixtures/planted/expert.py). Mining must recover exactly those optimizations, and probing exactly the
planted condition, with its counterexample."""

import json

import pytest

from klineage.library import Library

pytestmark = pytest.mark.interpreter

PLANTED_ACCEPTED = {"cache_hints", "int64_offsets", "launch_knobs", "divisibility_fast_path"}


@pytest.fixture(scope="module")
def mined(planted):
    """Mined and probed once per session (tests/quality/conftest.py)."""
    return planted


def test_recovers_exactly_the_planted_optimizations(mined):
    _, lineage, skills = mined
    assert lineage.finished
    assert {s.transform for s in lineage.accepted} == PLANTED_ACCEPTED
    assert len([s for s in lineage.accepted if s.transform == "cache_hints"]) == 2  # both loads carried a hint
    for skill in skills:
        assert skill.intent and skill.location["before"] and skill.location["after"]
        assert skill.provenance["expert_hash"] and skill.provenance["lineage"] == lineage.id
        (effect,) = skill.effect.values()  # filled for every skill, guards too: a measurement or why there is none
        assert effect["measured"] or effect["why"]
        assert not (skill.kind == "guard" and effect["measured"])  # a guard has no correct simple form to time


def test_probing_finds_exactly_the_planted_condition(mined):
    _, _, skills = mined
    found = {(s.transform["id"], c["predicate"]) for s in skills for c in s.conditions if c["status"] == "condition"}
    assert found == {("divisibility_fast_path", "divisible_by_block")}
    (fast_path,) = [s for s in skills if s.transform["id"] == "divisibility_fast_path"]
    (failure,) = fast_path.failures
    assert failure["violated"] == "divisible_by_block" and failure["code"] in ("unwritten_output", "mismatch")
    assert "small blocks" in failure["case"]  # the 1152-column counterexample, not the odd sizes
    # GPU-only predicates are reported as not probed, never as "not a condition"
    (int64,) = [s for s in skills if s.transform["id"] == "int64_offsets"]
    assert [c["status"] for c in int64.conditions] == ["not_probed"]
    # so are hints the interpreter ignores: its parent and child run identically there
    for hint in [s for s in skills if s.transform["id"] == "cache_hints"]:
        assert {c["status"] for c in hint.conditions} == {"not_probed"}
        assert all("interpreter ignores" in c["evidence"] for c in hint.conditions)


def test_the_planted_guard_is_found_once(mined):
    """Removing the fp32 accumulation overflows float16 on scaled inputs: rejected, once (not retried after
    unrelated steps), and turned into a guard skill carrying the verdict."""
    _, lineage, skills = mined
    assert [s.transform for s in lineage.rejected] == ["fp32_upcast"]
    (guard,) = [s for s in skills if s.kind == "guard"]
    assert guard.transform["id"] == "fp32_upcast" and guard.failures[0]["code"] in ("mismatch", "nan_mismatch")
    assert guard.intent.startswith("Keep this")


def test_lineage_is_stored_content_addressed(mined):
    settings, lineage, _ = mined
    root = settings.data_dir / "lineages" / lineage.id
    stored = json.loads((root / "lineage.json").read_text())
    assert [s["child"] for s in stored["steps"]] == [s.child for s in lineage.steps]
    for step in lineage.steps:
        assert (root / "sources" / step.child / "program.py").is_file()


def test_library_filters_and_skill_md_export(mined, tmp_path):
    _, _, skills = mined
    with Library(tmp_path / "lib") as library:
        for skill in skills:
            library.save(skill)
        assert {s.transform["id"] for s in library.list(condition="divisible_by_block")} == {"divisibility_fast_path"}
        assert all(s.family == 1 for s in library.list(family=1))
        written = library.export_skill_md(tmp_path / "export")
    assert len(written) == len(skills)
    for path in written:
        text = path.read_text()
        assert text.startswith("---\nname: ")
        front = text.split("---\n")[1]
        name = front.splitlines()[0].removeprefix("name: ")
        assert name == path.parent.name and len(name) <= 64 and name == name.lower() and "--" not in name
        assert "\ndescription: " in front
