"""A damaged verdict cache (garbage, cut in half, pages overwritten while in use, another version's tables) is moved
aside beside itself with one warning line naming both files, rebuilt empty, and the caller goes on: before, every
command stopped with a traceback until the file was deleted by hand. An empty file is an empty database, no damage."""

import os
import sqlite3

import pytest

from klineage.cache import Cache, Store, damaged, move_aside, verdict_key
from klineage.workload import UserError

PAGE = 4096


def _filled(path, rows: int = 400) -> bytes:
    """A healthy cache of `rows` verdicts and one ceiling; its bytes."""
    cache = Cache(path)
    verdict = '{"status": "pass", "reason": "%s"}' % ("x" * 300)
    with cache.db:  # one transaction: a commit per row costs a second here
        cache.db.executemany(
            "INSERT INTO verdicts VALUES (?, 'p', 'w', 'correctness', 'cpu', '{}', ?, 0)",
            [(f"k{i}", verdict) for i in range(rows)],
        )
    cache.put_ceilings("H200", {"v": 1}, {"copy_bytes_per_s": 4.2e12})
    cache.close()
    return path.read_bytes()


def _overwrite(path, offset: int, data: bytes) -> None:
    """Another writer (a bad disk, a stray process) overwrites part of the file in place."""
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def _warnings(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line]


def _asides(folder) -> list:
    return sorted(p for p in folder.iterdir() if ".corrupt-" in p.name)


@pytest.mark.parametrize("damage", ["garbage", "half", "header_only", "tiny"])
def test_a_damaged_cache_is_moved_aside_and_rebuilt(tmp_path, capsys, damage):
    path = tmp_path / "cache.sqlite"
    data = _filled(path)
    bad = {
        "garbage": os.urandom(len(data)),
        "half": data[: len(data) // 2],  # cut by a kill or a full disk
        "header_only": data[:100],
        "tiny": b"hello",
    }[damage]
    path.write_bytes(bad)
    capsys.readouterr()
    cache = Cache(path)
    (aside,) = _asides(tmp_path)
    assert aside.read_bytes() == bad and aside.name.startswith("cache.sqlite.corrupt-")
    (line,) = _warnings(capsys)
    assert line.startswith("warning: the verdict cache ") and str(path) in line and str(aside) in line
    assert cache.get_verdict("k1") is None and cache.get_ceilings("H200", {"v": 1}) is None
    cache.put_verdict("k1", "p", "w", "correctness", "cpu", {}, {"status": "fail"})
    cache.put_ceilings("H200", {"v": 1}, {"copy_bytes_per_s": 1.0})
    cache.close()
    again = Cache(path)  # the rebuilt file is a healthy cache: nothing more is moved or said
    assert again.get_verdict("k1") == {"status": "fail"} and again.get_ceilings("H200", {"v": 1})
    assert len(_asides(tmp_path)) == 1 and _warnings(capsys) == []


def test_an_empty_file_is_an_empty_cache(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"")
    cache = Cache(path)
    assert cache.get_verdict("k") is None
    cache.put_verdict("k", "p", "w", "g", "cpu", {}, {"status": "pass"})
    assert cache.get_verdict("k") == {"status": "pass"}
    assert _asides(tmp_path) == [] and _warnings(capsys) == []


def test_damage_found_by_a_later_query_recovers_there(tmp_path, capsys):
    """Pages overwritten while the cache is open (the header and schema intact, so opening finds nothing): the
    lookup that reads them finds damage, the file goes aside, the lookup is a miss and the next write lands."""
    path = tmp_path / "cache.sqlite"
    data = _filled(path)
    cache = Cache(path)
    _overwrite(path, 3 * PAGE, b"\0" * 5 * PAGE)
    capsys.readouterr()
    found = [cache.get_verdict(f"k{i}") for i in range(400)]  # some rows live on intact pages
    assert None in found and _asides(tmp_path)
    (line,) = _warnings(capsys)
    assert "database disk image is malformed" in line and str(path) in line
    cache.put_verdict("k1", "p", "w", "g", "cpu", {}, {"status": "fail"})
    assert cache.get_verdict("k1") == {"status": "fail"}
    assert _asides(tmp_path)[0].read_bytes()[: 3 * PAGE] == data[: 3 * PAGE]  # kept as it was, to look at


def test_a_write_that_finds_damage_lands_in_the_rebuilt_cache(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    _filled(path)
    cache = Cache(path)
    _overwrite(path, 2 * PAGE, os.urandom(path.stat().st_size - 2 * PAGE))
    for i in range(400):  # rewriting every row meets the damaged pages
        cache.put_verdict(f"k{i}", "p", "w", "g", "cpu", {}, {"status": "fail"})
        if _asides(tmp_path):
            break
    assert len(_asides(tmp_path)) == 1 and len(_warnings(capsys)) == 1
    assert cache.get_verdict(f"k{i}") == {"status": "fail"}  # the write that met the damage
    assert i < 399 and cache.get_verdict("k399") is None  # what the damaged file held went with it


def test_two_processes_recover_once_and_share_the_rebuilt_cache(tmp_path, capsys):
    """Bench shards share a data directory: the first to find the damage moves the file; the other, still holding
    the old file, finds the new one in its place, moves nothing and reads what the first wrote."""
    path = tmp_path / "cache.sqlite"
    _filled(path)
    first, second = Cache(path), Cache(path)
    _overwrite(path, 2 * PAGE, b"\xff" * (path.stat().st_size - 2 * PAGE))
    assert None in [first.get_verdict(f"k{i}") for i in range(400)]
    first.put_verdict("fresh", "p", "w", "g", "cpu", {}, {"status": "pass"})
    assert None in [second.get_verdict(f"k{i}") for i in range(400)]
    assert second.get_verdict("fresh") == {"status": "pass"}
    assert len(_asides(tmp_path)) == 1 and len(_warnings(capsys)) == 1


def test_another_versions_tables_are_moved_aside(tmp_path, capsys):
    path = tmp_path / "cache.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE verdicts (key TEXT, verdict TEXT)")
    db.commit()
    db.close()
    cache = Cache(path)
    cache.put_verdict("k", "p", "w", "g", "cpu", {}, {"status": "pass"})
    assert cache.get_verdict("k") == {"status": "pass"}
    (line,) = _warnings(capsys)
    assert "table verdicts has other columns" in line and len(_asides(tmp_path)) == 1


def test_busy_or_unreadable_is_not_damage(tmp_path):
    """Only a damaged file is moved: a locked database belongs to a process still writing it."""
    assert damaged(sqlite3.DatabaseError("file is not a database"))
    assert not damaged(sqlite3.OperationalError("database is locked"))
    assert not damaged(OSError("file is not a database"))
    db = sqlite3.connect(tmp_path / "x.sqlite")
    db.execute("CREATE TABLE t (a)")
    with pytest.raises(sqlite3.OperationalError) as caught:
        db.execute("SELECT b FROM t")
    assert not damaged(caught.value)


def test_the_journal_goes_aside_with_its_database(tmp_path):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"garbage")
    (tmp_path / "cache.sqlite-journal").write_bytes(b"journal")
    aside = move_aside(path)
    assert not path.exists() and not (tmp_path / "cache.sqlite-journal").exists()
    assert aside.with_name(aside.name + "-journal").read_bytes() == b"journal"
    path.write_bytes(b"again")
    assert move_aside(path) != aside  # two in the same second keep both


def test_a_file_that_cannot_be_moved_aside_is_one_error_line(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite"
    path.write_bytes(os.urandom(8192))

    def refuse(*args):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(os, "rename", refuse)
    with pytest.raises(UserError, match="could not be moved aside.*delete it"):
        Cache(path)


def test_a_store_refills_what_it_rebuilt(tmp_path, capsys):
    seen = []
    store = Store(
        tmp_path / "s.sqlite",
        "CREATE TABLE IF NOT EXISTS t (a);",
        "the test store",
        then="refilled",
        rebuilt=lambda db: seen.append(db.execute("SELECT count(*) FROM t").fetchone()),
    )
    store.close()
    (tmp_path / "s.sqlite").write_bytes(os.urandom(4096))
    store = Store(
        tmp_path / "s.sqlite",
        "CREATE TABLE IF NOT EXISTS t (a);",
        "the test store",
        then="refilled",
        rebuilt=lambda db: seen.append(db.execute("SELECT count(*) FROM t").fetchone()),
    )
    assert seen == [(0,)] and store.moved and _warnings(capsys)[0].endswith("; refilled")


def test_the_key_is_unchanged(tmp_path):
    # what the recovery changed is how the file is opened, never what a verdict is stored under
    assert verdict_key("p", "w", "g", "cpu", {}, {}) == verdict_key("p", "w", "g", "cpu", {}, {})
