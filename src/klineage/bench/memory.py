"""The memory baseline's knowledge base, built by blind optimization runs on a suite's instances."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from klineage.bench.run import say_attempt
from klineage.bench.suites import Instance
from klineage.config import Settings
from klineage.optimize import features, optimize, proposer_for, remember_attempts
from klineage.sandbox import Sandbox
from klineage.workload import UserError, load_workload


def build_memory(
    instances: list[Instance],
    settings: Settings,
    device: str,
    budget: int,
    path: Path,
    on_progress: Callable[[str], None] | None = None,
) -> tuple[int, dict[str, str]]:
    """The memory baseline's knowledge base: blind optimization runs on the given instances (the experts' simplest
    forms), every attempt remembered with its program's features and observed outcome. Returns the outcomes added
    and the instances skipped, with why (a start that fails its gates on this device teaches nothing)."""
    added, skipped = 0, {}
    with Sandbox(warm=settings.warm) as sandbox:
        for inst in instances:
            if on_progress:
                on_progress(inst.name)
            workload = load_workload(inst.workload)
            proposer = proposer_for("blind", workload, settings, device)
            # each attempt written as it is made: a build cut at a deadline keeps what it learned
            write = functools.partial(
                remember_attempts, feats=features(inst.start, workload), source=f"{workload.name}:blind", path=path
            )
            written: list[int] = []  # outcomes added per attempt

            def remembered(a, write=write, written=written, name=inst.name) -> None:
                written.append(write([a]))
                say_attempt(on_progress, name, a)

            try:
                optimize(
                    workload,
                    inst.start,
                    proposer,
                    settings,
                    device,
                    budget,
                    sandbox,
                    explore=True,
                    on_attempt=remembered,
                )
            except UserError as e:
                skipped[inst.name] = str(e)
            added += sum(written)
    return added, skipped
