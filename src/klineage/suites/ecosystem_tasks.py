"""mine-ecosystem's experts as Dask tasks (klineage.scale): one task per expert, or two where the walk is made on a
CPU and timed on a GPU (`--walk-device cpu --device cuda`).

The split is the one the single process offers by hand (`mine --device cpu` on a machine without a GPU, then
`mine --walk-device cpu --device cuda` on a GPU box, the same data directory): the walk, every step gated through
Triton's interpreter, needs no GPU and goes to any worker, CPU-only workers included; its accepted steps are then
timed and its conditions probed by a second task that requires the resource GPU=1 and starts once the walk has
ended. The walk's records (`<data dir>/lineages/<id>`) are handed over by path: on one machine both tasks see the
same data directory; across nodes the GPU workers must see the CPU workers' `lineages` folder (docs/scale.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

from klineage.scale import Task
from klineage.suites.ecosystem import EcosystemExpert, EcosystemRow, expert_pair, mine_expert_apart, select


@dataclass(frozen=True)
class Walked:
    """A walk task's end, what its timing task needs: where the walk's records are (`records`), whether the walk
    finished, and its seconds; or why there is no walk (`status` "not installed" or "error", with `error`)."""

    name: str
    status: str = "walked"
    records: str = ""
    finished: bool = False
    walk_s: float = 0.0
    error: str = ""


def expert_tasks(
    experts: list[EcosystemExpert],
    settings,
    device: str,
    walk_device: str,
    max_steps: int | None,
    probe: bool,
) -> dict[str, Task]:
    """The run's tasks, by name: per expert, `<name>` (mined where it is, a GPU with `device` cuda), or, where the
    walk is made on the CPU and timed on a GPU, `<name>:walk` (no GPU) followed by `<name>` (GPU=1). The task
    named after the expert gives its (row, skills)."""
    tasks: dict[str, Task] = {}
    gpu = device == "cuda"
    for e in experts:
        if walk_device == device:
            tasks[e.name] = Task(mine_expert_apart, (e.name, settings, device, walk_device, max_steps, probe), gpu)
            continue
        tasks[walk_name(e.name)] = Task(walk_expert, (e.name, settings, max_steps))
        tasks[e.name] = Task(time_expert, (settings, device, probe, max_steps), gpu, after=walk_name(e.name))
    return tasks


def walk_name(expert: str) -> str:
    """The walk task's name for an expert (its timing task is named after the expert)."""
    return f"{expert}:walk"


def walk_expert(name: str, settings, max_steps: int | None = None) -> Walked:
    """The expert's walk on the CPU (mine.mine: resumed where recorded, every step gated through the interpreter),
    on any worker. Failures are values: a timing task then says why instead of timing."""
    from klineage.mine import mine, walked_far_enough
    from klineage.scale import worker_sandbox

    (expert,) = select([name])
    if not expert.installed():
        return Walked(name, status="not installed")
    started = time.perf_counter()
    try:
        workload, program = expert_pair(expert, settings)
        lineage = mine(workload, program, settings, "cpu", worker_sandbox(settings.warm), max_steps=max_steps)
    except Exception as e:  # a value, not a crash: the other experts still run
        return Walked(name, status="error", error=f"{type(e).__name__}: {str(e)[:300]}")
    records = settings.data_dir / "lineages" / lineage.id
    finished = walked_far_enough(lineage, max_steps)
    return Walked(name, records=str(records), finished=finished, walk_s=time.perf_counter() - started)


def time_expert(
    walked: Walked, settings, device: str, probe: bool = True, max_steps: int | None = None
) -> tuple[EcosystemRow, list]:
    """The walk's accepted steps timed on this worker's GPU and its conditions probed there, the skills saved into
    the expert's own library (mine_expert_apart with the walk made on the CPU); (its row, its skills). The row's
    `walk_s` is the walk task's, its `wall_s` both tasks'."""
    (expert,) = select([walked.name])
    base = {"name": expert.name, "package": expert.package, "modules": expert.modules}
    if walked.status != "walked":
        return EcosystemRow(**base, status=walked.status, error=walked.error), []
    if not Path(walked.records).is_dir():
        # across nodes the data directory is each node's own: the walk's records must be where this worker looks
        why = f"the walk's records {walked.records} are not on this worker's file system (docs/scale.md)"
        return EcosystemRow(**base, status="error", error=why, walk_s=round(walked.walk_s, 1)), []
    if not walked.finished:  # finished, or as far as max_steps asked (mine.recorded_walk): else it resumes later
        why = "the walk stopped unfinished; run again to resume it, then it is timed"
        return EcosystemRow(**base, status="error", error=why, walk_s=round(walked.walk_s, 1)), []
    row, skills = mine_expert_apart(walked.name, settings, device, "cpu", max_steps, probe=probe)
    return replace(row, walk_s=round(walked.walk_s, 1), wall_s=round(walked.walk_s + row.wall_s, 1)), skills
