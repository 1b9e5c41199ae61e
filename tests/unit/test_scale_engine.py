"""The Dask engine's choices that need no cluster (klineage.scale): which engine the options give, one GPU per
worker, what a report says of its engine, and a tally of tasks put back in suite order. The cluster itself:
tests/interpreter/test_scale.py."""

import pytest
from click.testing import CliRunner

from klineage.bench.report import _engine_lines
from klineage.cli import main
from klineage.scale import Engine, _local_spec, visible_gpus
from klineage.workload import UserError

pytest.importorskip("distributed")


def test_the_options_choose_the_embedded_path_a_local_cluster_or_a_running_one():
    assert Engine.of(None, None).embedded and Engine.of("", None) == Engine()
    assert Engine.of(None, 2) == Engine(workers=2) and not Engine(workers=2).embedded
    assert Engine.of("tcp://h:8786", None).scheduler == "tcp://h:8786"
    with pytest.raises(UserError, match="give one"):
        Engine.of("tcp://h:8786", 2)
    with pytest.raises(UserError, match="positive"):
        Engine.of(None, 0)


def test_each_local_gpu_worker_sees_its_own_gpu_and_offers_it_once(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert visible_gpus() == ["2", "5"]
    spec = _local_spec(2, gpu=True)
    options = [w["options"] for w in spec.values()]
    assert [o["env"]["CUDA_VISIBLE_DEVICES"] for o in options] == ["2", "5"]
    assert all(o["resources"] == {"GPU": 1} and o["nthreads"] == 1 for o in options)
    with pytest.raises(UserError, match="at most one worker per GPU"):
        _local_spec(3, gpu=True)
    cpu = _local_spec(3, gpu=False)
    assert len(cpu) == 3 and all("resources" not in w["options"] for w in cpu.values())


def test_the_report_names_the_engine_the_retried_and_the_failed():
    assert _engine_lines(None) == []
    engine = {"engine": "a local cluster", "workers": 2, "retried": {"softmax": 2}, "failed": {"matmul": "boom"}}
    line = _engine_lines(engine)[0]
    assert line.startswith("Engine: Dask distributed on a local cluster, 2 workers.")
    assert "Retried (a worker lost mid-task): softmax (2 attempts)." in line and "matmul: boom" in line


def test_a_queue_and_a_cluster_both_sharing_the_suite_out_is_one_error_line(tmp_path):
    args = ["bench", "naive", "--methods", "autotune", "--queue", str(tmp_path / "q"), "--workers", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "give one" in result.output and result.output.count("\n") == 1
    both = CliRunner().invoke(main, ["optimize-many", str(tmp_path), "--workers", "2", "--scheduler", "tcp://h:1"])
    assert both.exit_code == 2 and "give one" in both.output


def test_instances_ended_in_any_order_are_put_back_in_suite_order(settings):
    from klineage.bench.metrics import Row
    from klineage.bench.run import Tally
    from klineage.bench.suites import suite

    a, b = suite("naive", settings)[:2]

    def part(inst):
        tally = Tally([inst], ["x", "y"], 1, "cpu", "c")
        tally.ran.append(inst)
        fields = {f: None for f in Row.__dataclass_fields__} | {"instance": inst.name, "escapes": [], "unchecked": []}
        tally.rows += [Row(**{**fields, "method": m}) for m in ("x", "y")]
        tally.costs[inst.name] = {"references_s": 0}
        return tally

    whole = Tally([a, b], ["x", "y"], 1, "cpu", "c")
    whole.absorb(part(b))
    whole.absorb(part(a))
    whole.in_order([a, b])
    assert [i.name for i in whole.ran] == [a.name, b.name] and set(whole.costs) == {a.name, b.name}
    assert [(r.instance, r.method) for r in whole.rows] == [(a.name, "x"), (a.name, "y"), (b.name, "x"), (b.name, "y")]


def test_cpu_workers_are_added_to_a_local_cluster_only():
    assert Engine.of(None, 2, 3) == Engine(workers=2, cpu_workers=3)
    assert Engine(workers=2, cpu_workers=3).local_workers == 5
    assert Engine.of(None, 2, None) == Engine.of(None, 2, 0) == Engine(workers=2)
    with pytest.raises(UserError, match="give --workers N with it"):
        Engine.of("tcp://h:8786", None, 2)  # a running cluster has the workers it was started with
    with pytest.raises(UserError, match="give --workers N with it"):
        Engine.of(None, None, 2)
    result = CliRunner().invoke(main, ["mine-ecosystem", "--cpu-workers", "2", "--device", "cpu"])
    assert result.exit_code == 2 and "--cpu-workers adds CPU-only workers" in result.output


def test_a_mixed_local_cluster_gives_its_cpu_workers_no_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    spec = _local_spec(2, gpu=True, cpu_workers=3)
    gpu = [w["options"] for n, w in spec.items() if not n.startswith("klineage-cpu-")]
    cpu = [w["options"] for n, w in spec.items() if n.startswith("klineage-cpu-")]
    assert len(gpu) == 2 and len(cpu) == 3
    assert all(o["resources"] == {"GPU": 1} for o in gpu)
    assert [o["env"]["CUDA_VISIBLE_DEVICES"] for o in gpu] == ["2", "5"]
    # no GPU resource (a timing task never goes there) and no GPU seen (an interpreter job opens no CUDA context)
    assert all("resources" not in o and o["env"] == {"CUDA_VISIBLE_DEVICES": ""} for o in cpu)
    assert all(o["nthreads"] == 1 for o in gpu + cpu)


def test_a_walk_on_the_cpu_timed_on_a_gpu_is_two_tasks_per_expert(settings):
    from klineage.scale import submission
    from klineage.suites.ecosystem import mine_expert_apart, select
    from klineage.suites.ecosystem_tasks import expert_tasks, time_expert, walk_expert

    experts = select(["gems_reglu", "liger_relu_squared"])
    tasks = expert_tasks(experts, settings, "cuda", "cpu", 5, True)
    assert list(tasks) == ["gems_reglu:walk", "gems_reglu", "liger_relu_squared:walk", "liger_relu_squared"]
    walk, timing = tasks["gems_reglu:walk"], tasks["gems_reglu"]
    assert walk.function is walk_expert and not walk.gpu and walk.resources is None and not walk.after
    assert timing.function is time_expert and timing.resources == {"GPU": 1} and timing.after == "gems_reglu:walk"
    # submitted: the timing gets the walk's future first (Dask waits for it and passes its value), and its GPU
    walked = object()
    args, keywords = submission(timing, "run1", "gems_reglu", {"gems_reglu:walk": walked})
    assert args[-1][0] is walked and args[1] is time_expert and keywords["resources"] == {"GPU": 1}
    assert submission(walk, "run1", "gems_reglu:walk", {})[1]["resources"] is None
    # walked and timed on one device: one task each, a GPU where it times
    same = expert_tasks(experts, settings, "cuda", "cuda", None, True)
    assert list(same) == ["gems_reglu", "liger_relu_squared"]
    assert all(t.function is mine_expert_apart and t.resources == {"GPU": 1} and not t.after for t in same.values())
    assert all(t.resources is None for t in expert_tasks(experts, settings, "cpu", "cpu", None, True).values())


def test_a_task_may_follow_only_an_earlier_one():
    from klineage.scale import Task, run_graph

    with pytest.raises(ValueError, match="not an earlier task"):
        run_graph(None, {"b": Task(print, after="a"), "a": Task(print)})


def test_a_timing_task_says_why_it_times_nothing_without_the_walks_records(settings, tmp_path):
    from klineage.suites.ecosystem_tasks import Walked, time_expert

    row, skills = time_expert(Walked("gems_reglu", status="error", error="boom"), settings, "cuda")
    assert (row.status, row.error, skills) == ("error", "boom", [])
    row, _ = time_expert(Walked("gems_reglu", records=str(tmp_path / "elsewhere"), finished=True), settings, "cuda")
    assert row.status == "error" and "not on this worker's file system" in row.error
    row, _ = time_expert(Walked("gems_reglu", records=str(tmp_path), walk_s=3.0), settings, "cuda")
    assert "unfinished" in row.error and row.walk_s == 3.0


def test_the_single_process_ways_to_share_a_suite_are_refused_on_a_cluster(tmp_path):
    for command in (["bench", "naive", "--methods", "autotune"], ["memory", "build", "--suite", "naive"]):
        for engine in (["--workers", "2"], ["--scheduler", "tcp://h:1"]):
            result = CliRunner().invoke(main, [*command, "--shard", "1/2", *engine])
            assert result.exit_code == 2 and "--shard and --workers/--scheduler" in result.output, result.output


def test_workers_take_no_gpu_lock_file(settings, monkeypatch, tmp_path):
    """KLINEAGE_GPU_LOCK is the embedded path's: every engine path hands its workers settings without it."""
    import contextlib

    import klineage.bench.engine as bench_engine
    import klineage.bench.memory as bench_memory
    import klineage.scale as scale
    from klineage.bench.suites import suite

    locked = settings.replace(gpu_lock=str(tmp_path / "gpu.lock"))
    handed: list = []

    @contextlib.contextmanager
    def no_cluster(engine, gpu):
        yield None

    def capture(client, function, tasks, gpu=False, on_done=None, on_start=None):
        handed.extend(a for args in tasks.values() for a in args)
        return {}

    def capture_graph(client, tasks, on_done=None, on_start=None):
        handed.extend(a for t in tasks.values() for a in t.args)
        for name in tasks:  # every task ends without running: rows saying so
            on_done(scale.Outcome(name, error="not run"))
        return {}

    for module in (bench_engine, bench_memory):
        monkeypatch.setattr(module, "cluster", no_cluster)
        monkeypatch.setattr(module, "run_tasks", capture)
        monkeypatch.setattr(module, "engine_report", lambda *a: scale.EngineReport("here", 0))
    monkeypatch.setattr(scale, "cluster", no_cluster)
    monkeypatch.setattr(scale, "run_graph", capture_graph)
    monkeypatch.setattr(scale, "dashboard", lambda client: "")
    (one,) = [i for i in suite("naive", settings) if i.name == "softmax"]
    bench_engine.run_bench_on(Engine(workers=2), [one], ["autotune"], 1, locked, "cpu", None)
    bench_memory.build_memory_on(Engine(workers=2), [one], locked, "cpu", 1, tmp_path / "memory.json")
    from klineage.cli.mine_commands import _mine_ecosystem_on
    from klineage.suites.ecosystem import select

    _mine_ecosystem_on(
        Engine(workers=2), select(["gems_reglu"]), tmp_path / "lib", locked, "cuda", "cpu", 1, True, True
    )
    given = [a for a in handed if hasattr(a, "gpu_lock")] + [a.settings for a in handed if hasattr(a, "settings")]
    assert len(given) == 4 and all(s.gpu_lock == "" for s in given)
