"""The skill library: a directory of skills, one JSON file each plus its rendered Markdown card, indexed in SQLite
for filtering by family, transform, kind and condition. The store only: `klineage.mining` fills it.

    <library>/skills/<id>.json
    <library>/cards/<id>.md
    <library>/index.sqlite

The skill files are the library; the index is derived from them. An index that is missing, damaged (moved aside:
`cache.Store`) or not listing the same skills as the folder is rebuilt from the files with one warning line, never
read as empty in silence. A skill file that is damaged (`skills.load_skill`) is indexed by its name alone: listing
goes on without it and says so in one warning line; asking for it by id is one error line.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from klineage.cache import Store
from klineage.config import warn, write_whole
from klineage.skills import Skill, SkillDamage, card, load_skill, skill_md
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
        self._said: set[Path] = set()
        (self.root / "skills").mkdir(parents=True, exist_ok=True)
        (self.root / "cards").mkdir(exist_ok=True)
        index = self.root / "index.sqlite"
        had_index = index.is_file() and index.stat().st_size > 0
        then = f"re-indexing the skill files of {self.root / 'skills'}"
        self.store = Store(index, INDEX, "the skill library's index", then=then, rebuilt=self._reindex)
        self._match_the_files(had_index)

    @property
    def db(self) -> sqlite3.Connection:
        return self.store.db

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Library:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _match_the_files(self, had_index: bool) -> None:
        """Re-index when the index does not list exactly the skill files (a library copied without its index, an
        index from before files were added or removed by hand), saying so."""
        files = {p.stem for p in (self.root / "skills").glob("*.json")}
        indexed = set(self.store.run(lambda db: [row[0] for row in db.execute("SELECT id FROM skills")]))
        if files == indexed:
            return
        where = self.root / "skills"
        if had_index:
            warn(
                f"the skill library's index {self.store.path} lists {len(indexed)} skills, {where} holds "
                f"{len(files)} skill files: re-indexed from the files"
            )
        else:
            warn(
                f"the skill library {self.root} has no index: indexed its {len(files)} skill files into "
                f"{self.store.path}"
            )
        self.store.run(self._reindex)

    def _reindex(self, db: sqlite3.Connection) -> None:
        """The index rebuilt from the skill files; a damaged file gets a row with its id alone, so that listing
        still tries it (and says it is damaged) and a later open does not re-index again."""
        with db:
            db.execute("DELETE FROM conditions")
            db.execute("DELETE FROM skills")
            for path in sorted((self.root / "skills").glob("*.json")):
                loaded = load_skill(path)
                if isinstance(loaded, Skill):
                    _index(db, loaded)
                else:
                    db.execute("INSERT INTO skills (id) VALUES (?)", (path.stem,))

    def save(self, skill: Skill) -> None:
        # a mining run cut at its deadline while saving must not leave a skill file the library cannot load
        write_whole(self.root / "skills" / f"{skill.id}.json", json.dumps(skill.as_dict(), indent=2))
        write_whole(self.root / "cards" / f"{skill.id}.md", card(skill))
        self._save_index(skill)

    def path(self, skill_id: str) -> Path:
        return self.root / "skills" / f"{skill_id}.json"

    def get(self, skill_id: str) -> Skill:
        """The skill; a missing or damaged one is a UserError naming the file (one line, exit code 2)."""
        path = self.path(skill_id)
        if not path.is_file():
            raise UserError(f"no skill {skill_id!r} in library {self.root}")
        loaded = load_skill(path)
        if isinstance(loaded, SkillDamage):
            raise UserError(loaded.line())
        return loaded

    def list(
        self,
        family: int | None = None,
        condition: str | None = None,
        kind: str | None = None,
        transform: str | None = None,
    ) -> list[Skill]:
        """The skills that match, in family and id order. A damaged skill file is left out with one warning line
        naming it (whatever the filters: what it held is unknown); one mended since it was indexed is indexed again
        and kept where it matches."""
        query = "SELECT DISTINCT s.id, s.kind IS NULL FROM skills s LEFT JOIN conditions c ON c.skill = s.id WHERE (1=1"
        args: list = []
        wanted = {"s.family": family, "c.predicate": condition, "s.kind": kind, "s.transform": transform}
        for column, value in wanted.items():
            if value is not None:
                query += f" AND {column} = ?"
                args.append(value)
        query += ") OR s.kind IS NULL ORDER BY s.family, s.id"
        rows = self.store.run(lambda db: db.execute(query, args).fetchall())
        found = []
        for skill_id, unindexed in rows:
            loaded = load_skill(self.path(skill_id))
            if isinstance(loaded, SkillDamage):
                if loaded.path not in self._said:  # once per library opened, however often it is listed
                    self._said.add(loaded.path)
                    warn(f"{loaded.line()}; left out")
                continue
            if unindexed:
                self._save_index(loaded)
                if not _matches(loaded, family, condition, kind, transform):
                    continue
            found.append(loaded)
        return found

    def _save_index(self, skill: Skill) -> None:
        def put(db: sqlite3.Connection) -> None:
            with db:
                _index(db, skill)

        self.store.run(put)

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


def _index(db: sqlite3.Connection, skill: Skill) -> None:
    """The skill's rows in the index (inside the caller's transaction)."""
    db.execute("DELETE FROM conditions WHERE skill = ?", (skill.id,))
    db.execute(
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
    db.executemany(
        "INSERT INTO conditions VALUES (?, ?, ?)", [(skill.id, c["predicate"], c["status"]) for c in skill.conditions]
    )


def _matches(skill: Skill, family, condition, kind, transform) -> bool:
    """The list filters, in Python, for a skill read from its file rather than found by the index."""
    return (
        (family is None or skill.family == family)
        and (kind is None or skill.kind == kind)
        and (transform is None or skill.transform["id"] == transform)
        and (condition is None or any(c["predicate"] == condition for c in skill.conditions))
    )
