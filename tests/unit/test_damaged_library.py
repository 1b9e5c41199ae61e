"""A damaged skill file is a value naming the file and what is wrong (`skills.load_skill`): listing goes on without
it and says so in one warning line, asking for it is one error line. A library whose index is missing, damaged or
out of date is re-indexed from its skill files with one warning line, never read as empty in silence."""

import json
import os
import re
from pathlib import Path

import pytest

from klineage.config import Settings
from klineage.library import Library
from klineage.skills import Skill, SkillDamage, load_skill
from klineage.workload import UserError


def skill(skill_id: str, family: int = 18, kind: str = "optimization", predicate: str = "tolerance") -> Skill:
    return Skill(
        id=skill_id,
        name=f"{skill_id} in k",
        family=family,
        kind=kind,
        intent="exp2 and rsqrt map to fast hardware instructions",
        transform={"id": "fast_math", "tag": "M", "params": {"fn": "rsqrt"}},
        location={
            "module": "program",
            "function": "k",
            "line": 9,
            "construct": "fast_math",
            "before": "a",
            "after": "b",
        },
        conditions=[{"predicate": predicate, "description": "d", "status": "not_probed", "evidence": "e"}],
        effect={"cpu": {"case": "bench", "measured": False, "why": "no GPU"}},
        failures=[],
        provenance={
            "expert": "liger",
            "expert_hash": "2a6a",
            "workload": "rmsnorm",
            "lineage": "rmsnorm-liger-cpu",
            "step": 0,
            "device": "cpu",
            "versions": {},
            "date": "2026-12-03",
        },
    )


def make_library(root, ids=("a.s0", "b.s1", "c.s2")) -> list[str]:
    with Library(root) as library:
        for i, skill_id in enumerate(ids):
            library.save(skill(skill_id, family=10 + i, kind="guard" if i == 2 else "optimization"))
    return list(ids)


def _warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


# --- one skill file -------------------------------------------------------------------------------------------------

GOOD = skill("a.s0").as_dict()


def _without(key: str) -> dict:
    return {k: v for k, v in GOOD.items() if k != key}


@pytest.mark.parametrize(
    "content, problem",
    [
        (os.urandom(600), "cannot be read|not valid JSON"),
        (json.dumps(GOOD, indent=2)[:400].encode(), "not valid JSON"),  # cut in half
        (b"", "the file is empty"),
        (json.dumps(_without("location")).encode(), "missing field location"),
        (json.dumps({**GOOD, "family": "eighteen"}).encode(), "field family is a string, expected an integer"),
        (json.dumps({**GOOD, "kind": "magic"}).encode(), "kind 'magic'"),
        (json.dumps({**GOOD, "schema": 2}).encode(), "schema 2, this KLineage reads schema 1"),
        (json.dumps({**GOOD, "extra": 1}).encode(), "unknown field extra"),
        (json.dumps({**GOOD, "transform": {"id": "x"}}).encode(), "transform lacks tag, params"),
        (json.dumps({**GOOD, "conditions": [{"predicate": "p"}]}).encode(), r"conditions\[0\] lacks description"),
        (json.dumps({**GOOD, "effect": {"H200": {"measured": True}}}).encode(), "marked measured but lacks"),
        (json.dumps([GOOD]).encode(), "holds a list, not a skill object"),
        (json.dumps({**GOOD, "id": "other.s9"}).encode(), "holds skill 'other.s9', not the 'a.s0'"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None,
)
def test_a_damaged_skill_file_is_a_value_naming_the_file(tmp_path, content, problem):
    path = tmp_path / "a.s0.json"
    path.write_bytes(content)
    loaded = load_skill(path)
    assert isinstance(loaded, SkillDamage), loaded
    assert str(path) in loaded.line() and "\n" not in loaded.line()
    assert re.search(problem, loaded.problem), loaded.problem


def test_a_whole_skill_file_loads(tmp_path):
    path = tmp_path / "a.s0.json"
    path.write_text(json.dumps(GOOD))
    assert load_skill(path) == skill("a.s0")
    assert load_skill(tmp_path / "gone.json").problem == "no such file"


# --- the library ----------------------------------------------------------------------------------------------------


def test_a_damaged_skill_is_left_out_of_lists_with_one_warning_and_is_an_error_asked_for(tmp_path, capsys):
    ids = make_library(tmp_path)
    bad = tmp_path / "skills" / "b.s1.json"
    bad.write_text(bad.read_text()[:300])  # cut in half
    capsys.readouterr()
    with Library(tmp_path) as library:
        assert [s.id for s in library.list()] == ["a.s0", "c.s2"]
        assert [s.id for s in library.list(kind="guard")] == ["c.s2"]
        with pytest.raises(UserError, match=f"skill file {bad} is damaged: not valid JSON"):
            library.get("b.s1")
        assert library.get(ids[0]).id == "a.s0"
    (line,) = _warnings(capsys)  # said once, however often listed
    assert line.startswith(f"warning: skill file {bad} is damaged") and line.endswith("left out")


def test_a_skill_damaged_when_indexed_is_listed_again_once_mended(tmp_path, capsys):
    make_library(tmp_path)
    path = tmp_path / "skills" / "b.s1.json"
    whole = path.read_text()
    path.write_text("{}")
    (tmp_path / "index.sqlite").unlink()
    with Library(tmp_path) as library:  # indexed while damaged: by its name alone
        assert [s.id for s in library.list()] == ["a.s0", "c.s2"]
    path.write_text(whole)
    with Library(tmp_path) as library:
        assert [s.id for s in library.list(family=11)] == ["b.s1"]
        assert [s.id for s in library.list(family=10)] == ["a.s0"]
        assert [s.id for s in library.list(condition="tolerance")] == ["a.s0", "b.s1", "c.s2"]
    assert len(_warnings(capsys)) == 2  # the missing index, the damaged file; nothing once mended


@pytest.mark.parametrize("damage", ["missing", "empty", "garbage", "half"])
def test_a_library_without_a_whole_index_is_reindexed_from_its_files(tmp_path, capsys, damage):
    ids = make_library(tmp_path)
    index = tmp_path / "index.sqlite"
    data = index.read_bytes()
    if damage == "missing":
        index.unlink()
    else:
        index.write_bytes({"empty": b"", "garbage": os.urandom(len(data)), "half": data[: len(data) // 2]}[damage])
    capsys.readouterr()
    with Library(tmp_path) as library:
        assert [s.id for s in library.list()] == ids
        assert [s.id for s in library.list(kind="guard")] == ["c.s2"]
    (line,) = _warnings(capsys)
    assert str(index) in line and ("re-index" in line or "indexed its 3 skill files" in line)
    if damage in ("garbage", "half"):
        (aside,) = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
        assert str(aside) in line
    with Library(tmp_path) as library:  # whole again: nothing more to say
        assert len(library.list()) == 3
    assert _warnings(capsys) == []


def test_an_index_that_lists_other_skills_than_the_folder_is_rebuilt(tmp_path, capsys):
    make_library(tmp_path)
    (tmp_path / "skills" / "a.s0.json").unlink()  # removed by hand
    (tmp_path / "skills" / "d.s3.json").write_text(json.dumps(skill("d.s3").as_dict()))  # copied in by hand
    capsys.readouterr()
    with Library(tmp_path) as library:
        assert [s.id for s in library.list()] == ["b.s1", "c.s2", "d.s3"]  # by family: 11, 12, 18
    (line,) = _warnings(capsys)
    assert "lists 3 skills" in line and "holds 3 skill files" in line and "re-indexed" in line


def test_an_index_damaged_while_open_is_rebuilt_from_the_files(tmp_path, capsys):
    make_library(tmp_path, ids=[f"s{i:03d}.s0" for i in range(200)])
    index = tmp_path / "index.sqlite"
    with Library(tmp_path) as library:
        with open(index, "r+b") as f:
            f.seek(4096)
            f.write(b"\0" * (index.stat().st_size - 4096))
        capsys.readouterr()
        assert len(library.list()) == 200
        library.save(skill("new.s0"))
        assert len(library.list()) == 201
    (line,) = _warnings(capsys)
    assert "is damaged" in line and "re-indexing the skill files" in line


def test_a_new_library_says_nothing(tmp_path, capsys):
    with Library(tmp_path / "fresh") as library:
        assert library.list() == []
    assert _warnings(capsys) == []


def test_optimize_goes_on_without_a_damaged_skill(tmp_path, capsys):
    from klineage.optimize import proposer_for
    from klineage.workload import load_workload

    make_library(tmp_path)
    (tmp_path / "skills" / "a.s0.json").write_bytes(os.urandom(300))
    workload = load_workload(Path(__file__).parents[2] / "src" / "klineage" / "examples" / "softmax" / "workload.py")
    proposer = proposer_for("klineage", workload, Settings.from_env(data_dir=tmp_path / "home"), "cpu", tmp_path)
    assert [s.id for s in proposer.skills] == ["b.s1"]  # c.s2 is a guard
    (line,) = _warnings(capsys)
    assert "a.s0.json is damaged" in line
