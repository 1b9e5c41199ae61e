"""The `klineage` command line. Thin: parse, call one function per verb, render. A user mistake (a malformed
workload, a program that does not parse, a missing file) is one line on stderr and exit code 2; a failing gate is
exit code 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from klineage.config import DEFAULT_TARGET, TARGETS, Settings
from klineage.workload import UserError

console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)

EXAMPLES_DIR = Path(__file__).parent / "examples"


def _fmt_metric(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _metrics_text(metrics: dict, limit: int = 6) -> str:
    keys = [k for k in metrics if not isinstance(metrics[k], (dict, list))][:limit]
    return ", ".join(f"{k}={_fmt_metric(metrics[k])}" for k in keys)


def verdict_table(report, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("gate")
    table.add_column("verdict")
    table.add_column("reason")
    table.add_column("metrics", overflow="fold")
    table.add_column("s", justify="right")
    colors = {"pass": "green", "fail": "red", "error": "red", "skip": "yellow"}
    for verdict, cached in zip(report.verdicts, report.cached):
        status = f"[{colors[verdict.status]}]{verdict.status}[/]" + (" (cached)" if cached else "")
        reason = f"{verdict.code}: {verdict.reason}" if verdict.code else verdict.reason
        table.add_row(verdict.gate, status, reason, _metrics_text(verdict.metrics), f"{verdict.seconds:.1f}")
    return table


def _settings(seeds: int | None, no_cache: bool, cold: bool, target: str | None) -> Settings:
    return Settings.from_env(
        seeds=seeds, use_cache=False if no_cache else None, warm=False if cold else None, target=target
    )


def _llm_budget_options(command):
    """The model's share of a run's budget: calls, tokens, repairs of a failed candidate."""
    command = click.option(
        "--repairs",
        type=int,
        default=1,
        show_default=True,
        help="Model repairs of one failed candidate (llm materializer).",
    )(command)
    command = click.option(
        "--max-tokens",
        type=int,
        default=None,
        help="Cap on prompt + completion tokens (llm materializer; default: no cap).",
    )(command)
    return click.option(
        "--max-calls", type=int, default=40, show_default=True, help="Cap on model calls (llm materializer)."
    )(command)


def _llm_client(max_calls, max_tokens):
    from klineage.llm import LLMClient, LLMConfig

    return LLMClient(LLMConfig.from_env(), max_calls=max_calls, max_tokens=max_tokens)


def _with_llm(proposer, max_calls, max_tokens, repairs, mechanical=True):
    from klineage.llm_propose import llm_proposer

    return llm_proposer(proposer, _llm_client(max_calls, max_tokens), mechanical, repairs)


class Group(click.Group):
    """Turn a `UserError` anywhere below into one line and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as e:
            click.echo(f"error: {e}", err=True)  # one line, never wrapped
            sys.exit(2)


@click.group(cls=Group)
@click.version_option(package_name="klineage")
def main() -> None:
    """KLineage: verified optimization skills for Triton kernels, under hardened gates."""


@main.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.argument("program", type=click.Path(path_type=Path))
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option(
    "--target",
    type=click.Choice(TARGETS),
    default=DEFAULT_TARGET,
    show_default=True,
    help="Architecture to compile for when there is no GPU.",
)
@click.option("--gates", default="compile,correctness,profile", show_default=True, help="Comma-separated gates.")
@click.option("--seeds", type=int, default=None, help="Fresh seeds for the correctness gate (default 5).")
@click.option("--no-cache", is_flag=True, help="Ignore and do not write the verdict cache.")
@click.option("--cold", is_flag=True, help="A fresh Python process per gate instead of the warm worker.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(workload, program, device, target, gates, seeds, no_cache, cold, as_json) -> None:
    """Run the gates on PROGRAM against WORKLOAD; exit 1 if any gate fails."""
    from klineage.check import check as run_check
    from klineage.check import resolve_device
    from klineage.gates import GATES
    from klineage.program import load_program
    from klineage.workload import load_workload

    wanted = tuple(g.strip() for g in gates.split(",") if g.strip())
    unknown = [g for g in wanted if g not in GATES]
    if unknown:
        raise UserError(f"--gates: unknown gate {unknown[0]!r}; known: {', '.join(GATES)}")
    wl = load_workload(workload)
    prog = load_program(program)
    dev = resolve_device(device)
    settings = _settings(seeds, no_cache, cold, target)
    with _progress(as_json) as progress:
        task = progress.add_task("gates", total=len(wanted))

        def on_gate(gate: str) -> None:
            progress.update(task, description=f"{gate} gate", advance=0 if gate == wanted[0] else 1)

        report = run_check(wl, prog, settings, dev, wanted, on_gate=on_gate)
        progress.update(task, completed=len(wanted))
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        title = f"{prog.name} on {wl.name} ({report.device_name}, target {report.target})"
        console.print(verdict_table(report, title))
        if dev == "cpu":
            console.print("No GPU: correctness ran in the Triton interpreter; no time was taken.", style="dim")
    sys.exit(0 if report.passed else 1)


@main.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.option("--seeds", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
def audit(workload, seeds, as_json) -> None:
    """Flag WORKLOAD if zeros, a constant, an input or the mean output would pass its check."""
    from klineage.audit import audit as run_audit
    from klineage.workload import load_workload

    wl = load_workload(workload)
    with _progress(as_json) as progress:
        progress.add_task("auditing the check", total=None)
        report = run_audit(wl, _settings(seeds, True, False, None))
    if as_json:
        click.echo(json.dumps({**report.__dict__, "weak": report.weak}, indent=2))
    elif report.error:
        console.print(f"[red]audit failed[/]: {report.error}")
    elif report.weak:
        console.print(
            f"[red]weak check[/]: {wl.name} passes {', '.join(report.passing_fakes)} on all "
            f"{report.trials} trials; fix its cases or tolerances before mining"
        )
    else:
        console.print(f"[green]ok[/]: {wl.name} rejects {len(report.tried)} fake outputs on {report.trials} trials")
    sys.exit(1 if report.weak else 0)


def bundled_examples() -> list[tuple[Path, Path]]:
    """(workload, program) pairs shipped with the package."""
    pairs = []
    for folder in sorted(p for p in EXAMPLES_DIR.iterdir() if (p / "workload.py").is_file()):
        for program in sorted(folder.glob("*.py")):
            if program.name != "workload.py":
                pairs.append((folder / "workload.py", program))
    return pairs


@main.command()
@click.option("--check", "run_checks", is_flag=True, help="Also run the gates on every bundled program.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def examples(run_checks, device, as_json) -> None:
    """List the bundled example workloads and programs (with --check: run the gates on each)."""
    if not run_checks:
        table = Table(title="bundled examples", title_justify="left")
        for column in ("workload", "program", "path"):
            table.add_column(column)
        for wl, prog in bundled_examples():
            table.add_row(wl.parent.name, prog.stem, str(prog))
        console.print(table)
        return
    from klineage.check import check as run_check
    from klineage.check import resolve_device
    from klineage.program import load_program
    from klineage.sandbox import Sandbox
    from klineage.workload import load_workload

    dev = resolve_device(device)
    settings = Settings.from_env()
    pairs = [(wl, prog) for wl, prog in bundled_examples() if _program_available(prog)]
    reports = []
    with _progress(as_json) as progress, Sandbox(warm=settings.warm) as sandbox:
        task = progress.add_task("checking examples", total=len(pairs))
        for wl_path, prog_path in pairs:
            progress.update(task, description=f"{wl_path.parent.name}/{prog_path.stem}")
            reports.append(run_check(load_workload(wl_path), load_program(prog_path), settings, dev, sandbox=sandbox))
            progress.advance(task)
    if as_json:
        click.echo(json.dumps([r.as_dict() for r in reports], indent=2, default=str))
    else:
        table = Table(title=f"bundled examples on {reports[0].device_name if reports else dev}", title_justify="left")
        for column in (
            "workload",
            "program",
            "compile",
            "correctness",
            "profile",
            "registers",
            "max load bits",
            "median ms",
        ):
            table.add_column(column)
        for r in reports:
            comp, corr, prof = (r.verdict(g) for g in ("compile", "correctness", "profile"))
            table.add_row(
                r.workload,
                r.program,
                *(_cell(v) for v in (comp, corr, prof)),
                _fmt_metric(comp.metrics.get("max_registers", "")) if comp else "",
                _fmt_metric(comp.metrics.get("max_load_bits", "")) if comp else "",
                _fmt_metric(prof.metrics["median_ms"]) if prof and prof.passed else "not timed",
            )
        console.print(table)
        if dev == "cpu":
            console.print(
                "No GPU: correctness ran in the Triton interpreter, compile targeted "
                f"{settings.target}; timings need a GPU."
            )
    sys.exit(0 if all(r.passed for r in reports) else 1)


DEMO_EXPERT = ("rmsnorm", "tuned.py")  # mined by `klineage demo`
DEMO_TARGET = ("rmsnorm", "naive.py")  # optimized with the mined skills


@main.command()
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
    library_dir = settings.data_dir / "demo" / "library"
    with _progress(as_json) as progress, Sandbox(warm=settings.warm) as sandbox:
        task = progress.add_task("mining", total=None)
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


@main.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.argument("expert", type=click.Path(path_type=Path))
@click.option(
    "--library",
    "library_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Skill library directory (default: $KLINEAGE_HOME/library).",
)
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
    if retime and dev != "cuda":
        raise UserError("--retime needs a GPU: effects are never measured on the CPU")
    walk = walk_device or dev
    if walk != dev and dev != "cuda":
        raise UserError(
            f"--walk-device {walk} with --device {dev}: only a walk made on the CPU is timed elsewhere "
            "(--walk-device cpu --device cuda)"
        )
    client = _llm_client(max_calls, max_tokens) if use_llm else None  # a missing model setting fails before mining
    with _progress(as_json) as progress, Library(library_dir or settings.data_dir / "library") as library:
        task = progress.add_task("mining", total=None)

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


@main.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.argument("program", type=click.Path(path_type=Path))
@click.option(
    "--library",
    "library_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Skill library directory (default: $KLINEAGE_HOME/library).",
)
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
@_llm_budget_options
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
    from klineage.optimize import proposer_for, report, write_outputs
    from klineage.program import load_program, with_installed_modules
    from klineage.workload import load_workload

    if budget < 2:
        raise UserError("--budget: at least 2 (the starting program's check is the first evaluation)")
    prog, dev = load_program(program), resolve_device(device)
    settings = Settings.from_env()
    if self_reference:
        from klineage.reference import self_reference_workload

        workload = self_reference_workload(workload, prog, settings.data_dir)
    wl = load_workload(workload)
    prog = with_installed_modules(prog, list(modules))
    proposer = proposer_for(method, wl, settings, dev, library_dir or settings.data_dir / "library", memory_path)
    if materializer == "llm":
        proposer = _with_llm(proposer, **llm)
    with _progress(as_json) as progress:
        task = progress.add_task(f"optimizing ({method})", total=budget)

        def on_attempt(attempt) -> None:
            progress.update(
                task, completed=attempt.evaluation, description=f"{attempt.candidate.label[:50]}: {attempt.outcome}"
            )

        trajectory = run_optimize(wl, prog, proposer, settings, dev, budget, on_attempt=on_attempt)
    paths = write_outputs(trajectory, out) if out else {}
    if as_json:
        click.echo(
            json.dumps(trajectory.as_dict() | {"outputs": {k: str(v) for k, v in paths.items()}}, indent=2, default=str)
        )
        return
    console.print(report(trajectory))
    if paths:
        console.print(f"written: {', '.join(str(p) for p in paths.values())}", style="dim")


def _mine_llm(wl, lineage, settings, dev, steps, client, probe, quiet):
    """The model's part of `mine --llm`: its steps (gated), their probes, their skills, what it spent."""
    from klineage.llm_mine import llm_skills, mine_with_llm, probe_llm_lineage

    with _progress(quiet) as progress:
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


def lineage_table(lineage) -> Table:
    table = Table(
        title=f"lineage {lineage.id} ({len(lineage.accepted)} accepted, {len(lineage.rejected)} rejected)",
        title_justify="left",
    )
    for column in ("step", "transform", "function", "verdict", "reason", "effect"):
        table.add_column(column, overflow="fold")
    for step in lineage.steps:
        failed = next((v for v in step.verdicts if v["status"] != "pass"), None)
        effect = step.effect
        shown = f"x{effect['speedup']:.3f}" if effect.get("measured") else "not timed"
        deltas = ", ".join(f"{k} {v:+g}" for k, v in effect.get("static_delta", {}).items() if v)
        shown += f"; {deltas}" if deltas else ""
        table.add_row(
            str(step.index),
            step.transform,
            step.site["function"],
            "[green]accepted[/]" if step.accepted else "[red]rejected[/]",
            f"{failed['code']}: {failed['reason'][:80]}" if failed else "",
            shown,
        )
    return table


@main.command()
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
@click.option("--shard", default=None, help="I/N: run every N-th instance from the I-th (split over GPUs).")
@click.option(
    "--queue",
    "queue_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder shared by the bench processes of one run: each takes the next instance none has taken.",
)
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Report folder (default: ./bench-out).")
@click.option(
    "--resume",
    is_flag=True,
    help="Keep the instances the report in --out finished (same methods, budget, device); run the rest.",
)
@click.option("--json", "as_json", is_flag=True)
def bench(
    suite_name, methods, budget, library_dir, memory_path, instances, shard, queue_dir, device, out, resume, as_json
) -> None:
    """Run methods x instances of SUITE (heldout, naive, experts, a folder, or several joined by commas) under one
    budget; write the report, and rewrite it after each instance so a run cut short keeps what it finished.
    `--resume` continues such a run. Several processes split a suite by `--shard` or share a `--queue`;
    `klineage bench-merge` joins their reports."""
    from klineage.bench import Queue, markdown, run_bench, suite, write_report
    from klineage.bench import shard as take_shard
    from klineage.check import resolve_device
    from klineage.optimize import METHODS

    wanted = [m.strip() for m in methods.split(",") if m.strip()]
    if bad := [m for m in wanted if m not in METHODS]:
        raise UserError(f"--methods: unknown method {bad[0]!r}; known: {', '.join(METHODS)}")
    settings, dev = Settings.from_env(), resolve_device(device)
    if "memory" in wanted:  # before any run: a missing base would otherwise stop the suite at its first instance
        from klineage.optimize import memory_base

        memory_base(settings, memory_path)
    chosen = suite(suite_name, settings)
    if instances:
        names = list(dict.fromkeys(n.strip() for n in instances.split(",") if n.strip()))
        by_name = {i.name: i for i in chosen}
        if missing := [n for n in names if n not in by_name]:
            raise UserError(f"--instances: no instance {missing[0]!r} in suite {suite_name}")
        chosen = [by_name[n] for n in names]  # in the order given: a queue hands out the longest first
    if shard and queue_dir:
        raise UserError("--shard and --queue both split the suite: give one")
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
    with _progress(as_json) as progress:
        task = progress.add_task("bench", total=None)
        result = run_bench(
            chosen,
            wanted,
            budget,
            settings,
            dev,
            library_dir or settings.data_dir / "library",
            memory_path,
            on_progress=lambda text: progress.update(task, description=text),
            on_instance=lambda partial: write_report(partial, folder, plot=False),
            earlier=earlier,
            claim=Queue(queue_dir).claim if queue_dir else None,
        )
    paths = write_report(result, folder)
    if as_json:
        click.echo(json.dumps({**result["summary"], "outputs": {k: str(v) for k, v in paths.items()}}, indent=2))
        return
    console.print(markdown(result))
    console.print(f"written: {', '.join(str(p) for p in paths.values())}", style="dim")


@main.command("bench-merge")
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


@main.group()
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
@click.option("--shard", default=None, help="I/N: every N-th instance from the I-th (parallel builds, joined after).")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Default: $KLINEAGE_HOME/memory.json.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
def memory_build(suite_name, budget, shard, out, device) -> None:
    """Run blind optimization on SUITE's starting programs and remember every outcome."""
    from klineage.bench import build_memory, suite
    from klineage.bench import shard as take_shard
    from klineage.check import resolve_device
    from klineage.optimize import memory_path

    settings, dev = Settings.from_env(), resolve_device(device)
    chosen = suite(suite_name, settings)
    if shard:
        chosen = take_shard(chosen, shard)
    if not chosen:
        raise UserError(f"suite {suite_name} has no instances (experts: run `klineage mine` first)")
    path = out or memory_path(settings)
    with _progress(False) as progress:
        task = progress.add_task("memory", total=None)
        added, skipped = build_memory(
            chosen, settings, dev, budget, path, on_progress=lambda text: progress.update(task, description=text)
        )
    for name, why in skipped.items():
        console.print(f"skipped {name}: {why}", style="yellow")
    if len(skipped) == len(chosen):
        raise UserError(f"every instance of {suite_name} was skipped; nothing remembered")
    console.print(f"{added} outcomes from {len(chosen) - len(skipped)} runs remembered in {path}")


@main.group()
def skills() -> None:
    """Browse and export the skill library."""


def _library(library_dir):
    from klineage.library import Library

    root = library_dir or Settings.from_env().data_dir / "library"
    if not Path(root).is_dir():
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


@main.group()
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


@main.command("mcp")
@click.option(
    "--library",
    "library_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Skill library directory (default: $KLINEAGE_HOME/library).",
)
def mcp_command(library_dir) -> None:
    """Serve the skill library and the gates to an MCP-capable agent over stdio (tools: search_skills,
    suggest_skills, apply_skill, check_program; resources: skill://<id>). See docs/AGENTS.md."""
    from klineage.mcp_server import serve

    serve(library_dir or Settings.from_env().data_dir / "library")


@main.command("llm-compare")
@click.argument("workload", type=click.Path(path_type=Path))
@click.argument("program", type=click.Path(path_type=Path))
@click.option(
    "--library",
    "library_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Skill library (default: $KLINEAGE_HOME/library).",
)
@click.option(
    "--memory",
    "memory_path",
    type=click.Path(path_type=Path),
    default=None,
    help="The memory baseline's knowledge base (default: $KLINEAGE_HOME/memory.json).",
)
@click.option("--budget", type=int, default=12, show_default=True, help="Gate evaluations per arm.")
@_llm_budget_options
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=Path("llm-compare-out"), show_default=True)
@click.option("--json", "as_json", is_flag=True)
def llm_compare(
    workload, program, library_dir, memory_path, budget, max_calls, max_tokens, repairs, device, out, as_json
) -> None:
    """The same model run twice on PROGRAM under one budget: with the library's skills as a curriculum in lineage
    order, and with the memory baseline's retrieved notes. Writes both trajectories and a side-by-side report."""
    from klineage.check import resolve_device
    from klineage.llm_compare import markdown, run_comparison, summary, write_comparison
    from klineage.program import load_program
    from klineage.workload import load_workload

    if budget < 2:
        raise UserError("--budget: at least 2 (the starting program's check is the first evaluation)")
    _llm_client(max_calls, max_tokens)  # a missing model setting fails now, not after the first arm
    wl, prog, dev = load_workload(workload), load_program(program), resolve_device(device)
    settings = Settings.from_env()
    with _progress(as_json) as progress:
        task = progress.add_task("comparing", total=None)
        arms = run_comparison(
            wl,
            prog,
            settings,
            dev,
            library_dir or settings.data_dir / "library",
            memory_path,
            budget,
            lambda: _llm_client(max_calls, max_tokens),
            repairs,
            on_progress=lambda text: progress.update(task, description=text),
        )
    paths = write_comparison(arms, out)
    if as_json:
        click.echo(
            json.dumps({**summary(arms), "outputs": {k: str(v) for k, v in paths.items()}}, indent=2, default=str)
        )
        return
    console.print(markdown(arms))
    console.print(f"written: {', '.join(str(p) for p in paths.values())}", style="dim")


def _program_available(program: Path) -> bool:
    """The Liger example needs the optional `experts` extra."""
    if "liger_kernel" in program.read_text():
        import importlib.util

        return importlib.util.find_spec("liger_kernel") is not None
    return True


def _cell(verdict) -> str:
    if verdict is None:
        return ""
    color = {"pass": "green", "skip": "yellow"}.get(verdict.status, "red")
    text = verdict.status if not verdict.code or verdict.passed else f"{verdict.status} ({verdict.code})"
    return f"[{color}]{text}[/]"


class _LoggedProgress(Progress):
    """A progress bar on a terminal; where stderr is no terminal (a log, CI, an agent's subprocess), one timestamped
    line on stderr per new description instead (KLINEAGE_PROGRESS_LINES: see _progress). Run 17's memory-base build
    wrote nothing to its logs in 3 minutes, and which of its five runs was slow could not be told; a single
    `klineage optimize` on the H200 (session 14) wrote nothing in the 175 s it had before it was cut."""

    def __init__(self, *columns, lines: bool = False, **kwargs):
        super().__init__(*columns, **kwargs)
        self._lines, self._said = lines, ""

    def update(self, task_id, *, description: str | None = None, **kwargs) -> None:
        if self._lines and description and description != self._said:
            import time

            self._said = description
            print(f"{time.strftime('%H:%M:%S')} {description}", file=sys.stderr, flush=True)
        super().update(task_id, description=description, **kwargs)


def _progress(quiet: bool) -> Progress:
    import os

    # unset: lines unless --json (a script reading both streams as one); 1: lines even with --json (a bench shard's
    # log, whose report is the JSON on stdout: run 19's status line counted no evaluation); 0: none
    wanted = os.environ.get("KLINEAGE_PROGRESS_LINES", "")
    lines = not err_console.is_terminal and wanted != "0" and (not quiet or wanted == "1")
    return _LoggedProgress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=quiet or not err_console.is_terminal,
        lines=lines,
    )


if __name__ == "__main__":
    main()
