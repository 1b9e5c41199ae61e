"""The program kernel caches the judge keeps for candidates (gates.candidate.kernel_cache): one per program, pruned
least recently used first. That candidates share one and see no other's: tests/unit/test_isolation.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from klineage.config import Settings
from klineage.gates.candidate import kernel_cache, program_digest, prune_kernel_caches
from klineage.program import Program


def _cache(root: Path, name: str, used: float, size: int = 0) -> Path:
    path = root / name
    (path / "KEY").mkdir(parents=True)
    (path / "KEY" / "kernel.cubin").write_bytes(b"x" * size)
    os.utime(path, (used, used))
    return path


def test_one_cache_per_program_under_the_data_directory(tmp_path):
    settings = Settings(data_dir=tmp_path)
    a, b = Program("a", "class ModelNew: pass\n"), Program("b", "class ModelNew: pass  # another\n")
    path = kernel_cache(settings, a)
    assert path == str(tmp_path / "kernels" / program_digest(a)) and Path(path).is_dir()
    assert kernel_cache(settings, Program("a2", a.source)) == path  # the same sources: the same program
    assert kernel_cache(settings, b) != path
    assert (tmp_path / "kernels").stat().st_mode & 0o077 == 0


def test_least_recently_used_caches_go_beyond_the_count(tmp_path):
    for i in range(4):
        _cache(tmp_path, f"p{i}", used=1000 + i)
    assert prune_kernel_caches(tmp_path, count=2, size=1 << 30) == ["p0", "p1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p2", "p3"]


def test_beyond_the_size_the_oldest_go_and_the_one_in_use_last(tmp_path):
    keep = _cache(tmp_path, "used", used=1000, size=300_000)  # the oldest, but about to be used
    _cache(tmp_path, "old", used=2000, size=300_000)
    _cache(tmp_path, "new", used=3000, size=300_000)
    assert prune_kernel_caches(tmp_path, keep=keep, count=10, size=700_000) == ["old"]
    assert prune_kernel_caches(tmp_path, keep=keep, count=10, size=100_000) == ["new", "used"]


def test_kernel_cache_prunes_before_the_fork(tmp_path, monkeypatch):
    import klineage.gates.candidate as candidate

    monkeypatch.setattr(candidate, "KERNEL_CACHES_KEPT", 2)
    settings = Settings(data_dir=tmp_path)
    programs = [Program(f"p{i}", f"class ModelNew: pass  # {i}\n") for i in range(3)]
    paths = []
    for i, program in enumerate(programs):
        paths.append(Path(kernel_cache(settings, program)))
        os.utime(paths[-1], (1000 + i, 1000 + i))
    assert not paths[0].exists() and paths[1].is_dir() and paths[2].is_dir()
    assert Path(kernel_cache(settings, programs[0])).is_dir() and not paths[1].exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="candidates run as nobody only when the judge runs as root")
def test_a_cache_copied_by_root_is_made_again_for_the_candidate(tmp_path):
    """`cp -r` of a data directory as root leaves the program's cache root-owned inside, where the candidate (nobody)
    cannot write: the matmul expert's resumed walk failed its compile gate with a PermissionError."""
    from klineage.isolation import NOBODY

    settings = Settings(data_dir=tmp_path)
    program = Program("a", "class ModelNew: pass\n")
    path = Path(kernel_cache(settings, program))
    assert path.stat().st_uid == NOBODY
    (path / "KEY").mkdir()  # as a copy made by root leaves it
    (path / "KEY" / "kernel.cubin").write_bytes(b"x")
    assert Path(kernel_cache(settings, program)) == path and list(path.iterdir()) == []
    assert path.stat().st_uid == NOBODY
    (path / "OWN").mkdir()
    os.chown(path / "OWN", NOBODY, NOBODY)  # the candidate's own entries stay
    assert Path(kernel_cache(settings, program)) == path and [p.name for p in path.iterdir()] == ["OWN"]
