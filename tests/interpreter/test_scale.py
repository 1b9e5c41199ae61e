"""The Dask engine (klineage.scale, bench.engine) on a local cluster of two worker processes on the CPU: tasks
survive a worker killed mid-task, the verdict cache takes two writers at once, and a bench on the cluster gives the
serial path's rows and says which instance was retried. In this tier: every test starts worker processes, and the
bench runs programs through the Triton interpreter."""

import os
import signal

import pytest

from klineage.scale import Engine, Task, cluster, run_graph, run_tasks
from tests.fixtures.scale_tasks import raises, slow_square, where, write_verdicts

pytest.importorskip("distributed")


def _killer(task: str, killed: list):
    """An `on_start` that kills the worker process running the first attempt of `task` (SIGKILL: no goodbye)."""

    def on_start(attempt) -> None:
        if attempt.task == task and not killed:
            killed.append(attempt.pid)
            os.kill(attempt.pid, signal.SIGKILL)

    return on_start


def test_a_worker_killed_mid_task_loses_nothing_and_its_task_reruns_elsewhere():
    killed, done = [], []
    with cluster(Engine(workers=2), gpu=False) as client:
        out = run_tasks(
            client,
            slow_square,
            {f"t{i}": (i, 1.0) for i in range(4)},
            on_done=done.append,
            on_start=_killer("t1", killed),
        )
        failing = run_tasks(client, raises, {"r": (3,)})
    assert killed and list(out) == ["t0", "t1", "t2", "t3"]
    assert {n: o.value for n, o in out.items()} == {"t0": 0, "t1": 1, "t2": 4, "t3": 9}
    assert out["t1"].attempts == 2 and len(out["t1"].workers) == 2
    assert all(o.attempts == 1 for n, o in out.items() if n != "t1")
    assert sorted(o.name for o in done) == ["t0", "t1", "t2", "t3"]  # each told as it ended
    # a task that raises is a value with why, after its one retry
    assert not failing["r"].ok and "no square for 3" in failing["r"].error and failing["r"].attempts == 2


def test_a_mixed_local_cluster_walks_anywhere_and_times_only_on_its_gpu_worker_after_the_walk(monkeypatch):
    """One GPU worker and two CPU-only workers; per expert a walk (no GPU) and then its timing (GPU=1), as
    mine-ecosystem --walk-device cpu --device cuda submits them. No GPU here: the GPU worker is handed a device
    name that nothing opens, and the tasks only say where they ran."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    tasks = {}
    for e in ("a", "b", "c", "d"):
        tasks[f"{e}:walk"] = Task(where, (e,))
        tasks[e] = Task(where, (), gpu=True, after=f"{e}:walk")
    with cluster(Engine(workers=1, cpu_workers=2), gpu=True) as client:
        info = client.scheduler_info()["workers"].values()
        out = run_graph(client, tasks)
    offered = sorted((w["name"], w.get("resources", {}).get("GPU", 0)) for w in info)
    assert offered == [("klineage-0", 1), ("klineage-cpu-0", 0), ("klineage-cpu-1", 0)]
    assert all(o.ok for o in out.values()), [o.error for o in out.values()]
    for e in ("a", "b", "c", "d"):
        walked, timed = out[f"{e}:walk"].value, out[e].value
        assert timed[:2] == ("klineage-0", "7")  # the GPU worker, seeing its GPU
        assert timed[2] == (walked,) and walked[2] == (e,)  # after the walk, with its value
    # a walk ran on whichever worker was free, CPU-only workers (which see no GPU) included
    walks = {out[f"{e}:walk"].value[:2] for e in "abcd"}
    assert walks <= {("klineage-0", "7"), ("klineage-cpu-0", ""), ("klineage-cpu-1", "")}
    assert walks & {("klineage-cpu-0", ""), ("klineage-cpu-1", "")}


def test_two_workers_writing_the_verdict_cache_at_once_lose_no_verdict(tmp_path):
    from klineage.cache import Cache

    path = tmp_path / "cache.sqlite"
    with cluster(Engine(workers=2), gpu=False) as client:
        out = run_tasks(client, write_verdicts, {f"w{w}": (str(path), w, 150) for w in range(4)})
    assert all(o.ok for o in out.values()), [o.error for o in out.values()]
    cache = Cache(path)
    try:
        assert cache.db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 600
        assert cache.get_verdict("w3-149") == {"status": "pass", "i": 149}
    finally:
        cache.close()


def test_bench_on_a_local_cluster_gives_the_serial_rows_with_a_worker_killed_mid_instance(settings, tmp_path):
    from klineage.bench.engine import run_bench_on
    from klineage.bench.report import markdown
    from klineage.bench.run import run_bench
    from klineage.bench.suites import suite

    two = [i for i in suite("naive", settings) if i.name in ("softmax", "rmsnorm")]
    serial = run_bench(two, ["autotune"], 1, settings, "cpu", None)
    killed, reports, lines = [], [], []
    spread = run_bench_on(
        Engine(workers=2),
        two,
        ["autotune"],
        1,
        settings,
        "cpu",
        None,
        on_instance=reports.append,
        on_cluster=lines.append,
        on_start=_killer(two[1].name, killed),
    )

    def same(rows):
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    assert killed
    assert same(spread["rows"]) == same(serial["rows"]) and spread["rows"]
    assert spread["stamp"]["instances"] == [i.name for i in two] and not spread["stamp"]["partial"]
    assert set(spread["trajectories"]) == set(serial["trajectories"])
    assert spread["engine"]["retried"] == {two[1].name: 2} and spread["engine"]["failed"] == {}
    # each finished instance was reported as it finished, before the run ended
    assert len(reports) == 2 and reports[0]["stamp"]["partial"] and len(reports[0]["stamp"]["instances"]) == 1
    assert len(lines) == 1 and "dashboard" in lines[0]
    assert f"Retried (a worker lost mid-task): {two[1].name} (2 attempts)" in markdown(spread)


def test_mine_ecosystem_on_two_workers_saves_each_experts_skills_into_the_one_library(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from klineage.cli import main
    from klineage.library import Library

    monkeypatch.setenv("KLINEAGE_HOME", str(tmp_path / "home"))
    args = ["mine-ecosystem", "--only", "gems_reglu,liger_relu_squared", "--device", "cpu", "--max-steps", "1"]
    result = CliRunner().invoke(main, [*args, "--no-probe", "--workers", "2", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.stdout)["rows"]}
    assert list(rows) == ["gems_reglu", "liger_relu_squared"]  # catalogue order, whatever order the tasks ended
    assert rows["liger_relu_squared"]["status"] == "mined" and rows["liger_relu_squared"]["accepted"] == 1
    with Library(tmp_path / "home" / "library") as library:
        assert len(library.list()) == rows["liger_relu_squared"]["skills"] >= 1


def test_optimize_many_on_two_workers_ends_each_program_as_one_process_does(settings, tmp_path, monkeypatch):
    """A folder of two programs and one whose workload does not load: the cluster's summary is the single
    process's, the broken one a value with why, and every program's outputs are written."""
    import json
    import shutil

    from click.testing import CliRunner

    from klineage.cli import main
    from klineage.optimize_many import Run, optimize_many, targets
    from tests.conftest import EXAMPLES

    folder = tmp_path / "programs"
    for name in ("softmax", "rmsnorm"):
        (folder / name).mkdir(parents=True)
        for file in ("workload.py", "naive.py"):
            shutil.copy(EXAMPLES / name / file, folder / name / file)
    (folder / "broken").mkdir()
    (folder / "broken" / "workload.py").write_text("x = (\n")
    shutil.copy(EXAMPLES / "softmax" / "naive.py", folder / "broken" / "program.py")
    here = [r.summary() for r in optimize_many(targets(folder), Run("autotune", 2, settings, "cpu"))]
    monkeypatch.setenv("KLINEAGE_HOME", str(settings.data_dir))
    args = ["optimize-many", str(folder), "--method", "autotune", "--budget", "2", "--device", "cpu"]
    result = CliRunner().invoke(main, [*args, "--workers", "2", "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    spread = json.loads(result.stdout)["programs"]
    assert spread == here and [p["name"] for p in spread] == ["broken", "rmsnorm", "softmax"]
    assert "syntax error" in spread[0]["error"] and spread[1]["evaluations"] >= 1
    assert (tmp_path / "out" / "softmax" / "program.py").is_file() and (tmp_path / "out" / "summary.json").is_file()


def test_a_running_cluster_is_used_by_its_address_and_one_without_a_gpu_worker_is_said_at_once():
    from klineage.workload import UserError

    with cluster(Engine(workers=2), gpu=False) as local:
        address = local.scheduler.address
        with cluster(Engine(scheduler=address), gpu=False) as client:
            out = run_tasks(client, slow_square, {"a": (3, 0.0), "b": (4, 0.0)})
        assert {n: o.value for n, o in out.items()} == {"a": 9, "b": 16}
        with pytest.raises(UserError, match="no worker offers a GPU"):
            with cluster(Engine(scheduler=address), gpu=True):
                pass
    with pytest.raises(UserError, match="no scheduler answered"):
        with cluster(Engine(scheduler="tcp://127.0.0.1:9"), gpu=False):
            pass


def test_the_bench_command_on_workers_writes_a_report_that_names_its_engine(tmp_path):
    import json

    from click.testing import CliRunner

    from klineage.cli import main

    args = ["bench", "naive", "--instances", "softmax", "--methods", "autotune", "--budget", "1", "--device", "cpu"]
    result = CliRunner().invoke(main, [*args, "--workers", "2", "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert report["engine"]["workers"] == 2 and report["engine"]["retried"] == {}
    assert [r["instance"] for r in report["rows"]] == ["softmax"] and not report["stamp"]["partial"]
    assert "Engine: Dask distributed on a local cluster, 2 workers." in (tmp_path / "out" / "bench.md").read_text()


def test_memory_build_on_two_workers_writes_the_single_processs_knowledge_base(settings, tmp_path, monkeypatch):
    """Two instances, a knowledge base that held one entry before: the cluster's file is the single process's,
    written by the client alone (the workers write nothing there)."""
    import json
    import shutil

    from click.testing import CliRunner

    from klineage.bench.memory import build_memory
    from klineage.bench.suites import suite
    from klineage.cli import main
    from tests.conftest import EXAMPLES

    folder = tmp_path / "suite"
    for name in ("softmax", "rmsnorm"):
        (folder / name).mkdir(parents=True)
        for file in ("workload.py", "naive.py"):
            shutil.copy(EXAMPLES / name / file, folder / name / file)
    earlier = [{"features": {}, "transform": "x", "params": {}, "speedup": None, "passed": True, "source": "old"}]
    here, spread = tmp_path / "here.json", tmp_path / "spread.json"
    for path in (here, spread):
        path.write_text(json.dumps(earlier))
    added, skipped = build_memory(suite(str(folder), settings), settings, "cpu", 2, here)
    monkeypatch.setenv("KLINEAGE_HOME", str(settings.data_dir))
    monkeypatch.setenv("KLINEAGE_SEEDS", str(settings.seeds))
    args = ["memory", "build", "--suite", str(folder), "--budget", "2", "--device", "cpu", "--out", str(spread)]
    result = CliRunner().invoke(main, [*args, "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert added >= 2 and not skipped and f"{added} outcomes from 2 runs remembered" in result.output
    assert json.loads(spread.read_text()) == json.loads(here.read_text())
    assert json.loads(spread.read_text())[0]["source"] == "old"


def test_a_walk_task_walks_on_the_cpu_and_its_timing_task_times_only_a_finished_walk(settings):
    """The two tasks of mine-ecosystem --walk-device cpu --device cuda, called here: the walk is recorded where the
    timing task looks; as far as --max-steps asked, it is one to time; unfinished, it is not timed (that needs a GPU)
    but said to resume."""
    from dataclasses import replace
    from pathlib import Path

    from klineage.suites.ecosystem_tasks import Walked, time_expert, walk_expert

    walked = walk_expert("liger_relu_squared", settings, max_steps=1)
    # one attempt, as far as --max-steps 1 asked: a walk to time (the timing task's own --max-steps takes it)
    assert walked.status == "walked" and walked.finished and walked.walk_s > 0, walked
    assert (
        Path(walked.records).parent == settings.data_dir / "lineages"
        and (Path(walked.records) / "steps.jsonl").is_file()
    )
    row, skills = time_expert(replace(walked, finished=False), settings, "cuda")
    assert row.status == "error" and "unfinished" in row.error and not skills
    assert (
        time_expert(Walked("liger_relu_squared", status="not installed"), settings, "cuda")[0].status == "not installed"
    )
