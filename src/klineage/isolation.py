"""The candidate's OS confinement: what Linux gives a process without a service to install.

The judge forks the candidate process; the candidate calls `confine` first thing, before it imports the program.
`confine` applies what it can and returns an `IsolationReport` naming each mechanism as applied or not available
(with the reason), so a machine that lacks one says so in the verdict's evidence instead of failing silently.

Judge side: `make_private_dir` before the fork (the candidate's HOME, TMPDIR and Triton cache, owned by the uid the
candidate drops to), `seal` on the data directory and home (0700, judge-owned), `end_all` when the evaluation is over
(the process group, and with it the PID namespace, killed), `remove_private_dir` after.

Why each mechanism and what was measured: docs/security.md and /work/shared/reference/judge-isolation.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534


@dataclass(frozen=True)
class Confinement:
    """What the candidate is confined to. `None` turns a limit off (reported as such, not as unavailable)."""

    private_dir: str  # the only writable directory: HOME, TMPDIR and TRITON_CACHE_DIR point inside it
    memory_bytes: int | None = 4 << 30  # allocations beyond what the process already maps, at the moment of `confine`
    device: str = "cpu"  # "cpu": RLIMIT_AS; "cuda": RLIMIT_DATA (CUDA reserves address space far beyond memory)
    max_processes: int | None = 512  # RLIMIT_NPROC, per uid, threads included (torch and CUDA start threads)
    max_file_bytes: int | None = 1 << 30  # RLIMIT_FSIZE: no single file written larger
    cpu_seconds: int | None = None  # RLIMIT_CPU; the judge's own timeout is the first line
    uid: int = NOBODY  # dropped to when running as root
    gid: int = NOBODY
    hidden: tuple[str, ...] = ()  # paths the candidate must not read (data directory, home); checked after the drop
    needs: tuple[str, ...] = ()  # paths the candidate must read (the torch/Triton install, the program's files)
    keep_fds: tuple[int, ...] | None = None  # every other descriptor closed; None leaves them all open
    pid_namespace: bool = True  # a grandchild that calls setsid() still dies with the check (one extra fork)
    network_namespace: bool = True


@dataclass(frozen=True)
class Mechanism:
    name: str  # short, stable: "uid", "netns", "pidns", "private_dir", "memory", ...
    applied: bool
    detail: str  # what was applied ("uid 65534"), or why it is not available


@dataclass(frozen=True)
class IsolationReport:
    mechanisms: tuple[Mechanism, ...]

    @property
    def applied(self) -> tuple[Mechanism, ...]:
        return tuple(m for m in self.mechanisms if m.applied)

    @property
    def unavailable(self) -> tuple[Mechanism, ...]:
        return tuple(m for m in self.mechanisms if not m.applied)

    def describe(self) -> str:
        """One line: `isolation: uid 65534, netns, ...; not available: pidns (reason), ...`."""
        line = "isolation: " + (", ".join(m.detail for m in self.applied) or "none")
        if self.unavailable:
            line += "; not available: " + ", ".join(f"{m.name} ({m.detail})" for m in self.unavailable)
        return line

    def to_json(self) -> list[list]:
        return [[m.name, m.applied, m.detail] for m in self.mechanisms]

    @classmethod
    def from_json(cls, data: list) -> IsolationReport:
        return cls(tuple(Mechanism(str(n), bool(a), str(d)) for n, a, d in data))


def confine(c: Confinement) -> IsolationReport:
    """Confine the calling process (a freshly forked, single-threaded child). Never raises: what fails is reported."""
    raise NotImplementedError


def end_all(pid: int) -> None:
    """Kill the candidate `pid` forked by the judge, its process group and (through it) its PID namespace."""
    raise NotImplementedError


def make_private_dir(uid: int = NOBODY, gid: int = NOBODY, parent: str | None = None) -> Path:
    """A fresh directory for one evaluation, owned by the candidate's uid when running as root."""
    raise NotImplementedError


def remove_private_dir(path: Path) -> None:
    raise NotImplementedError


def seal(path: str) -> str | None:
    """Make a judge-owned directory unreadable to others (mode 0700); the reason it could not, or None."""
    raise NotImplementedError
