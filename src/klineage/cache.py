"""SQLite store for verdicts and device ceilings, so no candidate is evaluated twice and the ceilings are measured
once per device. A verdict's key is everything that could change it: program hash (normalized source), workload
hash, gate, device, target, versions and the gate settings.

`Store` is how this project keeps any SQLite file it can rebuild (this cache; the skill library's index): a file
that is damaged (garbage, cut short by a kill or a full disk, pages overwritten) is found when opened or at any
later query, moved aside beside itself as `<name>.corrupt-<timestamp>`, said in one warning line naming both
files, and rebuilt; the command goes on. A cache overwritten with garbage used to stop every command with a
traceback until the file was deleted by hand."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from klineage.config import warn
from klineage.workload import UserError

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    program_hash TEXT NOT NULL,
    workload_hash TEXT NOT NULL,
    gate TEXT NOT NULL,
    device TEXT NOT NULL,
    versions TEXT NOT NULL,
    verdict TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS verdicts_program ON verdicts (program_hash, workload_hash);
CREATE TABLE IF NOT EXISTS ceilings (
    device TEXT NOT NULL,
    versions TEXT NOT NULL,
    ceilings TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (device, versions)
);
"""

# SQLite's primary result codes for a file that is not (or no longer) a database: SQLITE_CORRUPT ("database disk
# image is malformed") and SQLITE_NOTADB ("file is not a database"). Busy, locked, read-only or I/O errors are not
# damage: moving the file aside then would throw away a healthy store another process is writing.
DAMAGE_CODES = (11, 26)
DAMAGE_TEXTS = ("file is not a database", "database disk image is malformed")
SIDE_FILES = ("-journal", "-wal", "-shm")  # SQLite's files beside a database, which belong to it


class ForeignTables(sqlite3.DatabaseError):
    """A readable database whose tables are not the ones this version writes (another program's file, another
    version's columns): unusable here, as a damaged file is."""


def damaged(error: BaseException) -> bool:
    """Whether an sqlite3 error says the file itself is damaged (not busy, locked or unwritable)."""
    if isinstance(error, ForeignTables):
        return True
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None and (code & 0xFF) in DAMAGE_CODES:  # the primary code, without the extended bits
        return True
    return any(text in str(error) for text in DAMAGE_TEXTS)


def move_aside(path: Path) -> Path:
    """Rename a damaged database (and its journal, if any) to `<name>.corrupt-<timestamp>` beside it, kept for
    whoever wants to look at it; returns the new path."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside, n = path.with_name(f"{path.name}.corrupt-{stamp}"), 1
    while aside.exists():
        aside, n = path.with_name(f"{path.name}.corrupt-{stamp}-{n}"), n + 1
    os.rename(path, aside)
    for suffix in SIDE_FILES:  # a hot journal left beside the new, empty file would be rolled back into it
        side = path.with_name(path.name + suffix)
        if side.exists():
            os.rename(side, aside.with_name(aside.name + suffix))
    return aside


def _columns(db: sqlite3.Connection) -> dict[str, list[str]]:
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {t: [r[1] for r in db.execute(f"PRAGMA table_info({t})")] for t in tables}


@functools.cache
def _schema_columns(schema: str) -> dict[str, list[str]]:
    db = sqlite3.connect(":memory:")
    db.executescript(schema)
    try:
        return _columns(db)
    finally:
        db.close()


@contextlib.contextmanager
def _recovering(path: Path) -> Iterator[None]:
    """One process at a time decides and moves (bench shards share a data directory)."""
    import fcntl

    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Store:
    """One SQLite file this project keeps and can rebuild from nothing (`what` names it in the warning; `then` says
    what happens after the move; `rebuilt` refills a fresh file, as the library re-indexes its skill files). Every
    query goes through `run`: damage found at open or at any later query moves the file aside, rebuilds it and
    runs the query once more on the fresh file (a lookup then finds nothing; a write lands in the new file)."""

    def __init__(
        self,
        path: Path,
        schema: str,
        what: str,
        then: str = "starting an empty one",
        rebuilt: Callable[[sqlite3.Connection], None] | None = None,
        timeout: float = 30,
    ):
        self.path, self.schema, self.what, self.then, self.rebuilt = Path(path), schema, what, then, rebuilt
        self.timeout = timeout
        self.moved: list[Path] = []  # where damaged files went, in order
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._inode: tuple[int, int] | None = None
        try:
            self.db = self._connect()
        except sqlite3.DatabaseError as e:
            if not damaged(e):
                raise
            self.db = self._recover(None, e)

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def _connect(self) -> sqlite3.Connection:
        self._inode = self._identity()
        db = sqlite3.connect(self.path, timeout=self.timeout)
        try:
            self._inode = self._inode or self._identity()
            have, want = _columns(db), _schema_columns(self.schema)  # the first read: damage shows here
            wrong = sorted(table for table in want if table in have and have[table] != want[table])
            if wrong:
                raise ForeignTables(f"table {', '.join(wrong)} has other columns than this version writes")
            db.executescript(self.schema)
        except BaseException:
            db.close()
            raise
        return db

    def _recover(self, db: sqlite3.Connection | None, error: sqlite3.DatabaseError) -> sqlite3.Connection:
        if db is not None:
            db.close()
        opened = self._inode
        with _recovering(self.path):
            # another process may have moved it already and started a fresh one: that one is left alone
            if opened is not None and self._identity() == opened:
                try:
                    aside = move_aside(self.path)
                except OSError as e:
                    raise UserError(
                        f"{self.what} {self.path} is damaged ({error}) and could not be moved aside ({e}): "
                        "delete it and run again"
                    ) from None
                self.moved.append(aside)
                warn(f"{self.what} {self.path} is damaged ({error}): moved to {aside}; {self.then}")
            fresh = self._connect()
        if self.rebuilt is not None:
            self.rebuilt(fresh)
        return fresh

    def run(self, query: Callable[[sqlite3.Connection], T]) -> T:
        """`query(connection)`; after damage, once more on the rebuilt file (damage again there is one error line:
        something keeps destroying the file)."""
        try:
            return query(self.db)
        except sqlite3.DatabaseError as e:
            if not damaged(e):
                raise
            self.db = self._recover(self.db, e)
        try:
            return query(self.db)
        except sqlite3.DatabaseError as e:
            if not damaged(e):
                raise
            raise UserError(f"{self.what} {self.path} is damaged again right after it was rebuilt: {e}") from None

    def close(self) -> None:
        self.db.close()


def verdict_key(program_hash: str, workload_hash: str, gate: str, device: str, versions: dict, extra: dict) -> str:
    blob = json.dumps([program_hash, workload_hash, gate, device, versions, extra], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class Cache:
    def __init__(self, path: Path):
        self.store = Store(path, SCHEMA, "the verdict cache")

    @property
    def db(self) -> sqlite3.Connection:
        return self.store.db

    def close(self) -> None:
        self.store.close()

    def get_verdict(self, key: str) -> dict | None:
        row = self.store.run(lambda db: db.execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone())
        return json.loads(row[0]) if row else None

    def put_verdict(
        self, key: str, program_hash: str, workload_hash: str, gate: str, device: str, versions: dict, verdict: dict
    ) -> None:
        row = (key, program_hash, workload_hash, gate, device, json.dumps(versions), json.dumps(verdict), time.time())

        def put(db: sqlite3.Connection) -> None:
            with db:
                db.execute("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)

        self.store.run(put)

    def get_ceilings(self, device: str, versions: dict) -> dict | None:
        row = self.store.run(
            lambda db: db.execute(
                "SELECT ceilings FROM ceilings WHERE device = ? AND versions = ?", (device, json.dumps(versions))
            ).fetchone()
        )
        return json.loads(row[0]) if row else None

    def put_ceilings(self, device: str, versions: dict, ceilings: dict) -> None:
        row = (device, json.dumps(versions), json.dumps(ceilings), time.time())

        def put(db: sqlite3.Connection) -> None:
            with db:
                db.execute("INSERT OR REPLACE INTO ceilings VALUES (?, ?, ?, ?)", row)

        self.store.run(put)
