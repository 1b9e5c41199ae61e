"""The memory baseline (KernelBlaster/KernelSkill-style): a knowledge base of past outcomes (program features ->
transform, parameters -> observed speedup), filled from runs' attempts (`remember`, `remember_attempts`) and
retrieved by feature similarity, no conditions consulted (`MemoryProposer`)."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from klineage import launch_config
from klineage.config import Settings, write_whole
from klineage.features import features, similarity
from klineage.program import Program
from klineage.proposers.base import (
    LAUNCH_CONFIG,
    Candidate,
    Proposer,
    best_first,
    families,
    retuned,
    rewritten,
    sites_in,
)
from klineage.workload import UserError, Workload


@dataclass(frozen=True)
class MemoryEntry:
    features: dict
    transform: str
    params: dict
    speedup: float | None  # observed; None where nothing was timed
    passed: bool
    source: str  # which run it came from


def memory_path(settings: Settings) -> Path:
    return settings.data_dir / "memory.json"


def load_memory(path: Path) -> list[MemoryEntry]:
    if not path.is_file():
        return []
    return [MemoryEntry(**e) for e in json.loads(path.read_text())]


def memory_base(settings: Settings, memory: Path | None = None) -> list[MemoryEntry]:
    """The memory baseline's knowledge base (`memory`, else the data directory's); a missing or empty one is a user
    error, raised before any budget is spent."""
    path = Path(memory) if memory else memory_path(settings)
    entries = load_memory(path)
    if not entries:
        raise UserError(f"no memory knowledge base at {path} (run `klineage memory build` first)")
    return entries


def remember(trajectory, workload: Workload, path: Path) -> int:
    """Append a run's attempts (a klineage.optimize.Trajectory's) to the knowledge base (program features ->
    transform -> observed outcome)."""
    return remember_attempts(
        trajectory.attempts, features(trajectory.start, workload), f"{trajectory.workload}:{trajectory.method}", path
    )


def remember_attempts(attempts: list, feats: dict[str, float], source: str, path: Path) -> int:
    """Append attempts (klineage.optimize.Attempt) made on a program with features `feats`; `memory build` calls
    this after every attempt, so a build stopped at a deadline keeps what it learned."""
    return append_memory(memory_entries(attempts, feats, source), path)


def memory_entries(attempts: list, feats: dict[str, float], source: str) -> list[MemoryEntry]:
    """What the knowledge base keeps of attempts made on a program with features `feats`: the transform, its
    parameters, the observed speedup (None where nothing was timed), whether it passed its gates."""
    entries = []
    for a in attempts:
        c = a.candidate
        speedup = a.effect.get("speedup") if a.effect.get("measured") else None
        entries.append(MemoryEntry(feats, c.transform, c.params, speedup, a.outcome != "failed_gate", source))
    return entries


def append_memory(entries: list[MemoryEntry], path: Path) -> int:
    """The knowledge base at `path` with `entries` after what it holds, written whole; how many were added."""
    write_memory([*load_memory(path), *entries], path)
    return len(entries)


def write_memory(entries: list[MemoryEntry], path: Path) -> int:
    """The knowledge base at `path` made exactly `entries` (written beside, then renamed over: a build ends by a
    kill at its deadline); how many it holds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, json.dumps([asdict(e) for e in entries], indent=1))
    return len(entries)


def _remembered(program, module, transform, source, site, params) -> Program | None:
    """The remembered parameters, else the family's defaults where those do not fit this program."""
    fallback = transform.blind_params(source, site)
    new = rewritten(transform, source, site, params) or (
        rewritten(transform, source, site, fallback) if fallback is not None else None
    )
    return program.with_source(module, new) if new is not None else None


class MemoryProposer(Proposer):
    """Past outcomes retrieved by feature similarity: transforms that helped similar programs, with the parameters
    that helped, ranked by similarity x observed speedup. No conditions are consulted."""

    method = "memory"

    def __init__(self, workload, settings, device, memory: list[MemoryEntry]):
        super().__init__(workload, settings, device)
        self.memory = memory
        self.transforms = families()

    def propose(self, program: Program) -> list[Candidate]:
        here = features(program, self.workload)
        # log-speedup plus a small bonus for a pass: a slowdown or a failure scores below zero and is not proposed
        ranked = sorted(
            (
                (
                    similarity(here, e.features) * (math.log(max(e.speedup or 1.0, 1e-3)) + (0.01 if e.passed else -1)),
                    i,
                    e,
                )
                for i, e in enumerate(self.memory)
            ),
            key=lambda t: -t[0],
        )
        out = []
        for score, i, entry in ranked:
            if score > 0:
                out.extend(self._recalled(program, i, entry, math.exp(score)))
        return best_first(out)

    def _recalled(self, program: Program, i: int, entry: MemoryEntry, expected: float) -> list[Candidate]:
        """The remembered outcome applied to this program: its launch parameters of the same names, or its family at
        every site, with the parameters remembered."""
        if entry.transform == LAUNCH_CONFIG:
            return list(self._retuned(program, i, entry, expected))
        transform = self.transforms.get(entry.transform)
        if transform is None:
            return []
        return [
            Candidate(
                f"remembered {transform.id} at {site.function}:{site.line}",
                f"memory:{i}",
                transform.id,
                module,
                site.function,
                entry.params,
                expected,
                "",
                (),
                functools.partial(_remembered, program, module, transform, source, site, entry.params),
                site.before,
            )
            for module, source, site in sites_in(transform, program)
        ]

    def _retuned(self, program: Program, i: int, entry: MemoryEntry, expected: float):
        for module, source in program.module_sources():
            tunables = launch_config.tunables(source)
            names = {t.keyword: t for t in tunables}
            values = {
                names[k.split(".")[-1]].key: v
                for k, v in entry.params.items()
                if k.split(".")[-1] in names and names[k.split(".")[-1]].value != v
            }
            if values:
                yield Candidate(
                    f"remembered {launch_config.describe(values)}",
                    f"memory:{i}",
                    LAUNCH_CONFIG,
                    module,
                    tunables[0].function,
                    values,
                    expected,
                    "",
                    (),
                    functools.partial(retuned, program, module, source, values),
                )
