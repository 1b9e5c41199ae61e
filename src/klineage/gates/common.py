"""What every gate shares: the `Verdict` a gate returns, the `GateRequest` a gate job receives, and the child-side
setup each job starts with (import the workload and program, build models, place inputs on the device, time on
rotating input sets)."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from klineage.compare import Finding
from klineage.config import Settings
from klineage.program import Program


@dataclass(frozen=True)
class Verdict:
    """A gate's result. status: pass | fail | error | skip. `code` is a stable slug for the first reason
    (empty on pass); `metrics` are numbers worth tabulating; `evidence` is what a reader needs to believe it."""

    gate: str
    status: str
    code: str = ""
    reason: str = ""
    metrics: dict = field(default_factory=dict)
    evidence: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> Verdict:
        return Verdict(**d)


def fail(gate: str, finding: Finding, **extra) -> Verdict:
    return Verdict(gate, "fail", finding.code, finding.detail, **extra)


# How an allocation past the candidate's memory limit surfaces: Python's MemoryError (numpy's _ArrayMemoryError is
# one), torch.OutOfMemoryError on a GPU, or a RuntimeError whose text is the allocator's. A 17 GiB allocation under
# the CPU job's 16 GiB address-space limit came back as `forward_error` ("DefaultCPUAllocator: can't allocate
# memory"), not as the `oom` it is.
OUT_OF_MEMORY_TEXTS = (
    "CUDA out of memory",
    "CUDA error: out of memory",
    "DefaultCPUAllocator: can't allocate memory",
    "Cannot allocate memory",
)
DEVICE_MEMORY_TEXTS = ("CUDA out of memory", "CUDA error: out of memory")
ASKED = (
    re.compile(r"you tried to allocate (\d+) bytes"),  # PyTorch's CPU allocator
    re.compile(r"Tried to allocate ([\d.]+ [KMGTP]?i?B)"),  # PyTorch's CUDA allocator
    re.compile(r"Unable to allocate ([\d.]+ [KMGTP]?i?B)"),  # numpy
)


def memory_finding(error: BaseException) -> Finding | None:
    """An `oom` finding (host or device, with the size asked where the error says it) when `error` says memory ran
    out, else None."""
    name = "MemoryError" if isinstance(error, MemoryError) else type(error).__name__  # numpy's is a MemoryError
    return memory_finding_in(f"{name}: {error}")


def memory_finding_in(said: str) -> Finding | None:
    """`memory_finding` of an error as the sandbox reports one a job raised, `<type name>: <text>`: an allocation in
    the program's constructor or at import leaves the job, and is `oom` too."""
    name, _, text = said.partition(": ")
    if name not in ("MemoryError", "OutOfMemoryError") and not any(t in text for t in OUT_OF_MEMORY_TEXTS):
        return None
    where = "device" if name == "OutOfMemoryError" or any(t in text for t in DEVICE_MEMORY_TEXTS) else "host"
    asked = next((m.group(1) for pattern in ASKED if (m := pattern.search(text))), None)
    if asked is not None and asked.isdigit():
        asked = f"{int(asked) / 2**30:.2f} GiB ({asked} bytes)"
    size = f"asking for {asked}" if asked else "the size asked not reported"
    return Finding("oom", f"out of {where} memory, {size}: {name}: {text[:200]}")


@dataclass(frozen=True)
class GateRequest:
    """What a sandboxed gate job receives."""

    workload_path: str
    program: Program
    device: str  # "cpu" or "cuda"
    settings: Settings
    target: str = "sm_90"
    ceilings: dict | None = None
    # A condition probe (see probe.py): check this one case only. {"case": {...}, "layout": None | "strided" |
    # "misaligned"; optional: "inputs": predicate (inputs from the workload's make_probe_inputs), "keep_inputs":
    # True (CLOBBERED_INPUTS withdrawn: every input must come back unchanged), "compile": True (forward under
    # torch.compile), "trials": 1 or 2, "runs": 1 (the first trial once), "chunk": N (compare outputs N elements at
    # a time: a probe past 2^31 elements cannot hold float64 copies of whole outputs)}
    probe: dict | None = None


def prepare_workload(request: GateRequest, interpret: bool):
    """The workload imported in the judge (its reference, its inputs), with the interpreter fixes where the
    reference's own kernels run through the interpreter."""
    _interpreter(interpret)
    from klineage.workload import import_file, workload_from_module

    path = Path(request.workload_path)
    source = path.read_text()
    wl_module = import_file(path, "klineage_workload")
    return workload_from_module(path, source, wl_module), wl_module


def prepare_program(program: Program, interpret: bool, workdir: Path | None = None):
    """The program imported in this process with the launch tracer: (its main module, the directory of its files).
    ImportError where it defines no ModelNew."""
    import tempfile

    _interpreter(interpret)
    if interpret:  # the program runs on the CPU: CUDA in its host code maps to the CPU (cuda_on_cpu)
        from klineage.cuda_on_cpu import install as map_cuda_to_cpu

        map_cuda_to_cpu()
    from klineage.guards import install_tracer
    from klineage.program import install

    install_tracer()
    workdir = workdir or Path(tempfile.mkdtemp(prefix="klineage-program-"))
    program_module = install(program, workdir)
    if not isinstance(getattr(program_module, "ModelNew", None), type):
        raise ImportError("program defines no class ModelNew")
    return program_module, str(workdir.resolve())


def _interpreter(interpret: bool) -> None:
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"
        from klineage.interp import patch_interpreter

        patch_interpreter()
    else:
        os.environ.pop("TRITON_INTERPRET", None)


def build(cls, init_inputs):
    import torch

    torch.manual_seed(42)  # same weights for Model and ModelNew, as KernelBench does
    return cls(*copy.deepcopy(init_inputs))


def to_device(x, device: str, guard_bytes: int, log: list, layout: str | None = None):
    """Place a harness-made input on the device inside a guarded buffer (so writes past inputs are seen too).
    A probe's `layout` makes it non-contiguous ("strided": rows padded by 8 elements, vectors at stride 2) or
    misaligned by one element ("misaligned": the base is no longer 16-byte aligned)."""
    import torch

    from klineage.guards import guarded_empty

    if not isinstance(x, torch.Tensor):
        return x
    stride, shift = x.stride(), 0
    if layout == "strided" and x.dim() == 1:
        stride = (2,)  # every other element of a buffer twice as long
    elif layout == "strided" and x.dim() >= 2:
        padded = [1] * x.dim()
        padded[-2] = x.shape[-1] + 8
        for i in range(x.dim() - 3, -1, -1):
            padded[i] = padded[i + 1] * x.shape[i + 1]
        stride = tuple(padded)
    elif layout == "misaligned" and x.is_floating_point():
        shift = x.element_size()
    y = guarded_empty(x.shape, stride, x.dtype, device, guard_bytes, "input", log, shift_bytes=shift)
    y.copy_(x)
    return y


def sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def input_sets(
    wl_module, case: dict, count: int, device: str = "cuda", cache_dir: Path | None = None, write_cache: bool = True
) -> list[list]:
    """`count` input sets of one case on the GPU, seeds 0..count-1, each input in its own layout: timing cycles
    through them so the cache is not what is measured. `cache_dir`: Settings.inputs_dir (`write_cache`: see
    make_case_inputs)."""
    return [input_set(wl_module, case, seed, device, cache_dir, write_cache) for seed in range(count)]


def input_set(
    wl_module, case: dict, seed: int, device: str = "cuda", cache_dir: Path | None = None, write_cache: bool = True
) -> list:
    """input_sets' set `seed`: what the judge makes again to compare a timed call's outputs."""
    from klineage.workload import make_case_inputs, on_device

    made = make_case_inputs(wl_module, case, seed, cache_dir=cache_dir, write_cache=write_cache)
    return [on_device(x, device) for x in made]


def rotating(model, sets: list[list]):
    """A no-argument call of `model` on the next input set each time."""
    import itertools

    import torch

    cycle = itertools.cycle(sets)

    def call():
        with torch.no_grad():
            return model(*next(cycle))

    return call
