"""The gate commands: `check` (a program's gates), `audit` (a workload's check), `examples` (the bundled pairs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.table import Table

from klineage.cli.common import (
    EXAMPLES_DIR,
    announce_workload,
    console,
    fmt_metric,
    gate_step,
    progress_bar,
    settings_for,
    verdict_table,
)
from klineage.config import DEFAULT_TARGET, TARGETS, Settings
from klineage.workload import UserError


@click.command()
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
@click.option(
    "--sanitize",
    is_flag=True,
    help="Then run the program once on its tiny case under compute-sanitizer's memcheck (GPU only).",
)
@click.option(
    "--trusted",
    is_flag=True,
    help="Your own code: the static policy's findings are shown as information, not a refusal.",
)
def check(workload, program, device, target, gates, seeds, no_cache, cold, as_json, sanitize, trusted) -> None:
    """Run the gates on PROGRAM against WORKLOAD; exit 1 if any gate fails. PROGRAM is untrusted unless
    --trusted: the static policy (imports, dynamic code, host reads in forward) refuses it before it runs."""
    from klineage.check import check as run_check
    from klineage.check import resolve_device
    from klineage.gates import GATES
    from klineage.program import load_program
    from klineage.workload import load_workload

    wanted = tuple(g.strip() for g in gates.split(",") if g.strip())
    unknown = [g for g in wanted if g not in GATES]
    if unknown:
        raise UserError(f"--gates: unknown gate {unknown[0]!r}; known: {', '.join(GATES)}")
    settings = settings_for(seeds, no_cache, cold, target)
    # a user mistake is one line: everything that can be one is found before the progress says anything
    wl = load_workload(workload)
    prog = load_program(program) if trusted else load_program(program).written_by("unchecked")
    dev = resolve_device(device)
    with progress_bar(as_json) as progress:
        task = progress.add_task(f"checking {prog.name} on {dev} against {wl.name}", total=len(wanted))
        announce_workload(progress, wl, dev)

        def on_gate(gate: str) -> None:
            text = f"checking {prog.name} on {dev}: {gate_step(gate, wl, dev, settings)}"
            progress.update(task, description=text, advance=0 if gate == wanted[0] else 1)

        report = run_check(wl, prog, settings, dev, wanted, on_gate=on_gate, inform=trusted)
        progress.update(task, completed=len(wanted))
        sanitized = None
        if sanitize:
            progress.update(task, description="compute-sanitizer")
            from klineage.sanitize import sanitize as run_sanitize

            sanitized = run_sanitize(workload, prog, gpu=dev == "cuda")
    if as_json:
        extra = {"sanitize": sanitized.__dict__} if sanitized else {}
        click.echo(json.dumps({**report.as_dict(), **extra}, indent=2, default=str))
    else:
        title = f"{prog.name} on {wl.name} ({report.device_name}, target {report.target})"
        console.print(verdict_table(report, title))
        _print_policy(report.policy)
        for line in sorted({v.evidence.get("isolation") for v in report.verdicts} - {None}):
            console.print(line, style="dim", markup=False)  # how the candidate process was confined
        if wl.shrunk_line():
            console.print(wl.shrunk_line(), style="dim", markup=False)
        if dev == "cpu":
            console.print("No GPU: correctness ran in the Triton interpreter; no time was taken.", style="dim")
        if sanitized:
            console.print(sanitized.line(), style=None if sanitized.passed else "red", markup=False)
    sys.exit(0 if report.passed and (sanitized is None or sanitized.passed) else 1)


def _print_policy(policy) -> None:
    """The static policy's line, and its findings: a refusal's in red, a trusted program's as information."""
    if policy is None:
        return
    if policy.trusted:
        console.print(f"{policy.summary()}: --trusted opts this program out of the static policy", style="yellow")
    else:
        console.print(policy.summary(), style="red" if policy.refused else "dim")
    for finding in policy.findings:
        console.print(f"  refused: {finding}", style="red")
    for finding in policy.information[:20]:
        console.print(f"  information: {finding}", style="dim")
    if len(policy.information) > 20:
        console.print(f"  ... and {len(policy.information) - 20} more (--json lists them all)", style="dim")


@click.command()
@click.argument("workload", type=click.Path(path_type=Path))
@click.option("--seeds", type=int, default=None)
@click.option("--json", "as_json", is_flag=True)
def audit(workload, seeds, as_json) -> None:
    """Flag WORKLOAD if zeros, a constant, an input or the mean output would pass its check."""
    from klineage.audit import audit as run_audit
    from klineage.workload import load_workload

    wl = load_workload(workload)
    with progress_bar(as_json) as progress:
        progress.add_task("auditing the check", total=None)
        report = run_audit(wl, settings_for(seeds, True, False, None))
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


@click.command()
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
    with progress_bar(as_json) as progress, Sandbox(warm=settings.warm) as sandbox:
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
                fmt_metric(comp.metrics.get("max_registers", "")) if comp else "",
                fmt_metric(comp.metrics.get("max_load_bits", "")) if comp else "",
                fmt_metric(prof.metrics["median_ms"]) if prof and prof.passed else "not timed",
            )
        console.print(table)
        if dev == "cpu":
            console.print(
                "No GPU: correctness ran in the Triton interpreter, compile targeted "
                f"{settings.target}; timings need a GPU."
            )
    sys.exit(0 if all(r.passed for r in reports) else 1)


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
