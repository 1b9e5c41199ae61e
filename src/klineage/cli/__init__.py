"""The `klineage` command line. Thin: parse, call one function per verb, render. A user mistake (a malformed
workload, a program that does not parse, a missing file) is one line on stderr and exit code 2; a failing gate is
exit code 1."""

from __future__ import annotations

import click

from klineage.cli.agent_commands import llm_compare, mcp_command
from klineage.cli.bench_commands import bench, bench_merge, memory
from klineage.cli.common import Group
from klineage.cli.gate_commands import audit, bundled_examples, check, examples
from klineage.cli.mine_commands import effects, mine, mine_ecosystem, skills
from klineage.cli.optimize_commands import demo, optimize, optimize_many


@click.group(cls=Group)
@click.version_option(package_name="klineage")
def main() -> None:
    """KLineage: verified optimization skills for Triton kernels, under hardened gates."""


# by stage: gates and mining, then optimizing, evaluation and agents (`klineage --help` sorts them by name)
for command in (check, audit, examples, mine, mine_ecosystem, skills, effects, optimize, optimize_many, demo):
    main.add_command(command)
for command in (bench, bench_merge, memory, mcp_command, llm_compare):
    main.add_command(command)

__all__ = ["bundled_examples", "main"]
