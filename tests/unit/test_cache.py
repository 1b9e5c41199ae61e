import pytest

from klineage.cache import Cache, verdict_key


def test_verdicts_and_ceilings_round_trip(tmp_path):
    cache = Cache(tmp_path / "c.sqlite")
    key = verdict_key("p1", "w1", "correctness", "cpu", {"triton": "3.6.0"}, {"seeds": 5})
    assert key != verdict_key("p1", "w1", "correctness", "cpu", {"triton": "3.5.0"}, {"seeds": 5})
    assert key != verdict_key("p2", "w1", "correctness", "cpu", {"triton": "3.6.0"}, {"seeds": 5})
    assert cache.get_verdict(key) is None
    cache.put_verdict(key, "p1", "w1", "correctness", "cpu", {}, {"status": "pass"})
    assert cache.get_verdict(key) == {"status": "pass"}
    cache.put_ceilings("H200", {"v": 1}, {"copy_bytes_per_s": 4.2e12})
    assert cache.get_ceilings("H200", {"v": 1}) == {"copy_bytes_per_s": 4.2e12}
    assert cache.get_ceilings("H200", {"v": 2}) is None
    cache.close()
    assert Cache(tmp_path / "c.sqlite").get_verdict(key) == {"status": "pass"}  # persisted


def test_versions_carry_the_harness_hash():
    from klineage.config import harness_hash, versions

    assert versions()["harness"] == harness_hash() and len(harness_hash()) == 12
    assert versions() is versions()  # computed once per process: it imports torch and hashes the harness


def test_the_harness_hash_covers_every_file_of_the_gates_package():
    """A verdict cached by an older harness must not be reused: an edit to any gate module changes the hash."""
    from pathlib import Path

    import klineage
    from klineage.config import gate_files

    root = Path(klineage.__file__).parent
    hashed = {p.relative_to(root).as_posix() for p in gate_files()}
    assert {p.relative_to(root).as_posix() for p in (root / "gates").glob("*.py")} <= hashed
    assert {"sandbox.py", "timing.py", "workload.py", "gates/correctness.py", "gates/common.py"} <= hashed


def test_processes_sharing_a_data_directory_measure_the_ceilings_once(tmp_path, monkeypatch):
    # bench shards started together each measured the GPU's ceilings, each in an exclusive turn, one after another
    import threading
    import time

    import klineage.check as check
    from klineage.config import Settings
    from klineage.sandbox import SandboxResult

    monkeypatch.setattr(check, "device_name", lambda device: "Fake GPU")
    measured = []

    class Timer:  # the ceilings job: slow enough that every caller arrives while the first one measures
        def run(self, job):
            measured.append(job.function)
            time.sleep(0.5)
            return SandboxResult(True, value={"copy_bytes_per_s": 4.2e12, "n": len(measured)})

    settings = Settings.from_env(data_dir=tmp_path)
    found = []

    def shard():
        found.append(check.ceilings_for("cuda", settings, Timer(), Cache(settings.cache_path)))

    threads = [threading.Thread(target=shard) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert measured == ["klineage.gates.profile:ceilings_job"]
    assert found == [{"copy_bytes_per_s": 4.2e12, "n": 1}] * 4
    assert check.ceilings_for("cpu", settings, Timer(), Cache(settings.cache_path)) is None  # no GPU, no ceilings


def test_a_write_cut_by_a_kill_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    # bench reports, memory bases, lineages and skills are rewritten during runs that end by a kill at a deadline
    from pathlib import Path

    from klineage.config import write_whole

    target = tmp_path / "bench.json"
    write_whole(target, '{"rows": [1]}')
    real = Path.write_text

    def cut(self, text, *args, **kwargs):  # half the text reaches the disk, then the process is killed
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", cut)
    with pytest.raises(KeyboardInterrupt):
        write_whole(target, '{"rows": [1, 2, 3, 4]}')
    monkeypatch.undo()
    assert target.read_text() == '{"rows": [1]}'
    write_whole(target, '{"rows": [1, 2]}')
    assert target.read_text() == '{"rows": [1, 2]}'
    target.unlink()
    write_whole(target, '{"rows": [1, 2]}')  # the same write again writes again (nothing remembers a call)
    assert target.read_text() == '{"rows": [1, 2]}' and [p.name for p in tmp_path.iterdir()] == ["bench.json"]
