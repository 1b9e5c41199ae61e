"""The memory baseline's knowledge base, built by blind optimization runs on a suite's instances: here, one after
another, or on Dask distributed (klineage.scale), one task per instance.

On the cluster a worker runs an instance's blind optimization and sends its outcomes back (`Remembered`); the client
alone writes the knowledge base, after every instance that ends: what it held before the build, then every finished
instance's outcomes in suite order, so a finished build's file is the single process's (which appends each attempt
as it is made, in suite order)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from klineage.bench.run import say_attempt
from klineage.bench.suites import Instance
from klineage.config import Settings
from klineage.optimize import features, optimize, proposer_for
from klineage.proposers import MemoryEntry, append_memory, load_memory, memory_entries, write_memory
from klineage.sandbox import Sandbox
from klineage.scale import (
    Engine,
    EngineReport,
    Outcome,
    cluster,
    engine_report,
    run_tasks,
    worker_sandbox,
    worker_settings,
)
from klineage.workload import UserError, load_workload


@dataclass(frozen=True)
class Remembered:
    """One instance's blind run as the knowledge base keeps it: its outcomes, or why it was skipped (a start that
    fails its gates on this device teaches nothing)."""

    name: str
    entries: tuple[MemoryEntry, ...] = ()
    skipped: str = ""


def remember_instance(
    inst: Instance,
    settings: Settings,
    device: str,
    budget: int,
    sandbox: Sandbox,
    on_entries: Callable[[list[MemoryEntry]], None] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Remembered:
    """Blind optimization on the instance's start, every attempt turned into knowledge-base entries; `on_entries`
    gets each attempt's as it is made (the single process writes them then: a build cut at a deadline keeps what it
    learned)."""
    if on_progress:
        on_progress(inst.name)
    workload = load_workload(inst.workload)
    proposer = proposer_for("blind", workload, settings, device)
    feats, source = features(inst.start, workload), f"{workload.name}:blind"
    kept: list[MemoryEntry] = []

    def remembered(attempt) -> None:
        entries = memory_entries([attempt], feats, source)
        kept.extend(entries)
        if on_entries:
            on_entries(entries)
        say_attempt(on_progress, inst.name, attempt)

    try:
        optimize(workload, inst.start, proposer, settings, device, budget, sandbox, explore=True, on_attempt=remembered)
    except UserError as e:
        return Remembered(inst.name, tuple(kept), str(e))
    return Remembered(inst.name, tuple(kept))


def build_memory(
    instances: list[Instance],
    settings: Settings,
    device: str,
    budget: int,
    path: Path,
    on_progress: Callable[[str], None] | None = None,
) -> tuple[int, dict[str, str]]:
    """The memory baseline's knowledge base: blind optimization runs on the given instances (the experts' simplest
    forms), every attempt remembered with its program's features and observed outcome. Returns the outcomes added
    and the instances skipped, with why."""
    added, skipped = 0, {}
    with Sandbox(warm=settings.warm) as sandbox:
        for inst in instances:
            ended = remember_instance(
                inst, settings, device, budget, sandbox, lambda e: append_memory(e, path), on_progress
            )
            added += len(ended.entries)
            if ended.skipped:
                skipped[inst.name] = ended.skipped
    return added, skipped


def remember_on_worker(inst: Instance, settings: Settings, device: str, budget: int) -> Remembered:
    """One instance's blind run on a cluster worker, with that worker's sandbox; nothing written there."""
    return remember_instance(inst, settings, device, budget, worker_sandbox(settings.warm))


def build_memory_on(
    engine: Engine,
    instances: list[Instance],
    settings: Settings,
    device: str,
    budget: int,
    path: Path,
    on_progress: Callable[[str], None] | None = None,
    on_cluster: Callable[[str], None] | None = None,
) -> tuple[int, dict[str, str], EngineReport]:
    """build_memory on `engine`'s cluster, one task per instance: (outcomes added, instances skipped or failed on
    every try with why, the engine's report). The knowledge base is rewritten after every instance that ends."""
    from klineage.scale import dashboard

    before = load_memory(path)
    ended: dict[str, Remembered] = {}
    gpu = device == "cuda"
    tasks = {i.name: (i, worker_settings(settings), device, budget) for i in instances}
    with cluster(engine, gpu) as client:
        if on_cluster:
            link = dashboard(client)
            on_cluster(f"Dask dashboard: {link}" if link else "Dask: the scheduler serves no dashboard")

        def done(outcome: Outcome) -> None:
            ended[outcome.name] = outcome.value if outcome.ok else Remembered(outcome.name, skipped=outcome.error)
            finished = [ended[i.name] for i in instances if i.name in ended]  # suite order, whatever order they end
            write_memory([*before, *(e for r in finished for e in r.entries)], path)
            if on_progress:
                again = f" after {outcome.attempts} attempts" if outcome.attempts > 1 else ""
                on_progress(f"{outcome.name}: {len(ended[outcome.name].entries)} outcomes{again}")

        outcomes = run_tasks(client, remember_on_worker, tasks, gpu, done)
        ran = engine_report(client, engine, list(outcomes.values()))
    added = sum(len(r.entries) for r in ended.values())
    return added, {n: r.skipped for n, r in ended.items() if r.skipped}, ran
