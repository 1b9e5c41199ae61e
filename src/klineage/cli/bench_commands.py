"""The evaluation commands: `bench` (methods x instances under one budget), `bench-merge` (shards joined), `memory`
(the memory baseline's knowledge base)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from klineage.cli.common import console, engine_options, progress_bar
from klineage.config import Settings
from klineage.workload import UserError


@click.command()
@click.argument("suite_name", metavar="SUITE")
@click.option("--methods", default="klineage,blind,memory,autotune", show_default=True)
@click.option("--budget", type=int, default=12, show_default=True, help="Gate evaluations per run.")
@click.option("--library", "library_dir", type=click.Path(path_type=Path), default=None)
@click.option("--memory", "memory_path", type=click.Path(path_type=Path), default=None)
@click.option(
    "--instances",
    default=None,
    help="Comma-separated instance names, run in the order given (default: the whole suite).",
)
@click.option(
    "--shard",
    default=None,
    help="I/N: run every N-th instance from the I-th (split over GPUs). The single process's only: not with "
    "--workers/--scheduler.",
)
@click.option(
    "--queue",
    "queue_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder shared by the bench processes of one run: each takes the next instance none has taken. The "
    "single process's only: not with --workers/--scheduler.",
)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Report folder (default: ./bench-out).")
@click.option(
    "--resume",
    is_flag=True,
    help="Keep the instances the report in --out finished (same methods, budget, device); run the rest.",
)
@click.option(
    "--retime",
    is_flag=True,
    help="Time every final program again in a fresh process after the methods (always on for the wild suite).",
)
@engine_options
@click.option("--json", "as_json", is_flag=True)
def bench(
    suite_name,
    methods,
    budget,
    library_dir,
    memory_path,
    instances,
    shard,
    queue_dir,
    device,
    out,
    resume,
    retime,
    scheduler,
    workers,
    as_json,
) -> None:
    """Run methods x instances of SUITE (heldout, naive, experts, wild, wild-quant, a folder, or several joined by
    commas) under one budget; write the report, and rewrite it after each instance so a run cut short keeps what it
    finished. `--resume` continues such a run. `--workers N` or `--scheduler ADDRESS` run the instances on a Dask
    cluster (docs/scale.md); without them, several processes split a suite by `--shard` or share a `--queue`, and
    `klineage bench-merge` joins their reports."""
    from klineage.bench import Queue, markdown, run_bench, suite, write_report
    from klineage.bench import shard as take_shard
    from klineage.bench.report import plots_missing
    from klineage.bench.suites import WILD_SUITES, wild_catalogue
    from klineage.check import resolve_device
    from klineage.optimize import METHODS
    from klineage.scale import Engine
    from klineage.suites.wild import chosen as wild_chosen

    engine = Engine.of(scheduler, workers)

    wanted = [m.strip() for m in methods.split(",") if m.strip()]
    if bad := [m for m in wanted if m not in METHODS]:
        raise UserError(f"--methods: unknown method {bad[0]!r}; known: {', '.join(METHODS)}")
    settings, dev = Settings.from_env(), resolve_device(device)
    if "memory" in wanted:  # before any run: a missing base would otherwise stop the suite at its first instance
        from klineage.optimize import memory_base

        memory_base(settings, memory_path)
    chosen = suite(suite_name, settings)
    wild = [part.strip() for part in suite_name.split(",") if part.strip() in WILD_SUITES]
    not_offered = {}
    for part in wild:  # the kernels of packages not installed here, said in the report
        not_offered |= wild_chosen(wild_catalogue(part))[1]
    if instances:
        names = list(dict.fromkeys(n.strip() for n in instances.split(",") if n.strip()))
        by_name = {i.name: i for i in chosen}
        if missing := [n for n in names if n not in by_name]:
            raise UserError(f"--instances: no instance {missing[0]!r} in suite {suite_name}")
        chosen = [by_name[n] for n in names]  # in the order given: a queue hands out the longest first
    if shard and queue_dir:
        raise UserError("--shard and --queue both split the suite: give one")
    if queue_dir and not engine.embedded:
        raise UserError("--queue and --workers/--scheduler both share the suite out: give one")
    if shard and not engine.embedded:
        raise UserError("--shard and --workers/--scheduler both share the suite out: give one")
    if shard:
        chosen = take_shard(chosen, shard)
    if not chosen:
        raise UserError(f"suite {suite_name} has no instances (experts: run `klineage mine` first)")
    folder = out or Path("bench-out")
    earlier = None
    if resume and (folder / "bench.json").is_file():
        try:
            earlier = json.loads((folder / "bench.json").read_text())
        except json.JSONDecodeError as e:
            raise UserError(f"--resume: {folder / 'bench.json'} is not a bench report ({e})") from None
    with progress_bar(as_json) as progress:
        if engine.embedded:
            task = progress.add_task("bench", total=None)
            result = run_bench(
                chosen,
                wanted,
                budget,
                settings,
                dev,
                library_dir,  # None: the data directory's library (optimize.proposer_for)
                memory_path,
                on_progress=lambda text: progress.update(task, description=text),
                on_instance=lambda partial: write_report(partial, folder, plot=False),
                earlier=earlier,
                claim=Queue(queue_dir).claim if queue_dir else None,
                retime=retime or bool(wild),
                not_offered=not_offered,
            )
        else:
            from klineage.bench.engine import run_bench_on

            task = progress.add_task(f"bench on {len(chosen)} instances", total=len(chosen))

            def finished(partial: dict) -> None:
                write_report(partial, folder, plot=False)
                progress.update(task, completed=len(partial["stamp"]["instances"]))

            result = run_bench_on(
                engine,
                chosen,
                wanted,
                budget,
                settings,
                dev,
                library_dir,
                memory_path,
                on_progress=lambda text: progress.update(task, description=text),
                on_instance=finished,
                earlier=earlier,
                retime=retime or bool(wild),
                not_offered=not_offered,
                on_cluster=progress.say,
            )
    paths = write_report(result, folder)
    if as_json:
        click.echo(json.dumps({**result["summary"], "outputs": {k: str(v) for k, v in paths.items()}}, indent=2))
        return
    console.print(markdown(result))
    console.print(f"written: {', '.join(str(p) for p in paths.values())}", style="dim")
    if missing := plots_missing(result):
        console.print(missing, style="yellow", markup=False)


@click.command("bench-merge")
@click.argument("shards", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), required=True)
def bench_merge(shards, out) -> None:
    """Join the reports (bench.json) of SHARDS of one bench run into one report in OUT."""
    from klineage.bench import markdown, merge, write_report

    results = []
    for folder in shards:
        path = folder / "bench.json" if folder.is_dir() else folder
        if not path.is_file():
            raise UserError(f"{folder}: no bench.json there")
        results.append(json.loads(path.read_text()))
    merged = merge(results)
    paths = write_report(merged, out)
    console.print(markdown(merged))
    console.print(f"written: {', '.join(str(p) for p in paths.values())}", style="dim")


@click.group()
def memory() -> None:
    """The memory baseline's knowledge base (past optimization outcomes by program features)."""


@memory.command("build")
@click.option(
    "--suite",
    "suite_name",
    default="experts",
    show_default=True,
    help="Instances whose blind optimization runs fill the knowledge base.",
)
@click.option("--budget", type=int, default=12, show_default=True)
@click.option(
    "--shard",
    default=None,
    help="I/N: every N-th instance from the I-th (parallel builds, joined after). The single process's only: "
    "not with --workers/--scheduler, which share the instances out themselves.",
)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Default: $KLINEAGE_HOME/memory.json.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@engine_options
def memory_build(suite_name, budget, shard, out, device, scheduler, workers) -> None:
    """Run blind optimization on SUITE's starting programs and remember every outcome. `--workers N` or
    `--scheduler ADDRESS` run one task per instance on a Dask cluster; this process alone writes the knowledge base,
    after each instance (docs/scale.md)."""
    from klineage.bench import build_memory, suite
    from klineage.bench import shard as take_shard
    from klineage.check import resolve_device
    from klineage.optimize import memory_path
    from klineage.scale import Engine

    engine = Engine.of(scheduler, workers)
    if shard and not engine.embedded:
        raise UserError("--shard and --workers/--scheduler both share the suite out: give one")
    settings, dev = Settings.from_env(), resolve_device(device)
    chosen = suite(suite_name, settings)
    if shard:
        chosen = take_shard(chosen, shard)
    if not chosen:
        raise UserError(f"suite {suite_name} has no instances (experts: run `klineage mine` first)")
    path = out or memory_path(settings)
    retried: dict[str, int] = {}
    with progress_bar(False) as progress:
        if engine.embedded:
            task = progress.add_task("memory", total=None)
            added, skipped = build_memory(
                chosen, settings, dev, budget, path, on_progress=lambda text: progress.update(task, description=text)
            )
        else:
            from klineage.bench.memory import build_memory_on

            task = progress.add_task(f"memory on {len(chosen)} instances", total=len(chosen))

            def ended(text: str) -> None:
                progress.say(text)
                progress.advance(task)

            added, skipped, ran = build_memory_on(
                engine, chosen, settings, dev, budget, path, on_progress=ended, on_cluster=progress.say
            )
            retried = ran.retried
    for name, why in skipped.items():
        console.print(f"skipped {name}: {why}", style="yellow")
    if retried:  # a worker lost mid-task: its instance ran again elsewhere, said as bench's report says it
        again = ", ".join(f"{name} ({n} attempts)" for name, n in retried.items())
        console.print(f"Retried (a worker lost mid-task): {again}")
    if len(skipped) == len(chosen):
        raise UserError(f"every instance of {suite_name} was skipped; nothing remembered")
    console.print(f"{added} outcomes from {len(chosen) - len(skipped)} runs remembered in {path}")
