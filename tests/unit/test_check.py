"""`check` on a GPU runs a check again, alone on its GPU, when it ran out of device memory beside other jobs (faked
gates: nothing runs here)."""

from klineage import check as check_module
from klineage.check import check, out_of_device_memory
from klineage.gates import Verdict
from klineage.program import load_program
from klineage.suites import SUITES
from klineage.workload import load_workload

OOM = (
    "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of 139.80 GiB "
    "of which 1.57 GiB is free."
)


def _run(monkeypatch, settings, answers: list[Verdict]) -> tuple[Verdict, list[bool]]:
    calls = []

    def fake_gate(gate, request, sandbox, alone=False):
        calls.append(alone)
        return answers[len(calls) - 1]

    monkeypatch.setattr(check_module, "run_gate", fake_gate)
    monkeypatch.setattr(check_module, "device_name", lambda device: "NVIDIA H200")
    folder = SUITES["heldout"] / "bias_gelu"
    report = check(
        load_workload(folder / "workload.py"),
        load_program(folder / "naive.py"),
        settings.replace(use_cache=False),
        "cuda",
        ("correctness",),
        sandbox=object(),
    )
    return report.verdicts[0], calls


def test_a_check_out_of_device_memory_beside_others_runs_again_alone(monkeypatch, settings):
    verdict, calls = _run(
        monkeypatch, settings, [Verdict("correctness", "error", "error", OOM), Verdict("correctness", "pass")]
    )
    assert calls == [False, True] and verdict.passed
    assert verdict.evidence["retried_alone"].startswith("OutOfMemoryError: CUDA out of memory")


def test_a_program_that_runs_out_alone_fails_and_other_failures_are_not_retried(monkeypatch, settings):
    oom = Verdict("correctness", "fail", "oom", "out of device memory: huge scratch buffer")
    verdict, calls = _run(monkeypatch, settings, [oom, oom])
    assert calls == [False, True] and verdict.code == "oom" and not verdict.passed
    verdict, calls = _run(monkeypatch, settings, [Verdict("correctness", "fail", "mismatch", "output 0: wrong")])
    assert calls == [False] and verdict.code == "mismatch"
    assert not out_of_device_memory(Verdict("correctness", "pass"))
    assert out_of_device_memory(Verdict("correctness", "error", "error", "x", evidence={"log": OOM}))
    assert not out_of_device_memory(Verdict("correctness", "fail", "oom", "out of host memory, asking for 17.00 GiB"))


class _Sandbox:
    """Answers each job with the next of `answers` and records the jobs it was given: nothing runs."""

    def __init__(self, answers):
        self.answers, self.jobs = list(answers), []

    def run(self, job):
        self.jobs.append(job)
        return self.answers[len(self.jobs) - 1]


def _pair(settings, answers, device="cuda"):
    from klineage.check import time_pair

    folder = SUITES["heldout"] / "bias_gelu"
    program = load_program(folder / "naive.py")
    sandbox = _Sandbox(answers)
    return time_pair(load_workload(folder / "workload.py"), program, program, settings, device, sandbox), sandbox.jobs


def test_a_timing_job_out_of_device_memory_beside_others_runs_again_alone(settings):
    """Run 22: 12 bench shards held the H200's memory and a timing job found 11 MiB free; it runs once more with
    the GPU alone for the whole job, and its effect keeps the first error."""
    from klineage.sandbox import SandboxResult

    value = {"case": "bench", "parent_ms": 1.0, "child_ms": 0.5}
    timed, jobs = _pair(settings, [SandboxResult(False, error=OOM, kind="exception"), SandboxResult(True, value)])
    assert timed.ok and [j.gpu_alone for j in jobs] == [False, True] and {j.device for j in jobs} == {"cuda"}
    assert timed.value["retried_alone"].startswith("OutOfMemoryError") and timed.value["child_ms"] == 0.5
    # out of memory alone too: a failure that says both
    timed, jobs = _pair(settings, [SandboxResult(False, error=OOM, kind="exception")] * 2)
    assert not timed.ok and len(jobs) == 2 and "alone, after: OutOfMemoryError" in timed.error


def test_other_timing_failures_and_the_cpu_are_not_retried(settings):
    from klineage.sandbox import SandboxResult

    crash = SandboxResult(False, error="crashed with signal 11", kind="crash")
    timed, jobs = _pair(settings, [crash, crash])
    assert not timed.ok and len(jobs) == 1 and timed.error == "crashed with signal 11"
    timed, jobs = _pair(settings, [SandboxResult(False, error=OOM, kind="exception")] * 2, device="cpu")
    assert len(jobs) == 1


def test_a_timing_job_takes_turns_on_the_gpu_lock_its_settings_name(settings):
    """$KLINEAGE_GPU_LOCK reaches the job through Settings and the Job, not through the environment."""
    from klineage.sandbox import GpuTurns, SandboxResult

    _, jobs = _pair(settings.replace(gpu_lock="/tmp/gpu0.lock"), [SandboxResult(True, {})])
    assert jobs[0].turns == GpuTurns("/tmp/gpu0.lock") and "KLINEAGE_GPU_LOCK" not in jobs[0].env
