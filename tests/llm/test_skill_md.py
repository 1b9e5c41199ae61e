"""`klineage skills export --format skill-md`: one folder per skill whose SKILL.md follows the Agent Skills format:
YAML front matter with `name` (1-64 lowercase letters, digits and single hyphens, not at either end; the folder's
name) and a non-empty `description` of at most 1024 characters; the card as the body."""

import re

import pytest
from click.testing import CliRunner

from klineage.cli import main
from klineage.library import Library
from klineage.skills import Skill
from tests.llm.skills import llm_skill
from tests.optimize.skillmaker import make_skill

yaml = pytest.importorskip("yaml")
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def _renamed(skill: Skill, new_id: str, intent: str | None = None) -> Skill:
    return Skill(**{**skill.as_dict(), "id": new_id, "intent": intent or skill.intent})


def test_exported_skill_md_folders_follow_the_agent_skills_format(tmp_path):
    long_prefix = "autotune_single_config.cross_entropy_with_a_very_long_workload_name.liger_cross_entropy"
    base = make_skill("launch_knobs", {"num_warps": "8"}, ("shared_memory_fits",))
    skills = [
        base,
        llm_skill("exp2", 0),
        _renamed(base, f"{long_prefix}.s1"),  # longer than 64 characters once slugged
        _renamed(base, f"{long_prefix}.s2"),  # the same first 64 characters
        _renamed(base, "guard.__odd__ID..with--runs.s3", 'Keep the "mask": removing it\nreads past the row. ' * 40),
    ]
    library = tmp_path / "library"
    with Library(library) as lib:
        for skill in skills:
            lib.save(skill)
    out = tmp_path / "skills"
    result = CliRunner().invoke(main, ["skills", "export", str(out), "--library", str(library), "--format", "skill-md"])
    assert result.exit_code == 0, result.output
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(folders) == len(skills)  # no two skills share a folder
    for folder in folders:
        text = (folder / "SKILL.md").read_text()
        assert text.startswith("---\n")
        _, front, body = text.split("---\n", 2)
        meta = yaml.safe_load(front)
        assert set(meta) == {"name", "description"}
        assert meta["name"] == folder.name and 1 <= len(meta["name"]) <= 64 and NAME.match(meta["name"])
        assert isinstance(meta["description"], str) and 1 <= len(meta["description"]) <= 1024
        for section in (
            "## Intent",
            "## Where it applies",
            "## Conditions",
            "## Effect",
            "## Failures avoided",
            "## Provenance",
        ):
            assert section in body
    odd = next(f for f in folders if f.name.startswith("guard-odd-id"))
    meta = yaml.safe_load((odd / "SKILL.md").read_text().split("---\n")[1])
    assert meta["description"].startswith('Keep the "mask": removing it reads past the row.')
