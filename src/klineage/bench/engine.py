"""A bench run on Dask distributed (klineage.scale): one task per instance, on a local cluster or a running one.

One task per instance, not per (instance, method): an instance's methods share its measurements (optimize's
`memo`: the start's checks and times) and its references time every method's final program side by side in one
job, so splitting the methods apart would change the rows. Each task runs bench.run's own `run_instance` in a
worker (with that worker's sandbox) and sends its tally back; the client alone writes the report, after every
instance that finishes, so a run cut short or a worker lost keeps what finished. The rows are the serial path's:
the same code on the same instance, put back in suite order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from klineage.bench.run import BenchPlan, Tally, begin, run_instance
from klineage.bench.suites import Instance
from klineage.config import Settings
from klineage.scale import (
    Attempt,
    Engine,
    Outcome,
    cluster,
    dashboard,
    engine_report,
    run_tasks,
    worker_sandbox,
    worker_settings,
)


@dataclass(frozen=True)
class InstanceTask:
    """What every instance task of one run shares (bench.run.BenchPlan without the sandbox, which is the worker's)."""

    methods: list[str]
    budget: int
    settings: Settings
    device: str
    library: Path | None
    memory: Path | None
    commit: str
    retime: bool = False


def bench_instance(inst: Instance, task: InstanceTask) -> Tally:
    """One instance, every method, on a worker: what bench.run's serial loop does for it, into a tally of its own."""
    tally = Tally([inst], task.methods, task.budget, task.device, task.commit)
    tally.ran.append(inst)
    sandbox = worker_sandbox(task.settings.warm)
    plan = BenchPlan(
        task.methods,
        task.budget,
        task.settings,
        task.device,
        task.library,
        task.memory,
        sandbox,
        None,
        task.commit,
        task.retime,
    )
    run_instance(inst, plan, tally)
    return tally


def run_bench_on(
    engine: Engine,
    instances: list[Instance],
    methods: list[str],
    budget: int,
    settings: Settings,
    device: str,
    library: Path | None,
    memory: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
    on_instance: Callable[[dict], None] | None = None,
    earlier: dict | None = None,
    retime: bool = False,
    not_offered: dict[str, str] | None = None,
    on_cluster: Callable[[str], None] | None = None,
    on_start: Callable[[Attempt], None] | None = None,
) -> dict:
    """bench.run.run_bench on `engine`'s cluster: the same report, plus `engine` (where it ran, what was retried,
    what failed on every try). `on_instance` gets the report so far after every instance that finishes;
    `on_cluster` is told once where the cluster's dashboard is; `on_start` hears of every task attempt."""
    tally, done = begin(instances, methods, budget, settings, device, earlier, not_offered)
    todo = [i for i in instances if i.name not in done]
    task = InstanceTask(methods, budget, worker_settings(settings), device, library, memory, tally.commit, retime)
    gpu = device == "cuda"
    failed: list[str] = []
    with cluster(engine, gpu) as client:
        if on_cluster:
            link = dashboard(client)
            on_cluster(f"Dask dashboard: {link}" if link else "Dask: the scheduler serves no dashboard")

        def finished(outcome: Outcome) -> None:
            if outcome.ok:
                tally.absorb(outcome.value)
            else:
                failed.append(outcome.name)
            if on_progress:
                state = "finished" if outcome.ok else f"failed ({outcome.error[:80]})"
                again = f" after {outcome.attempts} attempts" if outcome.attempts > 1 else ""
                on_progress(f"{outcome.name}: {state}{again}")
            if on_instance:
                tally.in_order(instances)
                so_far = tally.result(partial=True)
                ran_names = {i.name for i in tally.ran}
                so_far["stamp"]["unfinished"] = [i.name for i in instances if i.name not in ran_names]
                on_instance(so_far)

        outcomes = run_tasks(client, bench_instance, {i.name: (i, task) for i in todo}, gpu, finished, on_start)
        ran = engine_report(client, engine, list(outcomes.values()))
    tally.in_order(instances)
    result = tally.result(partial=bool(failed))
    if failed:
        result["stamp"]["unfinished"] = failed
    result["engine"] = ran.as_dict()
    return result
