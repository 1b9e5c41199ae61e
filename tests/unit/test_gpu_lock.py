"""Jobs sharing one GPU take turns at the clock through $KLINEAGE_GPU_LOCK; without it nothing is locked."""

import fcntl

import pytest

from klineage.timing import gpu_lock


def _free(path) -> bool:
    with open(path, "a") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(other, fcntl.LOCK_UN)
        return True


def test_the_lock_is_held_while_timing_and_released_after(tmp_path, monkeypatch):
    path = tmp_path / "gpu0.lock"
    monkeypatch.setenv("KLINEAGE_GPU_LOCK", str(path))
    with gpu_lock():
        assert not _free(path)
    assert _free(path)
    with pytest.raises(RuntimeError), gpu_lock():
        raise RuntimeError("a failed timing still lets go")
    assert _free(path)


def test_without_the_variable_nothing_is_locked(tmp_path, monkeypatch):
    monkeypatch.delenv("KLINEAGE_GPU_LOCK", raising=False)
    with gpu_lock():
        assert not (tmp_path / "gpu0.lock").exists()
