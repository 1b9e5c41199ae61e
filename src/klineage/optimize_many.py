"""`klineage optimize-many FOLDER`: every program of a folder optimized, each with its workload, as `optimize` does
one; here one after another, or side by side on a Dask cluster (klineage.scale), one task per program.

A folder holds one subfolder per program, with `workload.py` and `program.py` (or `naive.py`: a bench suite folder
is a folder of programs too). Each program's outputs (program.py, changes.diff, trajectory.json, report.md) are
written by the client under OUT/<name>, and OUT/summary.json lists every program's end."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from klineage.config import Settings, write_whole
from klineage.optimize import optimize, proposer_for
from klineage.program import load_program
from klineage.scale import Engine, Outcome, cluster, dashboard, run_tasks, worker_sandbox, worker_settings
from klineage.trajectory import Trajectory, write_outputs
from klineage.workload import UserError, load_workload

PROGRAM_NAMES = ("program.py", "naive.py")  # a subfolder's program, the first of these it has


@dataclass(frozen=True)
class Target:
    """One program of the folder and the workload it computes."""

    name: str
    workload: Path
    program: Path


@dataclass(frozen=True)
class Run:
    """What every program's optimization shares: the method, its budget, where it runs, what it reads."""

    method: str
    budget: int
    settings: Settings
    device: str
    library: Path | None = None
    memory: Path | None = None


@dataclass(frozen=True)
class Optimized:
    """One program's end: its trajectory, or why there is none (its workload did not load, its start failed its
    gates, its task failed on every try); `attempts` > 1: a lost worker made it run again."""

    name: str
    trajectory: Trajectory | None = None
    error: str = ""
    attempts: int = 1

    def summary(self) -> dict:
        t = self.trajectory
        if t is None:
            return {"name": self.name, "error": self.error, "attempts": self.attempts}
        return {
            "name": self.name,
            "evaluations": t.evaluations,
            "kept": sum(a.kept for a in t.attempts),
            "speedup": t.speedup,
            "stop": t.stop,
            "best_hash": t.best.hash,
            "attempts": self.attempts,
        }


def targets(folder: Path) -> list[Target]:
    """The folder's programs in name order: each subfolder with a workload.py and a program.py (or naive.py)."""
    if not Path(folder).is_dir():
        raise UserError(f"{folder}: not a folder")
    found = []
    for sub in sorted(p for p in Path(folder).iterdir() if p.is_dir()):
        program = next((sub / n for n in PROGRAM_NAMES if (sub / n).is_file()), None)
        if (sub / "workload.py").is_file() and program is not None:
            found.append(Target(sub.name, sub / "workload.py", program))
    if not found:
        raise UserError(f"{folder}: no subfolder holds a workload.py and a program.py (or naive.py)")
    return found


def optimize_target(target: Target, run: Run, sandbox=None) -> Optimized:
    """One program optimized as `klineage optimize` does; a workload that does not load or a start that fails its
    gates is a value saying so, and the other programs go on."""
    try:
        workload = load_workload(target.workload)
        proposer = proposer_for(run.method, workload, run.settings, run.device, run.library, run.memory)
        t = optimize(workload, load_program(target.program), proposer, run.settings, run.device, run.budget, sandbox)
    except UserError as e:
        return Optimized(target.name, error=str(e))
    return Optimized(target.name, t)


def optimize_on_worker(target: Target, run: Run) -> Optimized:
    """optimize_target on a cluster worker, with that worker's sandbox."""
    return optimize_target(target, run, worker_sandbox(run.settings.warm))


def optimize_many(
    found: list[Target],
    run: Run,
    engine: Engine = Engine(),
    on_done: Callable[[Optimized], None] | None = None,
    on_cluster: Callable[[str], None] | None = None,
) -> list[Optimized]:
    """Every target optimized, in the order given: here one after another (the embedded engine), else one task per
    target on the engine's cluster. `on_done` hears of each as it ends."""
    if engine.embedded:
        from klineage.sandbox import Sandbox

        out = []
        with Sandbox(warm=run.settings.warm) as sandbox:
            for target in found:
                out.append(optimize_target(target, run, sandbox))
                if on_done:
                    on_done(out[-1])
        return out
    run = Run(run.method, run.budget, worker_settings(run.settings), run.device, run.library, run.memory)
    ended: dict[str, Optimized] = {}

    def done(outcome: Outcome) -> None:
        if outcome.ok:
            ended[outcome.name] = Optimized(
                outcome.name, outcome.value.trajectory, outcome.value.error, outcome.attempts
            )
        else:
            ended[outcome.name] = Optimized(outcome.name, error=outcome.error, attempts=outcome.attempts)
        if on_done:
            on_done(ended[outcome.name])

    gpu = run.device == "cuda"
    with cluster(engine, gpu) as client:
        if on_cluster:
            on_cluster(f"Dask dashboard: {dashboard(client) or 'none'}")
        run_tasks(client, optimize_on_worker, {t.name: (t, run) for t in found}, gpu, done)
    return [ended[t.name] for t in found]


def write_all(results: list[Optimized], out: Path) -> Path:
    """Each trajectory's outputs under OUT/<name>, and OUT/summary.json with every program's end."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for r in results:
        if r.trajectory is not None:
            write_outputs(r.trajectory, out / r.name)
    path = out / "summary.json"
    write_whole(path, json.dumps([r.summary() for r in results], indent=2, default=str))
    return path
