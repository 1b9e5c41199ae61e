"""SQLite store for verdicts and device ceilings, so no candidate is evaluated twice and the ceilings are measured
once per device. A verdict's key is everything that could change it: program hash (normalized source), workload
hash, gate, device, target, versions and the gate settings."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

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


def verdict_key(program_hash: str, workload_hash: str, gate: str, device: str, versions: dict, extra: dict) -> str:
    blob = json.dumps([program_hash, workload_hash, gate, device, versions, extra], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class Cache:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30)
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def get_verdict(self, key: str) -> dict | None:
        row = self.db.execute("SELECT verdict FROM verdicts WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put_verdict(
        self, key: str, program_hash: str, workload_hash: str, gate: str, device: str, versions: dict, verdict: dict
    ) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    program_hash,
                    workload_hash,
                    gate,
                    device,
                    json.dumps(versions),
                    json.dumps(verdict),
                    time.time(),
                ),
            )

    def get_ceilings(self, device: str, versions: dict) -> dict | None:
        row = self.db.execute(
            "SELECT ceilings FROM ceilings WHERE device = ? AND versions = ?", (device, json.dumps(versions))
        ).fetchone()
        return json.loads(row[0]) if row else None

    def put_ceilings(self, device: str, versions: dict, ceilings: dict) -> None:
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO ceilings VALUES (?, ?, ?, ?)",
                (device, json.dumps(versions), json.dumps(ceilings), time.time()),
            )
