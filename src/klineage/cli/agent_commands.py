"""The agent commands: `mcp` (the library and the gates served to an agent) and `llm-compare` (one model, with
skills and with the memory baseline's notes)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from klineage.cli.common import console, library_option, llm_budget_options, llm_client, progress_bar
from klineage.config import Settings
from klineage.workload import UserError


@click.command("mcp")
@library_option
def mcp_command(library_dir) -> None:
    """Serve the skill library and the gates to an MCP-capable agent over stdio (tools: search_skills,
    suggest_skills, apply_skill, check_program; resources: skill://<id>). See docs/AGENTS.md."""
    from klineage.mcp_server import serve

    serve(library_dir or Settings.from_env().library_dir)


@click.command("llm-compare")
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
@llm_budget_options
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
    llm_client(max_calls, max_tokens)  # a missing model setting fails now, not after the first arm
    wl, prog, dev = load_workload(workload), load_program(program), resolve_device(device)
    settings = Settings.from_env()
    with progress_bar(as_json) as progress:
        task = progress.add_task("comparing", total=None)
        arms = run_comparison(
            wl,
            prog,
            settings,
            dev,
            library_dir,  # None: the data directory's library (optimize.proposer_for)
            memory_path,
            budget,
            lambda: llm_client(max_calls, max_tokens),
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
