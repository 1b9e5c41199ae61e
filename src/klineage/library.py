"""The skill library: a directory of skills, one JSON file each plus its rendered Markdown card, indexed in SQLite
for filtering by family, transform, kind and condition.

    <library>/skills/<id>.json
    <library>/cards/<id>.md
    <library>/index.sqlite
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from klineage.config import write_whole
from klineage.skills import Skill, card, skill_md
from klineage.workload import UserError

if TYPE_CHECKING:
    from klineage.config import Settings
    from klineage.mine import Lineage, Step
    from klineage.program import Program
    from klineage.sandbox import Sandbox
    from klineage.workload import Workload

Probes = dict[int, list[dict]]  # a lineage's probe results by step index (klineage.probe.probe_lineage)

INDEX = """
CREATE TABLE IF NOT EXISTS skills (
    id TEXT PRIMARY KEY, family INTEGER, transform TEXT, kind TEXT, workload TEXT, expert TEXT, name TEXT
);
CREATE TABLE IF NOT EXISTS conditions (skill TEXT, predicate TEXT, status TEXT);
CREATE INDEX IF NOT EXISTS conditions_predicate ON conditions (predicate);
"""


class Library:
    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "skills").mkdir(parents=True, exist_ok=True)
        (self.root / "cards").mkdir(exist_ok=True)
        self.db = sqlite3.connect(self.root / "index.sqlite")
        self.db.executescript(INDEX)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def save(self, skill: Skill) -> None:
        # a mining run cut at its deadline while saving must not leave a skill file the library cannot load
        write_whole(self.root / "skills" / f"{skill.id}.json", json.dumps(skill.as_dict(), indent=2))
        write_whole(self.root / "cards" / f"{skill.id}.md", card(skill))
        with self.db:
            self.db.execute("DELETE FROM conditions WHERE skill = ?", (skill.id,))
            self.db.execute(
                "INSERT OR REPLACE INTO skills VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    skill.id,
                    skill.family,
                    skill.transform["id"],
                    skill.kind,
                    skill.provenance.get("workload"),
                    skill.provenance.get("expert"),
                    skill.name,
                ),
            )
            self.db.executemany(
                "INSERT INTO conditions VALUES (?, ?, ?)",
                [(skill.id, c["predicate"], c["status"]) for c in skill.conditions],
            )

    def get(self, skill_id: str) -> Skill:
        path = self.root / "skills" / f"{skill_id}.json"
        if not path.is_file():
            raise UserError(f"no skill {skill_id!r} in library {self.root}")
        return Skill.from_dict(json.loads(path.read_text()))

    def list(
        self,
        family: int | None = None,
        condition: str | None = None,
        kind: str | None = None,
        transform: str | None = None,
    ) -> list[Skill]:
        query = "SELECT DISTINCT s.id FROM skills s LEFT JOIN conditions c ON c.skill = s.id WHERE 1=1"
        args: list = []
        for column, value in (
            ("s.family", family),
            ("c.predicate", condition),
            ("s.kind", kind),
            ("s.transform", transform),
        ):
            if value is not None:
                query += f" AND {column} = ?"
                args.append(value)
        ids = [row[0] for row in self.db.execute(query + " ORDER BY s.family, s.id", args)]
        return [self.get(i) for i in ids]

    def export_skill_md(self, out: Path) -> list[Path]:
        """One folder per skill holding a SKILL.md (Agent Skills format: the folder is named like the skill)."""
        written = []
        for skill in self.list():
            text = skill_md(skill)
            name = text.split("\n", 2)[1].removeprefix("name: ")
            folder = Path(out) / name
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "SKILL.md").write_text(text)
            written.append(folder / "SKILL.md")
        return written


def mine_into(
    library: Library,
    workload: Workload,
    expert: Program,
    settings: Settings,
    device: str,
    walk_device: str | None = None,
    *,
    retime: bool = False,
    probe: bool = True,
    sandbox: Sandbox | None = None,
    max_steps: int | None = None,
    on_step: Callable[[Step], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[Lineage, Probes | None, list[Skill]]:
    """Mine EXPERT into LIBRARY: the walk (made on `walk_device`, default `device`, or read as recorded from it),
    the accepted steps timed again (`retime`, or always where the walk was made on the CPU and `device` is a GPU),
    the skills saved, the conditions probed, the skills saved again. (lineage, probes, skills). `on_phase` is told
    each phase as it starts, in a line beginning "timing" or "probing" (mine_all.py times the walk by the latter).

    The skills are saved before the probes as well as after: a run stopped while probing (a pipeline's time limit)
    then leaves skills with their measured effects, and with the conditions of the probes that finished (or the
    walk device's) rather than none. Run 16 lost four experts' GPU-timed effects that way (27 steps): their timing
    had finished, the probing was cut at the limit, and the skills were written only at the end."""
    from klineage.features import features
    from klineage.mine import retime as retime_lineage
    from klineage.mine import walk_for
    from klineage.probe import probe_lineage, stored_probes
    from klineage.skills import skills_from_lineage

    phase = on_phase or (lambda text: None)
    walked_elsewhere = (walk_device or device) != device
    lineage = walk_for(workload, expert, settings, device, walk_device, sandbox, max_steps=max_steps, on_step=on_step)
    if retime or walked_elsewhere:  # a walk made elsewhere has no effects of this device's
        phase(f"timing {len(lineage.accepted)} accepted steps")
        # an explicit retime measures everything again; a walk made elsewhere resumes what a stopped run timed
        lineage = retime_lineage(lineage, workload, settings, device, sandbox, keep_timed=not retime)
    context = features(expert, workload)

    def save(probes: Probes | None) -> list[Skill]:
        skills = skills_from_lineage(lineage, probes, context)
        for skill in skills:
            library.save(skill)
        return skills

    if not probe:
        return lineage, None, save(None)
    save(stored_probes(lineage, settings, device) or None)
    phase(f"probing conditions of {len(lineage.accepted)} accepted steps")
    probes = probe_lineage(lineage, workload, settings, device, sandbox)
    return lineage, probes, save(probes)
