"""The optimizing commands: `optimize` (skills applied to a program under a budget), `optimize-many` (every program
of a folder, here or on a Dask cluster) and `demo` (mine, then optimize, end to end)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from klineage.cli.common import (
    EXAMPLES_DIR,
    announce_workload,
    console,
    engine_options,
    library_option,
    lineage_table,
    llm_budget_options,
    progress_bar,
    with_llm,
)
from klineage.config import Settings
from klineage.workload import UserError

DEMO_EXPERT = ("rmsnorm", "tuned.py")  # mined by `klineage demo`
DEMO_TARGET = ("rmsnorm", "naive.py")  # optimized with the mined skills


@click.command()
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--budget", type=int, default=8, show_default=True, help="Gate evaluations for the optimize step.")
@click.option("--json", "as_json", is_flag=True)
def demo(device, budget, as_json) -> None:
    """The main job end to end: mine the bundled RMSNorm expert into a library, optimize the bundled naive RMSNorm
    with the mined skills, print the lineage and the report (on the CPU when there is no GPU)."""
    from klineage.check import resolve_device
    from klineage.library import Library
    from klineage.mining import mine_into
    from klineage.optimize import optimize as run_optimize
    from klineage.optimize import proposer_for, report, write_outputs
    from klineage.program import load_program
    from klineage.sandbox import Sandbox
    from klineage.workload import load_workload

    dev = resolve_device(device)
    settings = Settings.from_env()
    workload = load_workload(EXAMPLES_DIR / DEMO_EXPERT[0] / "workload.py")
    expert = load_program(EXAMPLES_DIR / DEMO_EXPERT[0] / DEMO_EXPERT[1])
    target_wl = load_workload(EXAMPLES_DIR / DEMO_TARGET[0] / "workload.py")
    target = load_program(EXAMPLES_DIR / DEMO_TARGET[0] / DEMO_TARGET[1])
    library_dir = settings.library_dir  # the data directory's one library, which every command reads
    with progress_bar(as_json) as progress, Sandbox(warm=settings.warm) as sandbox:
        task = progress.add_task(f"mining {DEMO_EXPERT[0]}/{DEMO_EXPERT[1]} into {library_dir} on {dev}", total=None)
        with Library(library_dir) as library:
            lineage, _, skills = mine_into(
                library,
                workload,
                expert,
                settings,
                dev,
                sandbox=sandbox,
                on_step=lambda st: progress.update(task, description=f"mining: step {st.index} {st.transform}"),
                on_phase=lambda text: progress.update(task, description=text),
            )
        proposer = proposer_for("klineage", target_wl, settings, dev, library_dir)
        progress.update(task, description="optimizing", total=budget, completed=0)
        trajectory = run_optimize(
            target_wl,
            target,
            proposer,
            settings,
            dev,
            budget,
            sandbox,
            on_attempt=lambda a: progress.update(
                task, completed=a.evaluation, description=f"optimizing: {a.candidate.label[:50]}: {a.outcome}"
            ),
            on_phase=lambda text: progress.update(task, description=f"optimizing {DEMO_TARGET[0]}: {text}"),
        )
    paths = write_outputs(trajectory, settings.data_dir / "demo" / "optimized")
    if as_json:
        click.echo(
            json.dumps(
                {
                    "lineage": lineage.as_dict(),
                    "skills": [s.id for s in skills],
                    "trajectory": trajectory.as_dict(),
                    "outputs": {k: str(v) for k, v in paths.items()},
                },
                indent=2,
                default=str,
            )
        )
        sys.exit(0)
    console.print(lineage_table(lineage))
    console.print(f"{len(skills)} skills written to {library_dir}\n")
    console.print(report(trajectory))
    console.print(f"optimized program and diff: {paths['program']}, {paths['diff']}", style="dim")
    if dev == "cpu":
        console.print(
            "No GPU: correctness ran in the Triton interpreter and compile targeted "
            f"{settings.target}; timings need a GPU."
        )


@click.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.argument("program", type=click.Path(path_type=Path))
@library_option
@click.option(
    "--budget",
    type=int,
    default=20,
    show_default=True,
    help="Gate evaluations this run may spend (the starting program's check counts as one).",
)
@click.option(
    "--method", type=click.Choice(["klineage", "blind", "memory", "autotune"]), default="klineage", show_default=True
)
@click.option(
    "--materializer",
    type=click.Choice(["mechanical", "llm"]),
    default="mechanical",
    show_default=True,
    help="llm: a model (KLINEAGE_LLM_* settings, docs/AGENTS.md) also materializes skills the mechanical "
    "rewrites cannot and repairs candidates that failed a gate.",
)
@llm_budget_options
@click.option(
    "--memory",
    "memory_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Knowledge base for --method memory (default: $KLINEAGE_HOME/memory.json).",
)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Write program.py, changes.diff, trajectory.json and report.md here.",
)
@click.option(
    "--self-reference",
    is_flag=True,
    help="WORKLOAD is an inputs file; the reference is PROGRAM itself (match its outputs).",
)
@click.option(
    "--module",
    "modules",
    multiple=True,
    help="Also optimize this installed module's kernels (a rewritten copy travels with the program).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the trajectory as JSON.")
def optimize(
    workload,
    program,
    library_dir,
    budget,
    method,
    materializer,
    memory_path,
    device,
    out,
    self_reference,
    modules,
    as_json,
    **llm,
) -> None:
    """Apply skills to PROGRAM under the gates within a budget; print the report (and write the outputs).
    With --self-reference, WORKLOAD only says how to make inputs and the original PROGRAM is the reference."""
    from klineage.check import resolve_device
    from klineage.optimize import optimize as run_optimize
    from klineage.optimize import proposer_for, report, skill_library, write_outputs
    from klineage.program import load_program, with_installed_modules
    from klineage.workload import load_workload

    if budget < 2:
        raise UserError("--budget: at least 2 (the starting program's check is the first evaluation)")
    settings = Settings.from_env()
    if method == "klineage":
        skill_library(settings, library_dir)  # no library: said before anything starts
    # a user mistake is one line: everything that can be one is found before the progress says anything
    prog, dev = load_program(program), resolve_device(device)
    if self_reference:
        from klineage.reference import load_self_reference

        wl = load_self_reference(workload, prog, settings.data_dir)
    else:
        wl = load_workload(workload)
    prog = with_installed_modules(prog, list(modules))
    proposer = proposer_for(method, wl, settings, dev, library_dir, memory_path)
    if materializer == "llm":
        proposer = with_llm(proposer, **llm)
    with progress_bar(as_json) as progress:
        task = progress.add_task(f"optimizing {prog.name} on {dev} ({method}, budget {budget})", total=budget)
        announce_workload(progress, wl, dev)

        def on_attempt(attempt) -> None:
            progress.update(
                task, completed=attempt.evaluation, description=f"{attempt.candidate.label[:50]}: {attempt.outcome}"
            )

        trajectory = run_optimize(
            wl,
            prog,
            proposer,
            settings,
            dev,
            budget,
            on_attempt=on_attempt,
            on_phase=lambda text: progress.update(task, description=text),
        )
    paths = write_outputs(trajectory, out) if out else {}
    if as_json:
        derived = {"derived_case": wl.shrunk} if wl.shrunk else {}
        outputs = {"outputs": {k: str(v) for k, v in paths.items()}}
        click.echo(json.dumps(trajectory.as_dict() | derived | outputs, indent=2, default=str))
        return
    console.print(report(trajectory))
    if dev == "cpu" and wl.shrunk_line():  # what the CPU checks ran instead of the full size
        console.print(wl.shrunk_line(), style="dim", markup=False)
    if paths:
        console.print(f"written: {', '.join(str(p) for p in paths.values())}", style="dim")


@click.command("optimize-many")
@click.argument("folder", type=click.Path(path_type=Path))
@library_option
@click.option("--budget", type=int, default=20, show_default=True, help="Gate evaluations per program.")
@click.option(
    "--method", type=click.Choice(["klineage", "blind", "memory", "autotune"]), default="klineage", show_default=True
)
@click.option("--memory", "memory_path", type=click.Path(path_type=Path), default=None)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Each program's outputs under OUT/<name>, and OUT/summary.json (default: ./optimize-many-out).",
)
@engine_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def optimize_many(folder, library_dir, budget, method, memory_path, device, out, scheduler, workers, as_json) -> None:
    """Optimize every program of FOLDER (one subfolder each, with workload.py and program.py or naive.py) as
    `optimize` does one; `--workers N` / `--scheduler ADDRESS` run them side by side on a Dask cluster
    (docs/scale.md)."""
    from rich.table import Table

    from klineage.check import resolve_device
    from klineage.optimize import skill_library
    from klineage.optimize_many import Run, targets, write_all
    from klineage.optimize_many import optimize_many as run_many
    from klineage.scale import Engine

    if budget < 2:
        raise UserError("--budget: at least 2 (the starting program's check is the first evaluation)")
    engine = Engine.of(scheduler, workers)
    settings = Settings.from_env()
    if method == "klineage":
        skill_library(settings, library_dir)  # no library: said before anything starts
    found, dev = targets(folder), resolve_device(device)
    run = Run(method, budget, settings, dev, library_dir, memory_path)
    with progress_bar(as_json) as progress:
        task = progress.add_task(f"optimizing {len(found)} programs on {dev} ({method})", total=len(found))

        def done(r) -> None:
            again = f" ({r.attempts} attempts)" if r.attempts > 1 else ""
            progress.say(f"{r.name}: {r.error or r.trajectory.stop}{again}")
            progress.advance(task)

        results = run_many(found, run, engine, on_done=done, on_cluster=progress.say)
    path = write_all(results, out or Path("optimize-many-out"))
    if as_json:
        click.echo(json.dumps({"summary": str(path), "programs": [r.summary() for r in results]}, indent=2))
        return
    table = Table(title=f"optimize-many {folder} ({method}, budget {budget}, {dev})", title_justify="left")
    for column in ("program", "evaluations", "kept", "speedup", "stop", "attempts"):
        table.add_column(column, overflow="fold")
    for r in results:
        s = r.summary()
        if r.trajectory is None:
            table.add_row(r.name, "-", "-", "-", f"error: {r.error[:120]}", str(r.attempts))
            continue
        speedup = f"{s['speedup']:.2f}x" if s["speedup"] else "n/a"
        table.add_row(r.name, str(s["evaluations"]), str(s["kept"]), speedup, s["stop"], str(r.attempts))
    console.print(table)
    console.print(f"written: {path} and a folder per program beside it", style="dim")
