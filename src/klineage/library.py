"""The skill library: a directory of skills, one JSON file each plus its rendered Markdown card, indexed in SQLite
for filtering by family, transform, kind and condition. The store only: `klineage.mining` fills it.

    <library>/skills/<id>.json
    <library>/cards/<id>.md
    <library>/index.sqlite
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from klineage.config import write_whole
from klineage.skills import Skill, card, skill_md
from klineage.workload import UserError

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
