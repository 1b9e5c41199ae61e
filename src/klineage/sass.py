"""Static metrics of a compiled kernel, read from its cubin and PTX with the tools Triton's wheel ships (`ptxas`,
`nvdisasm`): registers, spills, shared memory, the width of global loads and stores, tensor-core and TMA
instruction counts. Works without a GPU."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path


@functools.cache
def tool(name: str) -> str | None:
    """Path of a CUDA tool: Triton's bundled copy first, then PATH."""
    try:
        import triton

        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
        if bundled.is_file() and os.access(bundled, os.X_OK):
            return str(bundled)
    except ImportError:
        pass
    from shutil import which

    return which(name)


_LOAD = re.compile(r"\b(LDGSTS|LDG|STG)\b((?:\.[A-Z0-9_]+)*)")
_TENSOR = re.compile(r"\b(HMMA|HGMMA|IMMA|QGMMA|IGMMA|UTCHMMA|UTCQMMA|DMMA)\b")
_TMA = re.compile(r"\b(UTMALDG|UTMASTG|UBLKCP|UTMAPF)\b")


def _width(suffixes: str) -> int:
    """Bits moved per thread by one load/store, from its suffixes (.128, .64, .U16, ...); 32 when unmarked."""
    for part in suffixes.split("."):
        if part in ("128", "64", "U8", "S8", "U16", "S16"):
            return {"128": 128, "64": 64, "U8": 8, "S8": 8, "U16": 16, "S16": 16}[part]
    return 32


def sass_counts(sass: str) -> dict:
    """Instruction counts from a SASS listing."""
    loads, stores = Counter(), Counter()
    for op, suffixes in _LOAD.findall(sass):
        if op in ("LDG", "LDGSTS"):  # LDGSTS: cp.async, global straight to shared memory
            loads[_width(suffixes)] += 1
        elif op == "STG":
            stores[_width(suffixes)] += 1
    tensor = Counter(_TENSOR.findall(sass))
    tma = Counter(_TMA.findall(sass))
    return {
        "global_load_widths": {str(k): v for k, v in sorted(loads.items())},
        "global_store_widths": {str(k): v for k, v in sorted(stores.items())},
        "max_load_bits": max(loads, default=0),
        "max_store_bits": max(stores, default=0),
        "tensor_core_instructions": sum(tensor.values()),
        "tensor_core_kinds": dict(tensor),
        "tma_instructions": sum(tma.values()),
        "cp_async": len(re.findall(r"\bLDGSTS\b", sass)),
    }


_PTXAS_INFO = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def ptxas_usage(ptx: str, arch: str) -> dict:
    """Registers and spills as ptxas reports them (`ptxas -v`) for this PTX and architecture."""
    ptxas = tool("ptxas-blackwell") if arch.startswith("sm_10") and tool("ptxas-blackwell") else tool("ptxas")
    if ptxas is None:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(ptx)
        gpu = arch + "a" if arch in ("sm_90", "sm_100") else arch
        proc = subprocess.run(
            [ptxas, "-v", f"--gpu-name={gpu}", str(src), "-o", str(Path(tmp) / "k.cubin")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    text = proc.stdout + proc.stderr
    regs = _PTXAS_INFO.search(text)
    spills = _SPILLS.search(text)
    out = {}
    if regs:
        out["registers"] = int(regs.group(1))
    if spills:
        out["spill_store_bytes"], out["spill_load_bytes"] = int(spills.group(1)), int(spills.group(2))
    return out


def disassemble(cubin: bytes) -> str:
    nvdisasm = tool("nvdisasm")
    if nvdisasm is None:
        return ""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        proc = subprocess.run([nvdisasm, f.name], capture_output=True, text=True, timeout=120)
    return proc.stdout


def kernel_metrics(compiled, arch: str) -> dict:
    """Metrics of one Triton `CompiledKernel` (from triton.compile or a launch's cache)."""
    asm = compiled.asm
    metrics = {"name": compiled.metadata.name, "shared_bytes": int(compiled.metadata.shared)}
    metrics["num_warps"] = int(compiled.metadata.num_warps)
    metrics["num_stages"] = int(compiled.metadata.num_stages)
    if "ttgir" in asm:
        # loads the software pipeliner made asynchronous (cp.async or TMA copies into shared memory): where a kernel
        # compiled at 2 stages or more has none, its launch's num_stages compiles the same kernel (Triton 3.6, sm_90:
        # identical cubins at 1-4 stages for loops of plain loads and loop-free kernels; a tl.dot loop differs at
        # each; benchmarks/stages_cubin.py)
        metrics["pipelined_loads"] = asm["ttgir"].count("copy_global_to_local")
    if "ptx" in asm:
        metrics.update(ptxas_usage(asm["ptx"], arch))
    if "cubin" in asm:
        metrics.update(sass_counts(disassemble(asm["cubin"])))
    return metrics
