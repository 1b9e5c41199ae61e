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
