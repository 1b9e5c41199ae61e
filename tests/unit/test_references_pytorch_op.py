"""A wild instance's references time PyTorch's own op as eager and torch.compile, not its workload's Model: that
Model is the start program (eager timed the start again, 0.03267 ms against 0.03267 ms on gems_mean_dim on the
H100) and torch.compile of it traced FlagGems for 50-106 s a job to compare a program with a compiled copy of
itself (docs/runs/2026-12-05-h100-wild2). The job runs only on CUDA: its pieces are tested here, on the CPU."""

import contextlib
from types import SimpleNamespace

import pytest
import torch

from klineage.bench.references import (
    EAGER_OF_PYTORCH,
    EAGER_OF_REFERENCE,
    REFERENCE_SPREAD,
    ReferencesPayload,
    pytorch_op_module,
    references_meta,
)
from klineage.bench.run import _timing_job
from klineage.bench.suites import Instance
from klineage.config import Settings
from klineage.gates.common import build
from klineage.program import load_program
from klineage.suites import wild
from klineage.workload import make_case_init_inputs


def _kernel(name: str) -> wild.WildKernel:
    return next(k for k in wild.catalogue() if k.name == name)


def _instance(data_dir, name: str, with_pytorch: bool) -> Instance:
    files = wild.write(_kernel(name), data_dir)
    origin = {"package": "flag_gems", "pytorch": str(files.pytorch)} if with_pytorch else {}
    return Instance(name, files.inputs, load_program(files.program), origin=origin)


def _meta_of(inst: Instance, settings: Settings) -> dict:
    plan = SimpleNamespace(device="cuda", settings=settings)
    job = _timing_job(inst, SimpleNamespace(path=inst.workload), [inst.start], plan)
    return references_meta(job.payload)


def test_the_judge_sends_the_pytorch_op_workloads_text_only_for_an_instance_that_has_one(data_dir):
    """The text, not the path: the candidate cannot read the data directory where the file lies."""
    settings = Settings.from_env(data_dir=data_dir)
    meta = _meta_of(_instance(data_dir, "gems_mean_dim", with_pytorch=True), settings)
    assert meta["pytorch_op"] == _kernel("gems_mean_dim").pytorch_source()
    assert str(data_dir) not in meta["pytorch_op"]
    assert "pytorch_op" not in _meta_of(_instance(data_dir, "gems_mean_dim", with_pytorch=False), settings)


def test_a_tuple_payload_as_callers_passed_before_times_the_workloads_model():
    request = SimpleNamespace(settings=Settings(), workload_path="w.py")
    payload = ReferencesPayload.of((request, ["start"]))
    assert payload == ReferencesPayload(request, ("start",), REFERENCE_SPREAD, None)
    assert ReferencesPayload.of((request, ["start"], -1.0)).spread_limit == -1.0
    assert "pytorch_op" not in references_meta(payload) and references_meta(payload)["workload"] == "w.py"


def _answering(monkeypatch, medians: tuple[float, ...]):
    """references_job with its candidate replaced: every task answers timings of these medians; the task metas it
    was asked with are recorded."""
    import klineage.gates.candidate as candidate
    from klineage.bench.references import references_job
    from klineage.timing import Timing

    asked: list[dict] = []

    def task(_candidate, name, **meta):
        asked.append(meta)
        return SimpleNamespace(meta={"timings": [Timing(m, m, m, m, m, 30, m).as_dict() for m in medians]})

    monkeypatch.setattr(candidate, "spec_for", lambda *a, **k: None)
    monkeypatch.setattr(candidate, "running", lambda spec: contextlib.nullcontext())
    monkeypatch.setattr(candidate, "task", task)
    return asked, references_job


def test_the_result_says_which_model_eager_and_torch_compile_ran(monkeypatch, tmp_path):
    asked, references_job = _answering(monkeypatch, (0.5, 0.4, 0.2))
    op = tmp_path / "pytorch.py"
    op.write_text("class Model: ...\n")
    request = SimpleNamespace(settings=Settings(), workload_path="w.py")
    assert references_job(ReferencesPayload(request, ("start",), pytorch_op=str(op)))["eager_of"] == EAGER_OF_PYTORCH
    assert asked[-1]["pytorch_op"] == "class Model: ...\n"
    assert references_job((request, ["start"]))["eager_of"] == EAGER_OF_REFERENCE
    assert "pytorch_op" not in asked[-1]


@pytest.mark.parametrize(
    "name, op",
    [
        ("gems_mean_dim", lambda x: x.mean(1)),
        ("gems_layer_norm", lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5)),
    ],
)
def test_the_candidate_builds_pytorchs_op_from_the_workloads_text(name, op):
    """As references_task does, on CPU tensors: the module's Model computes PyTorch's op on the start's inputs; with
    no file behind the module, the case's sizes are not rebound and there are no init inputs."""
    module = pytorch_op_module(_kernel(name).pytorch_source())
    assert make_case_init_inputs(module, {"M": 4096, "N": 4096}) == []
    module.M, module.N = 8, 16  # get_inputs reads the module's sizes: small ones for a CPU test
    inputs = module.get_inputs()
    model = build(module.Model, [])
    torch.testing.assert_close(model(*inputs), op(*inputs), rtol=0, atol=0)


def test_a_retime_times_the_programs_alone(monkeypatch, tmp_path):
    """The re-time in a fresh process reads only the programs' times: no eager, no torch.compile to build again in
    its cold process (Inductor took 50-106 s a job on the H100's wild programs)."""
    asked, references_job = _answering(monkeypatch, (0.2, 0.3))
    op = tmp_path / "pytorch.py"
    op.write_text("class Model: ...\n")
    request = SimpleNamespace(settings=Settings(), workload_path="w.py")
    result = references_job(ReferencesPayload(request, ("start", "final"), pytorch_op=str(op), programs_only=True))
    assert asked[-1]["programs_only"] is True and "pytorch_op" not in asked[-1]
    assert set(result) == {"program0", "program1", "rounds"}
    assert (result["program0"]["ms"], result["program1"]["ms"]) == (0.2, 0.3)


def test_the_bench_retime_asks_for_the_programs_alone(data_dir, monkeypatch):
    from klineage.bench import run

    inst = _instance(data_dir, "gems_mean_dim", with_pytorch=True)
    jobs = []

    class Fresh:
        def __init__(self, warm):
            assert warm is False

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def run(self, job):
            jobs.append(job)
            return SimpleNamespace(ok=False, error="not run here")

    monkeypatch.setattr(run, "Sandbox", Fresh)
    plan = SimpleNamespace(device="cuda", settings=Settings.from_env(data_dir=data_dir), say=lambda text: None)
    assert run._retime(inst, SimpleNamespace(path=inst.workload), {}, plan) == {"error": "not run here"}
    assert jobs[0].payload.programs_only is True


def _served(programs: tuple[str, ...]):
    """A candidate's side as references_task sees it: the start workload (one bench case) and the programs."""
    workload = SimpleNamespace(cases={"bench": {}}, bench_case=lambda: "bench")
    return SimpleNamespace(
        timed={}, spec=SimpleNamespace(others=programs), workload=lambda path: (workload, SimpleNamespace())
    )


def test_the_programs_are_timed_in_a_round_of_their_own_before_inductor_compiles(monkeypatch):
    """A references round disturbed the programs timed in it (gems_sort on the H100: x1.015 alone, x1.000 beside a
    just-compiled torch.compile of torch.sort; RESULTS.md#wild-h100-4): the programs' round shares no time_calls
    with eager or torch.compile, and comes before torch.compile is built on the first request."""
    import klineage.bench.references as references
    import klineage.gates.common as common
    import klineage.program as program
    import klineage.timing as timing
    import klineage.workload as workload
    from klineage.timing import Timing

    events: list = []
    medians = {"start": 0.30, "final": 0.25, "eager": 0.5, "torch.compile": 0.4}

    def time_calls(calls, *args):
        events.append(("time", tuple(c() for c in calls)))
        return [Timing(medians[c()], 0, 0, 0, 0, 30, 0) for c in calls]

    def reference_calls(served, meta, *setup):
        events.append(("build references", meta.get("pytorch_op")))
        return [lambda: "eager", lambda: "torch.compile"]

    monkeypatch.setattr(timing, "time_calls", time_calls)
    monkeypatch.setattr(references, "_reference_calls", reference_calls)
    monkeypatch.setattr(program, "install", lambda name: SimpleNamespace(ModelNew=name))
    monkeypatch.setattr(common, "build", lambda model, init: SimpleNamespace(cuda=lambda: model))
    monkeypatch.setattr(common, "input_sets", lambda *a, **k: [])
    monkeypatch.setattr(common, "rotating", lambda model, sets: lambda: model)
    monkeypatch.setattr(workload, "make_case_init_inputs", lambda *a: [])
    served = _served(("start", "final"))
    meta = {"workload": "w.py", "sets": 2, "warmup_ms": 1, "rep_ms": 1, "min_reps": 3, "pytorch_op": "op"}

    _, answer = references.references_task(served, SimpleNamespace(meta=meta))
    assert events == [("time", ("start", "final")), ("build references", "op"), ("time", ("eager", "torch.compile"))]
    assert [t["median_ms"] for t in answer["timings"]] == [0.5, 0.4, 0.30, 0.25]  # references, then the programs
    events.clear()
    references.references_task(served, SimpleNamespace(meta=meta))  # a second round: nothing built again
    assert events == [("time", ("start", "final")), ("time", ("eager", "torch.compile"))]
    events.clear()
    _, alone = references.references_task(
        _served(("start", "final")), SimpleNamespace(meta={**meta, "programs_only": True})
    )
    assert events == [("time", ("start", "final"))]
    assert [t["median_ms"] for t in alone["timings"]] == [0.30, 0.25]


def test_pytorchs_op_failing_on_the_device_leaves_the_programs_timed(monkeypatch):
    """A matmul of int32 tensors has no CUDA kernel (H100, docs/runs/2026-12-06-h100-wild6): eager's error in the
    timing round took the programs' times with it. Eager runs once first; its error is kept, no reference call is
    made, and the programs' round is answered all the same."""
    import klineage.bench.references as references
    import klineage.gates.common as common

    class Model:
        def __call__(self, a, b):
            raise NotImplementedError("\"addmm_cuda\" not implemented for 'Int'")

    monkeypatch.setattr(common, "build", lambda model, init: SimpleNamespace(cuda=lambda: Model()))
    served = SimpleNamespace(timed={})
    meta = {"pytorch_op": "class Model: ...\ndef get_inputs(): return []\n"}
    calls = references._reference_calls(served, meta, None, {}, [], [("a", "b")])
    assert calls == []
    assert served.timed["eager_error"].startswith('NotImplementedError: "addmm_cuda" not implemented')
    assert "torch_compile_error" not in served.timed


def test_the_job_reports_eager_failed_and_keeps_the_programs_times(monkeypatch):
    import klineage.gates.candidate as candidate
    from klineage.bench.references import references_job
    from klineage.timing import Timing

    def task(_candidate, name, **meta):  # the programs' two timings only, and eager's error
        timings = [Timing(m, m, m, m, m, 30, m).as_dict() for m in (0.2, 0.1)]
        return SimpleNamespace(meta={"timings": timings, "eager_error": "NotImplementedError: no CUDA kernel"})

    monkeypatch.setattr(candidate, "spec_for", lambda *a, **k: None)
    monkeypatch.setattr(candidate, "running", lambda spec: contextlib.nullcontext())
    monkeypatch.setattr(candidate, "task", task)
    request = SimpleNamespace(settings=Settings(), workload_path="w.py")
    result = references_job((request, ["start", "final"]))
    assert (result["program0"]["ms"], result["program1"]["ms"]) == (0.2, 0.1)
    assert result["eager"] == result["torch_compile"] == {"error": "NotImplementedError: no CUDA kernel"}


def test_the_report_names_the_instances_whose_pytorch_op_failed():
    from klineage.bench.report import _timing_notes

    references = {"ao_int_matmul_kernel": {"eager": {"error": "NotImplementedError: no CUDA kernel"}}, "ok": {}}
    lines = _timing_notes({"references": references, "stamp": {"timed": False}})
    failed = [line for line in lines if line.startswith("PyTorch's op failed on this device (1;")]
    assert len(failed) == 1 and "ao_int_matmul_kernel (NotImplementedError: no CUDA kernel)" in failed[0]


def test_torch_compiles_first_run_is_host_work_and_its_autotuning_alone(monkeypatch):
    """The references job's `torch.compile` first call lets go of the shared GPU turn (a timer waiting for the GPU
    alone otherwise stops every shard until the compile ends), and Inductor's benchmarks inside it take the GPU
    alone; the benchmark method is Inductor's own again afterwards."""
    import torch
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    import klineage.bench.references as references
    import klineage.gates.common as common
    import klineage.sandbox as sandbox

    state, seen = [], []

    @contextlib.contextmanager
    def turn(kind):
        state.append(kind)
        try:
            yield
        finally:
            state.pop()

    monkeypatch.setattr(sandbox, "host_work", lambda: turn("host"))
    monkeypatch.setattr(sandbox, "exclusive_turn", lambda: turn("exclusive"))
    original = CachingAutotuner.benchmark_all_configs
    monkeypatch.setattr(CachingAutotuner, "benchmark_all_configs", lambda self: seen.append(("bench", list(state))))

    class Model:
        def __call__(self, *args):
            seen.append(("call", list(state)))

    def compiled(model):
        def run(*args):
            seen.append(("compiled", list(state)))
            CachingAutotuner.benchmark_all_configs(object())

        return run

    monkeypatch.setattr(common, "build", lambda model, init: SimpleNamespace(cuda=lambda: Model()))
    monkeypatch.setattr(torch, "compile", compiled)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    served = SimpleNamespace(timed={})
    meta = {"pytorch_op": "class Model: ...\ndef get_inputs(): return []\n"}
    calls = references._reference_calls(served, meta, None, {}, [], [("a", "b")])
    assert len(calls) == 2 and "torch_compile_error" not in served.timed
    assert seen == [("call", []), ("compiled", ["host"]), ("bench", ["host", "exclusive"])]
    monkeypatch.undo()
    assert CachingAutotuner.benchmark_all_configs is original
