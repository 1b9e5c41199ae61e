"""Workloads: what must be computed. A workload file is a KernelBench problem file (`Model`, `get_inputs`,
`get_init_inputs`), optionally with KLineage's extensions: named cases, `make_inputs(case, seed)`, the input domain,
tolerances per dtype, flops and bytes per case, inputs the op mutates in place, allowed input distributions,
PyTorch ops a program may run on the host (HOST_OPS: an expert's bookkeeping, such as Liger's final loss sum), and
the probe hooks: inputs the caller lets the op overwrite (CLOBBERED_INPUTS, withdrawn by the `no_aliasing` probe)
and probe cases only the workload can make (PROBES, with an optional `make_probe_inputs`).

Loading runs the file, so it happens in the caller for validation (a malformed file becomes one `WorkloadError`
line) and again inside every sandboxed evaluation."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import math
import os
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from klineage.config import DEFAULT_TOLERANCES, Tolerance
from klineage.shrink import ELEMENT_BUDGET, Shrunk, derive, rebind

DISTRIBUTIONS = ("normal", "heavy_tailed", "uniform_signed", "scaled")
DTYPES = ("float16", "bfloat16", "float32", "float64")


class UserError(Exception):
    """A mistake in what the user gave us; the CLI prints it as one line and exits non-zero."""


class WorkloadError(UserError):
    pass


def normalized_source(source: str) -> str:
    """Source with comments and formatting removed, so cosmetic edits keep the same identity."""
    try:
        return ast.unparse(ast.parse(source))
    except SyntaxError:
        return source


def source_hash(*sources: str) -> str:
    digest = hashlib.sha256()
    for source in sources:
        digest.update(normalized_source(source).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Workload:
    """A loaded, validated workload file. `cases` maps a case name to its parameter dict; a plain KernelBench file
    has the single case "default" made by `get_inputs()`, or, when that case is over the element budget of a CPU
    check, a "tiny" case derived from it by rebinding its module-level sizes and the full-size "bench" case
    (shrink.py)."""

    path: Path
    name: str
    source: str
    hash: str
    cases: dict[str, dict] = field(hash=False)
    domain: dict = field(hash=False)
    tolerances: dict[str, Tolerance] = field(hash=False)
    mutated_inputs: tuple[int, ...] = ()
    distributions: tuple[str, ...] = DISTRIBUTIONS
    has_extensions: bool = False
    has_roofline: bool = False
    host_ops: tuple[str, ...] = ()  # PyTorch ops a program may run on the host (bookkeeping, final reductions)
    # probe hooks: inputs whose contents the caller never reads again (the op may overwrite them with anything),
    # and per condition predicate the case overrides of probe cases that only the workload can make
    clobbered_inputs: tuple[int, ...] = ()
    probes: dict[str, list[dict]] = field(default_factory=dict, hash=False)
    # a plain file whose only case is full size: the derived small case's sizes (shrink.Shrunk.as_dict), or why
    # there is none where one was wanted (a line for the user)
    shrunk: dict | None = field(default=None, hash=False)
    shrink_note: str = ""

    def shrunk_line(self) -> str:
        """What the CPU check runs instead of the full-size case, in one line ("" where nothing was derived)."""
        if self.shrunk:
            return Shrunk.line_of(self.shrunk)
        return f"{self.name}: {self.shrink_note}" if self.shrink_note else ""

    def tolerance(self, dtype: str) -> Tolerance:
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["float32"]))

    def check_cases(self, device: str) -> list[str]:
        """Named cases a correctness check runs on this device: on the CPU every case but "bench" and those marked
        for the GPU (the interpreter runs the tiny ones in seconds); on a GPU every case."""
        if device == "cuda":
            return list(self.cases)
        return [n for n, c in self.cases.items() if n != "bench" and c.get("device", "any") != "cuda"]

    def seed_case(self, device: str) -> str:
        """The case that fresh seeds are drawn on."""
        for name in ("bench", "tiny") if device == "cuda" else ("tiny",):
            if name in self.cases:
                return name
        return next(iter(self.cases))

    def bench_case(self) -> str:
        return "bench" if "bench" in self.cases else next(iter(self.cases))


def import_file(path: Path, module_name: str) -> types.ModuleType:
    """Execute a Python file as a fresh module (not cached under its name, so two loads never share state)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(module_name, None)
    return module


def load_workload(path: str | Path, shown_as: str = "") -> Workload:
    """Load and validate a workload file; raise `WorkloadError` with one line naming the problem, and the file as
    `shown_as` says (a generated workload names the user's file it was made from: reference.py)."""
    path = Path(path)
    label = shown_as or f"workload {path}"
    if not path.is_file():
        raise WorkloadError(f"{label}: no such file")
    source = path.read_text()
    try:
        ast.parse(source)
    except SyntaxError as e:
        raise WorkloadError(f"{label}: syntax error at line {e.lineno}: {e.msg}") from None
    try:
        module = import_file(path, f"klineage_workload_{source_hash(source)}")
    except Exception as e:
        raise WorkloadError(f"{label}: failed to import: {type(e).__name__}: {e}") from None
    return workload_from_module(path, source, module, shown_as)


def workload_from_module(path: Path, source: str, module: types.ModuleType, shown_as: str = "") -> Workload:
    def fail(why: str) -> WorkloadError:
        return WorkloadError(f"{shown_as or f'workload {path}'}: {why}")

    model = getattr(module, "Model", None)
    if not isinstance(model, type):
        raise fail("defines no class Model (the PyTorch reference)")
    if not callable(getattr(module, "get_inputs", None)) and not hasattr(module, "make_inputs"):
        raise fail("defines no function get_inputs()")
    init = getattr(module, "get_init_inputs", None)  # optional: no arguments to Model()
    if init is not None and not callable(init):
        raise fail("get_init_inputs must be a function returning Model()'s arguments")
    cases = getattr(module, "CASES", None)
    has_extensions = cases is not None
    shrunk, note = None, ""
    if cases is None and callable(getattr(module, "make_inputs", None)):
        cases = {"default": {}}
    elif cases is None:
        # a self-reference workload's reference is a Triton program too, run in the interpreter beside the candidate
        found = derive(module, ELEMENT_BUDGET // 4 if getattr(module, "NATIVE_REFERENCE", False) else ELEMENT_BUDGET)
        shrunk, note = found.shrunk, found.note
        if shrunk is None:
            cases = {"default": {}}
        else:  # a small case for the interpreter; the full one is the GPU's (workload.check_cases)
            cases = {"tiny": shrunk.small(), "bench": {**shrunk.full(), "device": "cuda"}}
    if not isinstance(cases, dict) or not cases or not all(isinstance(v, dict) for v in cases.values()):
        raise fail("CASES must be a non-empty dict of case name -> dict of parameters")
    if has_extensions and not callable(getattr(module, "make_inputs", None)):
        raise fail("declares CASES but no make_inputs(case, seed)")
    for name, case in cases.items():
        if "dtype" in case and case["dtype"] not in DTYPES:
            raise fail(f"case {name!r} has dtype {case['dtype']!r}; expected one of {', '.join(DTYPES)}")
    tolerances = dict(DEFAULT_TOLERANCES)
    for dtype, tol in (getattr(module, "TOLERANCES", None) or {}).items():
        if dtype not in DTYPES or not isinstance(tol, dict):
            raise fail(f"TOLERANCES[{dtype!r}] must be a dict for one of {', '.join(DTYPES)}")
        base = DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["float32"])
        try:
            tolerances[dtype] = Tolerance(**{**base.__dict__, **tol})
        except TypeError as e:
            raise fail(f"TOLERANCES[{dtype!r}]: {e}") from None
    distributions = tuple(getattr(module, "DISTRIBUTIONS", DISTRIBUTIONS))
    unknown = [d for d in distributions if d not in DISTRIBUTIONS]
    if unknown or not distributions:
        raise fail(f"DISTRIBUTIONS has {unknown or 'nothing'}; known: {', '.join(DISTRIBUTIONS)}")
    host_ops = tuple(getattr(module, "HOST_OPS", ()))
    if not all(isinstance(op, str) and op.isidentifier() for op in host_ops):
        raise fail("HOST_OPS must be a tuple of aten op names, e.g. ('sum', 'ne')")
    mutated = tuple(getattr(module, "MUTATED_INPUTS", ()))
    if not all(isinstance(i, int) for i in mutated):
        raise fail("MUTATED_INPUTS must be a tuple of input indices")
    clobbered = tuple(getattr(module, "CLOBBERED_INPUTS", ()))
    if not all(isinstance(i, int) for i in clobbered) or set(clobbered) & set(mutated):
        raise fail("CLOBBERED_INPUTS must be a tuple of input indices, none of them in MUTATED_INPUTS")
    probes = _probe_overrides(getattr(module, "PROBES", None) or {}, fail)
    return Workload(
        path=path.resolve(),
        name=path.stem if path.stem != "workload" else path.parent.name,
        source=source,
        hash=source_hash(source),
        cases=cases,
        domain=dict(getattr(module, "DOMAIN", None) or {}),
        tolerances=tolerances,
        mutated_inputs=mutated,
        distributions=distributions,
        has_extensions=has_extensions,
        has_roofline=callable(getattr(module, "flops", None)) and callable(getattr(module, "bytes_moved", None)),
        host_ops=host_ops,
        clobbered_inputs=clobbered,
        probes=probes,
        shrunk=shrunk.as_dict() if shrunk else None,
        shrink_note=note,
    )


def _probe_overrides(declared, fail) -> dict[str, list[dict]]:
    """PROBES: {predicate: overrides or [overrides, ...]}, each a dict of case keys to change (may be empty)."""
    if not isinstance(declared, dict):
        raise fail("PROBES must be a dict of condition predicate -> case overrides (a dict, or a list of dicts)")
    out = {}
    for predicate, value in declared.items():
        items = value if isinstance(value, list) else [value]
        if not isinstance(predicate, str) or not items or not all(isinstance(v, dict) for v in items):
            raise fail(f"PROBES[{predicate!r}] must be a dict of case overrides or a non-empty list of them")
        out[predicate] = [dict(v) for v in items]
    return out


# --- inputs (used inside the sandbox) -------------------------------------------------------------------------


def make_case_inputs(
    module: types.ModuleType,
    case: dict,
    seed: int,
    distribution: str = "normal",
    probe: str | None = None,
    cache_dir: Path | None = None,
    write_cache: bool = True,
) -> list:
    """Inputs for one case and seed, on the CPU. Floating tensors are redrawn from `distribution` (same shape, dtype
    and seed) so that a check sees heavy-tailed and signed data, not only what the workload's maker draws. With
    `probe` (a condition predicate the workload lists in PROBES), the workload's `make_probe_inputs(predicate,
    case, seed)` makes them when it is defined and returns something other than None. With `cache_dir`
    (Settings.inputs_dir), bench-sized inputs are kept there once drawn (`write_cache`: by a judge; a candidate
    process reads the cache, its view of it read-only)."""
    import torch

    cache = _input_cache_path(cache_dir, module, case, seed, distribution, probe)
    if cache is not None and cache.is_file():
        try:
            loaded = torch.load(cache, weights_only=True)
            if write_cache:
                os.utime(cache)  # the most recently used is pruned last (prune_input_cache)
            return loaded
        except Exception:  # a file cut by a kill: make them again
            pass
    made = None
    if probe is not None and callable(getattr(module, "make_probe_inputs", None)):
        made = module.make_probe_inputs(probe, case, seed)
    if made is not None:
        inputs = list(made)
    elif callable(getattr(module, "make_inputs", None)):
        inputs = list(module.make_inputs(case, seed))
    else:
        rebind(module, case)  # a derived case's sizes (shrink.py)
        torch.manual_seed(seed)
        inputs = list(module.get_inputs())
    if distribution != "normal":
        gen = torch.Generator().manual_seed(seed * 7919 + 17)
        inputs = [redraw(x, distribution, gen) if _is_float_tensor(x) else x for x in inputs]
    size = sum(x.nbytes for x in inputs if isinstance(x, torch.Tensor))
    if write_cache and cache is not None and INPUT_CACHE_MIN_BYTES <= size <= INPUT_CACHE_MAX_BYTES:
        cache.parent.mkdir(parents=True, exist_ok=True)
        prune_input_cache(cache.parent, INPUT_CACHE_BYTES - size)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        torch.save(inputs, partial)
        partial.replace(cache)  # whole or absent: a reader never sees half a file
    return inputs


# Bench-sized inputs drawn on the CPU cost seconds each (cross-entropy's 8192 x 32000 logits: 4.4 s on this 2-core
# machine; softmax 8192 x 8192 fp32, four sets and four redrawn: 4.8 s of a 5.8 s correctness check on the H200) and
# every check of a walk or a bench draws the same ones. Below this size drawing is cheaper than a file.
INPUT_CACHE_MIN_BYTES = 32 * 2**20
# a set larger than this is drawn every time (a probe past 2^31 elements, up to 24 GiB, is drawn once per probe)
INPUT_CACHE_MAX_BYTES = 4 * 2**30
# what the cache keeps at most, the least recently used sets removed first (Settings.inputs_dir is in the data
# directory by default: a disk, not memory)
INPUT_CACHE_BYTES = 16 * 2**30


def prune_input_cache(root: Path, keep_bytes: int) -> int:
    """Remove the least recently used input sets under `root` until at most `keep_bytes` remain (a file another
    judge removes meanwhile is skipped). Returns the files removed."""
    entries = []
    for path in Path(root).glob("*.pt"):
        try:
            stat = path.stat()
        except OSError:
            continue
        entries.append((stat.st_mtime, stat.st_size, path))
    total, removed = sum(size for _, size, _ in entries), 0
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= keep_bytes:
            break
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
        total -= size
    return removed


def _input_cache_path(
    root: Path | None, module: types.ModuleType, case: dict, seed: int, distribution: str, probe: str | None
) -> Path | None:
    """Where the input cache `root` (a directory; a tmpfs such as /dev/shm serves best) keeps these inputs: keyed by
    the workload file's content, the case, seed, distribution and probe. None: nothing is cached."""
    source_file = getattr(module, "__file__", None)
    if not root or not source_file:
        return None
    key = json.dumps(
        [source_hash(Path(source_file).read_text()), case, seed, distribution, probe], sort_keys=True, default=str
    )
    return Path(root) / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.pt"


def make_case_init_inputs(module: types.ModuleType, case: dict) -> list:
    if callable(getattr(module, "make_init_inputs", None)):
        return list(module.make_init_inputs(case))
    if not callable(getattr(module, "make_inputs", None)):
        rebind(module, case)  # a derived case's sizes (shrink.py)
    if not callable(getattr(module, "get_init_inputs", None)):
        return []  # optional in an inputs file: Model() takes no arguments
    return list(module.get_init_inputs())


def _is_float_tensor(x: Any) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.is_floating_point()


def redraw(x, distribution: str, gen):
    """Same shape and dtype, values from another distribution: heavy-tailed (defeats closed-form and subsample
    cheats), uniform signed, or normal scaled up (finds fp16 overflow)."""
    import torch

    shape = x.shape
    if distribution == "heavy_tailed":
        # signed Pareto (tail index 2.5: finite variance, rare values hundreds of times the typical one)
        u = torch.rand(shape, generator=gen, dtype=torch.float32).clamp_min(1e-12)
        sign = torch.randint(0, 2, shape, generator=gen, dtype=torch.int8).float() * 2 - 1
        values = (sign * (u.pow(-1 / 2.5) - 1)).clamp(-1e3, 1e3)
    elif distribution == "uniform_signed":
        values = torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1
    elif distribution == "scaled":
        values = torch.randn(shape, generator=gen, dtype=torch.float32) * 50.0
    else:
        raise ValueError(f"unknown distribution {distribution}")
    out = values.to(x.dtype)
    if x.stride() != out.stride():  # keep a non-contiguous layout non-contiguous
        out = torch.empty_strided(shape, x.stride(), dtype=x.dtype).copy_(out)
    return out


def on_device(x, device: str):
    """`x` on `device` with its layout. `Tensor.to` keeps the strides of a dense tensor only and copies a strided
    view (every other element, padded rows) into a contiguous one, so a workload with a strided input was timed
    on contiguous inputs: the H200's strided_add ran at 127% of its roofline that way (RESULTS.md#run-5), while its
    correctness gate (guarded buffers, layout kept) saw the stride. An expanded view (stride 0) cannot be copied
    into and arrives materialized, as before."""
    import torch

    if not isinstance(x, torch.Tensor):
        return x
    if x.is_contiguous() or any(st == 0 and n > 1 for n, st in zip(x.shape, x.stride())):
        return x.to(device)
    return torch.empty_strided(tuple(x.shape), x.stride(), dtype=x.dtype, device=device).copy_(x)


def case_roofline(module: types.ModuleType, case: dict) -> tuple[float, float] | None:
    """(flops, bytes) of one case, when the workload declares them."""
    if callable(getattr(module, "flops", None)) and callable(getattr(module, "bytes_moved", None)):
        flops, nbytes = float(module.flops(case)), float(module.bytes_moved(case))
        if math.isfinite(flops) and math.isfinite(nbytes):
            return flops, nbytes
    return None
