"""What the commands share: a user mistake as one line and exit code 2, progress on stderr, the tables they print,
and the settings and the model client they build."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from klineage.config import Settings, clip
from klineage.workload import UserError

console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)

EXAMPLES_DIR = Path(__file__).parent.parent / "examples"


# --- a user mistake: one line, exit code 2 ----------------------------------------------------------------------------


class Group(click.Group):
    """Turn a `UserError` anywhere below into one line and exit code 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as e:
            click.echo(f"error: {e}", err=True)  # one line, never wrapped
            sys.exit(2)


# --- progress on stderr -----------------------------------------------------------------------------------------------


class _LoggedProgress(Progress):
    """A progress bar on a terminal; where stderr is no terminal (a log, CI, an agent's subprocess), one timestamped
    line on stderr per new description instead (KLINEAGE_PROGRESS_LINES: see progress_bar). A memory-base build on
    the H200 wrote nothing to its logs in 3 minutes, and which of its five runs was slow could not be told
    (RESULTS.md#run-17); a single `klineage optimize` there wrote nothing in the 175 s it had before it was cut
    (RESULTS.md#run-19). A task says its description when it is added, so the first line comes at once; a step that
    runs on says so again every HEARTBEAT_S seconds, with the time it has taken: a 256x1000 elementwise kernel's
    self-reference run printed nothing for 4.5 minutes on 2 cores (issue 31)."""

    HEARTBEAT_S = 30.0

    def __init__(self, *columns, lines: bool = False, quiet: bool = False, **kwargs):
        super().__init__(*columns, **kwargs)
        self._lines, self._said, self._quiet = lines, "", quiet
        self._since = self._heard = 0.0
        self._beat: threading.Thread | None = None
        self._done = threading.Event()

    def add_task(self, description: str, *args, **kwargs):
        task = super().add_task(description, *args, **kwargs)
        self._log(description)
        return task

    def update(self, task_id, *, description: str | None = None, **kwargs) -> None:
        if description:
            self._log(description)
        super().update(task_id, description=description, **kwargs)

    def say(self, text: str) -> None:
        """A line that stays (above the bar on a terminal; a line in a log), unless the run is quiet (--json)."""
        if self._lines:
            self._print(text)
        elif not self._quiet:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def _log(self, description: str) -> None:
        if not self._lines or description == self._said:
            return
        self._said, self._since = description, time.monotonic()
        self._print(description)
        if self._beat is None:
            self._beat = threading.Thread(target=self._heartbeat, daemon=True)
            self._beat.start()

    def _print(self, text: str) -> None:
        self._heard = time.monotonic()
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)

    def _heartbeat(self) -> None:
        while not self._done.wait(1.0):
            now = time.monotonic()
            if self._said and now - self._heard >= self.HEARTBEAT_S:
                self._print(f"{self._said} (still running, {_elapsed(now - self._since)})")

    def stop(self) -> None:
        self._done.set()
        super().stop()


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_bar(quiet: bool) -> _LoggedProgress:
    import os

    # unset: lines unless --json (a script reading both streams as one); 1: lines even with --json (a bench shard's
    # log, whose report is the JSON on stdout: without lines its status counted no evaluation, RESULTS.md#run-19);
    # 0: none
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
        quiet=quiet or wanted == "0",
    )


def announce_workload(progress: _LoggedProgress, workload, device: str) -> None:
    """Say at once what a CPU check will run instead of a full-size case (or why it cannot), before it starts."""
    if workload.shrunk or (workload.shrink_note and device == "cpu"):
        progress.say(workload.shrunk_line())


def gate_step(gate: str, workload, device: str, settings: Settings) -> str:
    """What a gate is about to run, for a progress line: `correctness gate: case tiny (batch_size=64, dim=768) + 5
    seeds`."""
    if gate not in ("compile", "correctness"):
        return f"{gate} gate"
    names = workload.check_cases(device) if gate == "correctness" else list(workload.cases)
    if gate == "compile" and workload.shrunk and device == "cpu":
        names = workload.check_cases(device)
    shown = []
    for name in names:
        sizes = {k: v for k, v in workload.cases[name].items() if k in (workload.shrunk or {}).get("sizes", {})}
        shown.append(f"{name} ({', '.join(f'{k}={v}' for k, v in sizes.items())})" if sizes else name)
    seeds = f" + {settings.seeds} seeds" if gate == "correctness" and settings.seeds else ""
    return f"{gate} gate: case{'s' if len(shown) > 1 else ''} {', '.join(shown)}{seeds}"


# --- tables -----------------------------------------------------------------------------------------------------------


def fmt_metric(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _metrics_text(metrics: dict, limit: int = 6) -> str:
    keys = [k for k in metrics if not isinstance(metrics[k], (dict, list))][:limit]
    return ", ".join(f"{k}={fmt_metric(metrics[k])}" for k in keys)


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
            f"{failed['code']}: {clip(failed['reason'], 300)}" if failed else "",
            shown,
        )
    return table


# --- settings and the model client ------------------------------------------------------------------------------------


def settings_for(seeds: int | None, no_cache: bool, cold: bool, target: str | None) -> Settings:
    return Settings.from_env(
        seeds=seeds, use_cache=False if no_cache else None, warm=False if cold else None, target=target
    )


# the skill library a command reads or writes; None: the data directory's (optimize.proposer_for, mining)
library_option = click.option(
    "--library",
    "library_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Skill library directory (default: $KLINEAGE_HOME/library).",
)


def llm_budget_options(command):
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


def llm_client(max_calls, max_tokens):
    from klineage.llm import LLMClient, LLMConfig

    return LLMClient(LLMConfig.from_env(), max_calls=max_calls, max_tokens=max_tokens)


def with_llm(proposer, max_calls, max_tokens, repairs, mechanical=True):
    from klineage.llm_propose import llm_proposer

    return llm_proposer(proposer, llm_client(max_calls, max_tokens), mechanical, repairs)


def engine_options(command):
    """Where a command's tasks run (klineage.scale): neither option, here, one after another, as always. The
    single process's own ways to share a suite or a GPU (--shard, --queue, KLINEAGE_GPU_LOCK) are not the
    cluster's: refused with either option (--shard, --queue), or not passed on to the workers (the lock)."""
    command = click.option(
        "--workers",
        type=int,
        default=None,
        help="Run the tasks on a local Dask cluster of this many worker processes (with --device cuda: at most one "
        "per GPU, each seeing only its own; KLINEAGE_GPU_LOCK is then not used). docs/scale.md",
    )(command)
    return click.option(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Run the tasks on the running Dask cluster at ADDRESS (tcp://host:8786); GPU workers offer the resource "
        "GPU=1. docs/scale.md",
    )(command)


def cpu_workers_option(command):
    """CPU-only workers beside a local cluster's GPU workers (klineage.scale): for the tasks that need no GPU."""
    return click.option(
        "--cpu-workers",
        type=int,
        default=None,
        help="With --workers N: start this many more local workers that see no GPU and offer none; they take the "
        "tasks that need no GPU (the walks of --walk-device cpu --device cuda). docs/scale.md",
    )(command)
