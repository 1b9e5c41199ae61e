"""Settings and environment facts that every later stage reads: where data lives, how hard the gates check, and
which versions a result was produced with. Stages take a `Settings` argument; only `Settings.from_env` reads the
environment, so tests and the CLI can override anything in one place."""

from __future__ import annotations

import dataclasses
import functools
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path

__version__ = "0.1.0"

DEFAULT_TARGET = "sm_90"
TARGETS = ("sm_80", "sm_89", "sm_90", "sm_100")


# how long a check holds its shared turn (Settings.gpu_turns, $KLINEAGE_TURNS, sandbox.GpuTurns.hold); the first
# two are the comparison arms of benchmarks/gpu_turns.py
TURN_HOLDS = (
    "job",  # its whole job, as before 00381e5
    "yield",  # its whole job but for the points where a waiting timer goes first (yield_turn) and off_gpu sections
    "work",  # as "yield", and let go while its processes do host work: a candidate importing its program, Triton
    # compiling a kernel (host_work); the default
)


@dataclass(frozen=True)
class Tolerance:
    """Per-dtype tolerance. Elementwise: |out - ref| <= rtol * |ref| + atol * rms(ref) (the absolute term is a floor
    relative to the reference's scale, so an all-zero output never passes on small-valued data). Whole tensor:
    ||out - ref|| / ||ref|| <= norm."""

    rtol: float
    atol: float
    norm: float


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    # float32 arithmetic lands far under 1e-5 relative error on these sizes; tf32 lands near 3e-4, so a fp32
    # workload computed in tf32 or fp16 fails here unless the workload loosens its own tolerance.
    "float64": Tolerance(rtol=1e-7, atol=1e-9, norm=1e-9),
    "float32": Tolerance(rtol=1e-4, atol=1e-5, norm=1e-5),
    "float16": Tolerance(rtol=1e-2, atol=1e-3, norm=2e-3),
    "bfloat16": Tolerance(rtol=2e-2, atol=1e-2, norm=1e-2),
}


@dataclass(frozen=True)
class Settings:
    """Everything a gate needs besides the workload and the program."""

    data_dir: Path = field(default_factory=lambda: Path.home() / ".local" / "share" / "klineage")
    seeds: int = 5  # fresh seeds per correctness check, on top of the workload's named cases
    seed_base: int = 1000  # first fresh seed; a re-check with hidden seeds uses another base
    # the case fresh seeds are drawn on ("" = the workload's choice: bench on a GPU, tiny on the CPU); a long
    # GPU run (mining, optimizing) may draw them on "tiny" and still check the bench case once
    seed_case: str = ""
    timeout_s: float = 300.0  # per sandboxed evaluation
    target: str = DEFAULT_TARGET
    warm: bool = True  # reuse a warm worker that paid the torch/Triton import once
    use_cache: bool = True
    guard_bytes: int = 64 * 1024  # poisoned guard region on each side of every allocation made in forward
    profile_warmup_ms: float = 25.0
    profile_rep_ms: float = 200.0
    profile_min_reps: int = 30
    rotate_sets: int = 4  # distinct input sets cycled while timing, so the cache is not what is measured
    # on a GPU, a candidate timed faster than the current program is timed again against it in a fresh candidate
    # process (the other order) and kept only when both rounds say faster beyond their spread (optimize._confirmed;
    # KLINEAGE_CONFIRM=0 turns it off)
    confirm_gains: bool = True
    # a lineage's steps are probed side by side, each worker with its own sandbox: a quarter of the cores, 1 to 4
    probe_workers: int = field(default_factory=lambda: max(1, min(4, (os.cpu_count() or 1) // 4)))
    # jobs sharing one GPU take turns through this lock file, one per GPU ("": no turns taken); see sandbox.gpu_turn
    gpu_lock: str = ""
    # how long a check holds its shared turn: "work" (only while it may use the GPU), "yield", "job" (the comparison
    # arms of benchmarks/gpu_turns.py); see TURN_HOLDS
    gpu_turns: str = "work"
    # where bench-sized inputs are kept once drawn (a tmpfs serves best); None: `<data_dir>/inputs` (inputs_dir),
    # unless `keep_inputs` is off (KLINEAGE_INPUT_CACHE=off: drawn every time)
    input_cache: Path | None = None
    keep_inputs: bool = True
    # on a GPU, the fraction of its memory a candidate process may allocate (torch's per-process cap, set before the
    # program is imported). The most an honest candidate holds is a probe past 2^31 elements: its tensors, up to
    # probe.OVERFLOW_MAX_BYTES (24 GiB), each input and output also copied once in the candidate (the inputs kept
    # to restore, the outputs taken after the call), 48 GiB; 0.45 of an H200 (139.8 GiB) is 62.9 GiB, that and
    # room for the allocator's rounding and the program's temporaries, while the judge keeps room for its
    # reference. A program asking for more (tests/adversarial/programs/huge_alloc.py: 64 GiB) is an `oom` verdict
    candidate_device_memory: float = 0.45
    # the code's commit, where the tree travelled without its history (a device machine); "": ask git
    commit: str = ""
    # what each correctness check draws its DOMAIN case and user-like runs from; None: a fresh secret per check (a
    # candidate cannot know its shape in advance). A walk fixes it per lineage (mine.walk_draw): a step is judged on
    # the shape its expert was, and a walk replays whole after a kill; a draw that changed between checks rejected a
    # step for a bug its expert already had (the planted expert's unmasked path on cols=1536)
    check_draw: int | None = None

    @property
    def cache_path(self) -> Path:
        return self.data_dir / "cache.sqlite"

    @property
    def library_dir(self) -> Path:
        """The data directory's one default skill library: `demo` and `mine` write it, and every command that reads
        a library (`skills`, `optimize`, `bench`, `mcp`, `llm-compare`) reads it when given no --library."""
        return self.data_dir / "library"

    def replace(self, **changes) -> Settings:
        return dataclasses.replace(self, **changes)

    @property
    def inputs_dir(self) -> Path | None:
        """Where bench-sized inputs are kept once drawn: every check of a walk or a bench draws the same seeds of the
        same workload, and drawing them on the CPU took most of a GPU correctness check (softmax 8192 x 8192 fp32:
        4.8 of 5.8 s on the H200, docs/BENCHMARKS.md section 3). None: drawn every time."""
        if self.input_cache is not None:
            return self.input_cache
        return self.data_dir / "inputs" if self.keep_inputs else None

    @staticmethod
    def from_env(**overrides) -> Settings:
        env = os.environ
        base = Settings()
        if "KLINEAGE_HOME" in env:
            base = base.replace(data_dir=Path(env["KLINEAGE_HOME"]))
        elif "XDG_DATA_HOME" in env:
            base = base.replace(data_dir=Path(env["XDG_DATA_HOME"]) / "klineage")
        if "KLINEAGE_SEEDS" in env:
            base = base.replace(seeds=int(env["KLINEAGE_SEEDS"]))
        if "KLINEAGE_SEED_CASE" in env:
            base = base.replace(seed_case=env["KLINEAGE_SEED_CASE"])
        if "KLINEAGE_TIMEOUT" in env:
            base = base.replace(timeout_s=float(env["KLINEAGE_TIMEOUT"]))
        if "KLINEAGE_PROBE_WORKERS" in env:
            base = base.replace(probe_workers=max(1, int(env["KLINEAGE_PROBE_WORKERS"])))
        if env.get("KLINEAGE_CONFIRM") == "0":
            base = base.replace(confirm_gains=False)
        if env.get("KLINEAGE_COLD") == "1":
            base = base.replace(warm=False)
        if env.get("KLINEAGE_GPU_LOCK"):
            base = base.replace(gpu_lock=env["KLINEAGE_GPU_LOCK"])
        if env.get("KLINEAGE_TURNS") in TURN_HOLDS:
            base = base.replace(gpu_turns=env["KLINEAGE_TURNS"])
        if env.get("KLINEAGE_INPUT_CACHE") in ("off", "0"):
            base = base.replace(keep_inputs=False)
        elif env.get("KLINEAGE_INPUT_CACHE"):
            base = base.replace(input_cache=Path(env["KLINEAGE_INPUT_CACHE"]))
        if env.get("KLINEAGE_COMMIT"):
            base = base.replace(commit=env["KLINEAGE_COMMIT"])
        return base.replace(**{k: v for k, v in overrides.items() if v is not None})


def write_whole(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: into a file beside it, then renamed over it. Long runs end by a
    kill at their deadline (`timeout` in benchmarks/h200_eval.sh), and a plain write cut there leaves half a file
    that the next run, a resume or a merge cannot read."""
    import threading

    partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    partial.write_text(text)
    partial.replace(path)


def warn(text: str) -> None:
    """One line on stderr, `warning: ` and `text`: damaged state this run recovered from and went on without (a
    verdict cache moved aside, a skill file left out), said where a script's JSON on stdout is not disturbed."""
    import sys

    line = text.replace("\r", " ").replace("\n", " ")  # one line, whatever an error message holds
    print(f"warning: {line}", file=sys.stderr, flush=True)


def clip(text: str, limit: int, tail: bool = False) -> str:
    """`text` whole when it holds at most `limit` characters; else its first (or, with `tail`, last) whole lines
    within `limit` and how much was left out. A single line too long is cut at a space, never mid-word where a space
    allows. For stored evidence and summaries; a reason a user reads in a report is shown whole. A compile error cut
    at a fixed character count read `...offs = pid * BLOCK + tl.a` (issue 31)."""
    text = str(text)
    if len(text) <= limit:
        return text
    lines = text.splitlines(keepends=True)
    kept, size = [], 0
    for line in reversed(lines) if tail else lines:
        if size + len(line) > limit:
            break
        kept.append(line)
        size += len(line)
    if kept:
        shown = "".join(reversed(kept) if tail else kept).strip("\n")
    else:  # one line longer than the limit: cut at a space
        piece = text[-limit:] if tail else text[:limit]
        cut = piece.find(" ") + 1 if tail else piece.rfind(" ")
        shown = (piece[cut:] if tail else piece[:cut]) if 0 < cut < len(piece) else piece
    note, gap = f"[{len(text) - len(shown)} characters left out]", "\n" if kept else " "
    return f"{note}{gap}{shown}" if tail else f"{shown}{gap}{note}"


@functools.cache
def versions() -> dict[str, str]:
    """Versions that decide whether a cached verdict still holds."""
    import torch
    import triton

    return {
        "klineage": __version__,
        "harness": harness_hash(),
        "torch": torch.__version__.split("+")[0],
        "triton": triton.__version__,
        "python": platform.python_version(),
    }


# the modules a verdict depends on (a name is a module file or a package); mining and optimizing code can change
# without invalidating verdicts
GATE_MODULES = (
    "config",
    "isolation",
    "shrink",
    "workload",
    "program",
    "compare",
    "wire",
    "interp",
    "cuda_on_cpu",
    "guards",
    "sass",
    "outcome",
    "sandbox",
    "timing",
    "gates",
)


def gate_files() -> list[Path]:
    """Every file of GATE_MODULES: a module's file, or each file of a package (gates/)."""
    root = Path(__file__).parent
    files = []
    for name in GATE_MODULES:
        package = root / name
        files += sorted(package.rglob("*.py")) if package.is_dir() else [root / f"{name}.py"]
    return files


@functools.cache
def harness_hash() -> str:
    """Hash of KLineage's own modules: a cached verdict from a different harness (an upgrade, a local edit) is not
    reused, even under the same version number."""
    import hashlib

    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in gate_files():
        digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:12]


@functools.cache
def cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # a broken driver install is the same as no GPU for us
        return False


def device_name(device: str) -> str:
    """A stable name for the machine a verdict was produced on."""
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"cpu-interpreter-{platform.machine()}"


def device_kind(name: str) -> str:
    """`cpu` or `cuda`: the kind of device a `device_name` names."""
    return "cpu" if name.startswith("cpu-interpreter-") else "cuda"
