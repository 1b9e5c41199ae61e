"""The forward walk on a real GPU: candidates are timed side by side with the current program, kept only beyond
both spreads, and the result is timed against the start in one interleaved measurement."""

import os

import pytest

from klineage.bench import run_bench, suite
from klineage.config import Settings
from klineage.optimize import optimize
from klineage.program import load_program
from klineage.proposers import AutotuneProposer
from klineage.workload import load_workload
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.gpu


@pytest.fixture
def settings(gpu_home):
    return Settings(data_dir=gpu_home, seed_case="tiny")


def test_autotune_on_the_naive_matmul_is_timed_and_kept_only_when_faster(settings, sandbox):
    wl = load_workload(EXAMPLES / "matmul" / "workload.py")
    prog = load_program(EXAMPLES / "matmul" / "naive.py")
    t = optimize(wl, prog, AutotuneProposer(wl, settings, "cuda"), settings, "cuda", budget=4, sandbox=sandbox)
    assert t.timed and t.start_ms and t.start_ms > 0
    for a in t.attempts:
        if a.outcome != "failed_gate":
            e = a.effect
            assert e["measured"] and e["current_ms"] > 0 and e["candidate_ms"] > 0
            # where the time went: the measured section held the GPU, and the gates took part of the attempt
            assert e["gpu_held_s"] > 0 and e["gpu_wait_s"] >= 0 and 0 < a.check_seconds < a.seconds
            assert a.kept == (e["speedup"] > 1 + max(e["current_spread"] + e["candidate_spread"], 0.01))
    if any(a.kept for a in t.attempts):  # 32x32 tiles leave a lot on the table: a bigger tile wins
        assert t.best_ms < t.start_ms and t.speedup > 1


def test_bench_references_time_each_distinct_program_once(settings, tmp_path):
    softmax = [i for i in suite("naive", settings) if i.name == "softmax"]
    result = run_bench(softmax, ["autotune"], 3, settings, "cuda", None)
    ref = result["references"]["softmax"]
    assert {"eager", "torch_compile", "start", "expert", "final:autotune"} <= set(ref)
    row = result["rows"][0]
    if row["kept"] == 0:  # nothing kept: the final program is the start, one sample, speedup exactly 1
        assert ref["final:autotune"] == ref["start"] and row["speedup"] == 1.0
    assert row["vs_torch_compile"] > 0 and row["escapes"] == []


def test_methods_of_an_instance_share_a_pair_both_try_on_a_gpu_they_take_turns_on(settings, tmp_path, monkeypatch):
    """blind's first candidate on the naive softmax (8 warps) is autotune's second: timed once, reused by the
    second method, on a GPU shared through the turn lock (every job shared, each measurement exclusive)."""
    if not os.environ.get("KLINEAGE_GPU_LOCK"):  # beside bench shards (h200_eval.sh) take turns on their lock
        monkeypatch.setenv("KLINEAGE_GPU_LOCK", str(tmp_path / "gpu.lock"))
    softmax = [i for i in suite("naive", settings) if i.name == "softmax"]
    result = run_bench(softmax, ["blind", "autotune"], 3, settings, "cuda", None)
    blind, autotune = (result["trajectories"][f"softmax/{m}"] for m in ("blind", "autotune"))
    timed = {a["candidate"]["program_hash"]: a["effect"] for a in blind["attempts"] if a["effect"].get("measured")}
    shared = [a for a in autotune["attempts"] if a["candidate"]["program_hash"] in timed]
    assert shared, "the two methods tried no common program: the test's premise changed"
    for a in shared:
        assert a["effect"]["reused"] and a["effect"]["speedup"] == timed[a["candidate"]["program_hash"]]["speedup"]
    assert all(a["seconds"] > 0 for t in (blind, autotune) for a in t["attempts"])
    assert {r["method"] for r in result["rows"]} == {"blind", "autotune"}
