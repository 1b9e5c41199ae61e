"""The mining commands: `mine` (walk, probe, save), `skills` (browse and export the library), `effects` (carry GPU
timings between data directories)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from klineage.cli.common import (
    announce_workload,
    console,
    cpu_workers_option,
    engine_options,
    library_option,
    lineage_table,
    llm_client,
    progress_bar,
)
from klineage.config import Settings
from klineage.workload import UserError


@click.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.argument("expert", type=click.Path(path_type=Path))
@library_option
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option(
    "--walk-device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="Where the walk's gates run (default: --device). `--walk-device cpu --device cuda` takes the "
    "finished walk made on a machine without a GPU (`--device cpu`, same data directory), times its "
    "accepted steps on the GPU and probes there.",
)
@click.option("--max-steps", type=int, default=None, help="Stop after this many attempted steps (resumable).")
@click.option("--no-probe", is_flag=True, help="Skip condition probing (skills keep their conditions unprobed).")
@click.option(
    "--retime",
    is_flag=True,
    help="Measure the recorded steps' effects again (GPU), keeping the earlier measurement beside each.",
)
@click.option(
    "--module",
    "modules",
    multiple=True,
    help="Also mine this installed module's kernels (e.g. liger_kernel.ops.rms_norm); a copy is rewritten, "
    "the installed file never is.",
)
@click.option(
    "--llm",
    "use_llm",
    is_flag=True,
    help="Then ask a model (KLINEAGE_LLM_* settings) for simplifications beyond the catalog; each is gated "
    "and probed like any step (docs/AGENTS.md).",
)
@click.option("--llm-steps", type=int, default=4, show_default=True, help="Model steps that reach the gates (--llm).")
@click.option("--max-calls", type=int, default=12, show_default=True, help="Cap on model calls (--llm).")
@click.option("--max-tokens", type=int, default=None, help="Cap on prompt + completion tokens (--llm).")
@click.option("--json", "as_json", is_flag=True)
def mine(
    workload,
    expert,
    library_dir,
    device,
    walk_device,
    max_steps,
    no_probe,
    retime,
    modules,
    as_json,
    use_llm,
    llm_steps,
    max_calls,
    max_tokens,
) -> None:
    """Walk EXPERT backward against WORKLOAD, probe each step's conditions, add the skills to the library."""
    from klineage.check import resolve_device
    from klineage.library import Library
    from klineage.mining import mine_into
    from klineage.program import load_program, with_installed_modules
    from klineage.workload import load_workload

    wl, dev = load_workload(workload), resolve_device(device)
    prog = with_installed_modules(load_program(expert), list(modules))
    settings = Settings.from_env()
    walk = _walk_device(dev, walk_device, retime)
    client = llm_client(max_calls, max_tokens) if use_llm else None  # a missing model setting fails before mining
    with progress_bar(as_json) as progress, Library(library_dir or settings.library_dir) as library:
        task = progress.add_task(
            f"mining {prog.name} on {wl.name}: walking back on {walk}, a check per step", total=None
        )
        announce_workload(progress, wl, walk)

        def on_step(step) -> None:
            verdict = "accepted" if step.accepted else "rejected"
            progress.update(task, description=f"step {step.index}: {step.transform} {verdict}")

        lineage, _, skills = mine_into(
            library,
            wl,
            prog,
            settings,
            dev,
            walk,
            retime=retime,
            probe=not no_probe,
            max_steps=max_steps,
            on_step=on_step,
            on_phase=lambda text: progress.update(task, description=text),
        )
        model_lineage = None
        if use_llm:
            model_lineage, model_skills, usage = _mine_llm(
                wl, lineage, settings, dev, llm_steps, client, probe=not no_probe, quiet=as_json
            )
            for skill in model_skills:
                library.save(skill)
            skills += model_skills
        where = library.root
    if as_json:
        llm = {"llm_lineage": model_lineage.as_dict(), "llm": usage.as_dict()} if model_lineage else {}
        click.echo(
            json.dumps(
                {"lineage": lineage.as_dict(), "skills": [s.id for s in skills], "library": str(where), **llm},
                indent=2,
                default=str,
            )
        )
        return
    console.print(lineage_table(lineage))
    if model_lineage is not None:
        console.print(lineage_table(model_lineage))
        console.print(usage.line())
    console.print(f"{len(skills)} skills written to {where}")
    if dev == "cpu":
        console.print("No GPU: effects are unmeasured (static metric deltas only).", style="dim")


def _walk_device(dev: str, walk_device: str | None, retime: bool) -> str:
    """Where the walk's gates run: `--device`, or a CPU whose finished walk a GPU times (`--retime` needs a GPU)."""
    if retime and dev != "cuda":
        raise UserError("--retime needs a GPU: effects are never measured on the CPU")
    walk = walk_device or dev
    if walk != dev and dev != "cuda":
        raise UserError(
            f"--walk-device {walk} with --device {dev}: only a walk made on the CPU is timed elsewhere "
            "(--walk-device cpu --device cuda)"
        )
    return walk


def _mine_llm(wl, lineage, settings, dev, steps, client, probe, quiet):
    """The model's part of `mine --llm`: its steps (gated), their probes, their skills, what it spent."""
    from klineage.llm_mine import llm_skills, mine_with_llm, probe_llm_lineage

    with progress_bar(quiet) as progress:
        task = progress.add_task("mining with the model", total=None)
        found = mine_with_llm(
            wl,
            lineage,
            client,
            settings,
            dev,
            max_steps=steps,
            on_step=lambda st: progress.update(
                task, description=f"model step {st.index}: {'accepted' if st.accepted else 'rejected'}"
            ),
        )
        probes = probe_llm_lineage(found, wl, settings, dev) if probe else None
    return found, llm_skills(found, probes), client.usage


@click.group()
def skills() -> None:
    """Browse and export the skill library."""


def _library(library_dir):
    from klineage.library import Library
    from klineage.optimize import no_library_yet

    settings = Settings.from_env()
    root = Path(library_dir or settings.library_dir)
    # a folder without skills/ is no library: opening it would make one there and list it as empty
    if library_dir is None and not (root / "skills").is_dir():
        raise UserError(no_library_yet(settings))
    if not (root / "skills").is_dir():
        raise UserError(f"no skill library at {root} (run `klineage mine` first or pass --library)")
    return Library(root)


_library_option = click.option("--library", "library_dir", type=click.Path(path_type=Path), default=None)


@skills.command("list")
@_library_option
@click.option("--family", type=int, default=None)
@click.option("--condition", default=None, help="Only skills with this condition predicate.")
@click.option("--kind", type=click.Choice(["optimization", "guard"]), default=None)
@click.option("--json", "as_json", is_flag=True)
def skills_list(library_dir, family, condition, kind, as_json) -> None:
    """List skills, filtered by family, condition or kind."""
    with _library(library_dir) as library:
        found = library.list(family=family, condition=condition, kind=kind)
    if as_json:
        click.echo(json.dumps([s.as_dict() for s in found], indent=2))
        return
    # an effect names the GPU that timed it: a library walked on a laptop has none until a GPU times it
    timed = sum(bool(s.timed_devices()) for s in found if s.kind != "guard")
    table = Table(title=f"{len(found)} skills ({timed} timed on a GPU)", title_justify="left")
    for column in ("id", "kind", "family", "where", "conditions", "effect"):
        table.add_column(column, overflow="fold")
    for s in found:
        effect = next((f"x{s.effect[d]['speedup']:.3f} ({d})" for d in s.timed_devices()), "unmeasured")
        table.add_row(
            s.id,
            s.kind,
            str(s.family),
            f"{s.location['function']}:{s.location['line']}",
            ", ".join(c["predicate"] for c in s.conditions),
            effect if s.kind != "guard" else "",
        )
    console.print(table)


@skills.command("show")
@click.argument("skill_id")
@_library_option
@click.option("--json", "as_json", is_flag=True)
def skills_show(skill_id, library_dir, as_json) -> None:
    """Print one skill's card (or its JSON record)."""
    from klineage.skills import card

    with _library(library_dir) as library:
        skill = library.get(skill_id)
    click.echo(json.dumps(skill.as_dict(), indent=2) if as_json else card(skill))


@skills.command("export")
@click.argument("out", type=click.Path(path_type=Path))
@_library_option
@click.option("--format", "fmt", type=click.Choice(["skill-md"]), default="skill-md", show_default=True)
def skills_export(out, library_dir, fmt) -> None:
    """Write one folder per skill with a SKILL.md (Agent Skills format)."""
    with _library(library_dir) as library:
        written = library.export_skill_md(out)
    console.print(f"{len(written)} SKILL.md folders written to {out}")


@click.group()
def effects() -> None:
    """Carry GPU-measured step effects between data directories (walk on a laptop, time once on a GPU box)."""


def _home(home: Path | None) -> Path:
    return home or Settings.from_env().data_dir


_home_option = click.option(
    "--home", type=click.Path(path_type=Path), default=None, help="Data directory (default: $KLINEAGE_HOME)."
)


@effects.command("export")
@click.argument("out", type=click.Path(path_type=Path))
@_home_option
def effects_export(out, home) -> None:
    """Write every GPU-timed step of the data directory's lineages to OUT (hashes and effects, no source)."""
    from klineage.config import write_whole
    from klineage.effects import export_effects

    root = _home(home)
    export = export_effects(root)
    if not export["lineages"]:
        raise UserError(f"no GPU-timed step in {root / 'lineages'}: nothing to export")
    write_whole(out, json.dumps(export, indent=1))
    steps = sum(len(r["steps"]) for r in export["lineages"])
    console.print(f"{steps} timed steps of {len(export['lineages'])} lineages written to {out}")


@effects.command("import")
@click.argument("file", type=click.Path(path_type=Path))
@_home_option
@click.option("--json", "as_json", is_flag=True)
def effects_import(file, home, as_json) -> None:
    """Give the data directory's untimed steps the effects FILE measured for the very same programs."""
    from dataclasses import asdict

    from klineage.effects import import_effects, read_export

    export = read_export(file)
    root = _home(home)
    results = import_effects(root, export, file.name)
    if not results:
        raise UserError(f"no lineages in {root / 'lineages'}: walk the experts first (`klineage mine`)")
    if as_json:
        click.echo(json.dumps([asdict(r) for r in results], indent=2))
        return
    table = Table(title=f"effects from {file} (exported {export.get('exported', '?')})", title_justify="left")
    for column in ("lineage", "imported", "timed here already", "still untimed (steps)", "probes taken"):
        table.add_column(column, overflow="fold")
    for r in results:
        untimed = ", ".join(map(str, r.unmatched)) or "none"
        table.add_row(
            r.lineage, str(r.matched), str(r.kept), f"{untimed}{f' ({r.why})' if r.why else ''}", str(r.probes)
        )
    console.print(table)


@click.command("mine-ecosystem")
@click.option("--only", default="", help="Comma-separated expert names (default: the whole catalogue; see --list).")
@click.option("--list", "list_only", is_flag=True, help="List the catalogue (name, package, modules, installed).")
@library_option
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option(
    "--walk-device",
    type=click.Choice(["cpu", "cuda"]),
    default=None,
    help="As for `mine`: `--walk-device cpu --device cuda` times on the GPU the walks finished on a CPU (same data "
    "directory). On a cluster (--workers/--scheduler) each expert is then two tasks: its walk on any worker, then "
    "its timing on a GPU worker.",
)
@click.option("--max-steps", type=int, default=None, help="Stop each walk after this many attempted steps (resumable).")
@click.option("--no-probe", is_flag=True, help="Skip condition probing (skills keep their conditions unprobed).")
@engine_options
@cpu_workers_option
@click.option("--json", "as_json", is_flag=True)
def mine_ecosystem(
    only, list_only, library_dir, device, walk_device, max_steps, no_probe, scheduler, workers, cpu_workers, as_json
) -> None:
    """Mine the ecosystem experts: kernels of installed Triton libraries (Liger-Kernel's ops, flash-linear-attention,
    FlagGems' fused ops). Each expert's workload and program are written under $KLINEAGE_HOME/ecosystem at run time
    and mined into the library with its installed modules; a package that is not installed is a row saying so.
    `--workers N` / `--scheduler ADDRESS` mine the experts side by side on a Dask cluster, each into a library of
    its own whose skills this process then saves into the library; with `--walk-device cpu --device cuda` each
    expert's walk runs on any worker (`--cpu-workers M`: M local workers without a GPU) and its timing then on a GPU
    worker (docs/scale.md)."""

    from klineage.check import resolve_device
    from klineage.library import Library
    from klineage.sandbox import Sandbox
    from klineage.suites.ecosystem import mine_expert, select

    if max_steps is not None and max_steps < 1:
        raise UserError(f"--max-steps {max_steps}: expected a positive number of steps")
    try:
        experts = select([n.strip() for n in only.split(",") if n.strip()])
    except KeyError as e:
        raise UserError(e.args[0]) from None
    if list_only:
        _list_ecosystem(experts, as_json)
        return
    from klineage.scale import Engine

    engine = Engine.of(scheduler, workers, cpu_workers)
    dev, settings = resolve_device(device), Settings.from_env()
    walk = _walk_device(dev, walk_device, retime=False)
    if not engine.embedded:
        rows, where = _mine_ecosystem_on(
            engine, experts, library_dir, settings, dev, walk, max_steps, no_probe, as_json
        )
        _ecosystem_said(rows, where, dev, as_json)
        return
    rows = []
    with (
        progress_bar(as_json) as progress,
        Sandbox(warm=settings.warm) as sandbox,
        Library(library_dir or settings.library_dir) as library,
    ):
        task = progress.add_task(f"mining {len(experts)} ecosystem experts on {dev}", total=len(experts))
        for expert in experts:

            def on_step(step, name=expert.name) -> None:
                verdict = "accepted" if step.accepted else "rejected"
                progress.update(task, description=f"{name}: step {step.index} {step.transform} {verdict}")

            progress.update(task, description=f"{expert.name}: walking back on {walk}")
            row = mine_expert(
                expert,
                library,
                settings,
                dev,
                walk,
                sandbox=sandbox,
                max_steps=max_steps,
                probe=not no_probe,
                on_step=on_step,
                on_phase=lambda text, name=expert.name: progress.update(task, description=f"{name}: {text}"),
            )
            rows.append(row)
            progress.say(_ecosystem_line(row))
            progress.advance(task)
        where = library.root
    _ecosystem_said(rows, where, dev, as_json)


def _mine_ecosystem_on(engine, experts, library_dir, settings, dev, walk, max_steps, no_probe, as_json):
    """mine-ecosystem's experts as tasks on a Dask cluster (suites.ecosystem_tasks: per expert one task, or a walk
    on any worker then its timing on a GPU worker); (rows in catalogue order, the library). An expert whose task
    failed on every try is an error row, as a failure in the serial loop is."""
    from klineage.library import Library
    from klineage.scale import cluster, dashboard, run_graph, worker_settings
    from klineage.suites.ecosystem import EcosystemRow
    from klineage.suites.ecosystem_tasks import expert_tasks

    rows = {}
    settings = worker_settings(settings)
    tasks = expert_tasks(experts, settings, dev, walk, max_steps, not no_probe)
    by_name = {e.name: e for e in experts}
    with progress_bar(as_json) as progress, Library(library_dir or settings.library_dir) as library:
        task = progress.add_task(f"mining {len(experts)} ecosystem experts on {dev}", total=len(experts))
        with cluster(engine, dev == "cuda") as client:
            progress.say(f"Dask dashboard: {dashboard(client) or 'none'}")

            def done(outcome) -> None:
                again = f" ({outcome.attempts} attempts)" if outcome.attempts > 1 else ""
                if outcome.name not in by_name:  # a walk: its expert's row comes with its timing
                    progress.say(_walk_line(outcome) + again)
                    return
                if outcome.ok:
                    row, skills = outcome.value
                    for skill in skills:
                        library.save(skill)
                else:
                    e = by_name[outcome.name]
                    row = EcosystemRow(e.name, e.package, e.modules, "error", error=outcome.error[:300])
                rows[outcome.name] = row
                progress.say(_ecosystem_line(row) + again)
                progress.advance(task)

            run_graph(client, tasks, done)
        return [rows[e.name] for e in experts], library.root


def _walk_line(outcome) -> str:
    """A walk task's end as one progress line (suites.ecosystem_tasks.Walked, or why the task has no value)."""
    walked = outcome.value
    if not outcome.ok or walked.status != "walked":
        return f"{outcome.name}: {(outcome.error or walked.error or walked.status)[:200]}"
    more = "" if walked.finished else ", unfinished (resumable)"
    return f"{outcome.name}: walked on the CPU in {walked.walk_s:.0f} s{more}"


def _ecosystem_said(rows, where, dev, as_json) -> None:
    """mine-ecosystem's table (or JSON) and its exit status: 1 where no expert was mined."""
    from dataclasses import asdict

    if as_json:
        click.echo(json.dumps({"library": str(where), "device": dev, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        console.print(_ecosystem_table(rows, dev))
        console.print(f"{sum(r.skills for r in rows)} skills written to {where}")
        if dev == "cpu":
            console.print("No GPU: effects are unmeasured (static metric deltas only).", style="dim")
    if not any(r.status == "mined" for r in rows):
        raise SystemExit(1)


def _ecosystem_line(row) -> str:
    if row.status != "mined":
        return f"{row.name}: {row.status}{f' ({row.error})' if row.error else ''}"
    more = "" if row.finished else ", unfinished (resumable)"
    return f"{row.name}: {row.accepted} accepted, {row.rejected} rejected, walk {row.walk_s:.0f} s{more}"


def _ecosystem_table(rows, dev: str) -> Table:
    mined = [r for r in rows if r.status == "mined"]
    table = Table(
        title=f"ecosystem experts on {dev}: {len(mined)} of {len(rows)} mined, "
        f"{sum(r.accepted for r in mined)} steps accepted, {sum(r.rejected for r in mined)} rejected",
        title_justify="left",
    )
    for column in ("expert", "package", "accepted", "rejected (gate:code)", "families", "guards", "walk s"):
        table.add_column(column, overflow="fold")
    for r in rows:
        if r.status != "mined":
            table.add_row(r.name, r.package, r.status, r.error, "", "", f"{r.wall_s:.0f}" if r.wall_s else "")
            continue
        rejected = ", ".join(f"{k} x{n}" for k, n in r.rejected_by.items())
        families = ", ".join(f"{f} ({', '.join(ts)})" for f, ts in r.families.items())
        accepted = f"{r.accepted}{'' if r.finished else ' (unfinished)'}"
        table.add_row(
            r.name,
            r.package,
            accepted,
            f"{r.rejected}: {rejected}" if r.rejected else "0",
            families,
            str(r.guards),
            f"{r.walk_s:.0f}",
        )
    return table


def _list_ecosystem(experts, as_json: bool) -> None:
    found = [
        {"name": e.name, "package": e.package, "modules": list(e.modules), "installed": e.installed()} for e in experts
    ]
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    table = Table(title=f"{len(found)} ecosystem experts", title_justify="left")
    for column in ("expert", "package", "modules", "installed"):
        table.add_column(column, overflow="fold")
    for f in found:
        table.add_row(f["name"], f["package"], ", ".join(f["modules"]), "yes" if f["installed"] else "no")
    console.print(table)
