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
