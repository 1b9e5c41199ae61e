"""What the attention benchmarks share (attention_operand.py, attention_gap.py, attention_skills.py): each program
variant, given as source, checked against torch's SDPA on the attention bench case's inputs, the correct ones timed
interleaved with the L2 flushed (klineage.timing), and a table stamped with the command, device, versions and date.
GPU only. Imported by those scripts from their own folder (Python puts a script's folder on its path)."""

from __future__ import annotations

import datetime
import importlib.util
import platform
from pathlib import Path

import torch
import torch.nn.functional as F
import triton

from klineage.program import Program, install
from klineage.timing import time_calls
from klineage.transform import load_families

ATTENTION = Path(__file__).resolve().parent.parent / "src" / "klineage" / "examples" / "attention"
WRONG = 1e-2  # a relative error norm against SDPA above this is a wrong program, not timed


def time_variants(programs: dict[str, str], command: str) -> dict[str, float]:
    """Check and time every program on the bench case; print each error norm, then the stamped table (median,
    spread, ratio to the first program timed). Returns the medians in ms by name."""
    spec = importlib.util.spec_from_file_location("attention_workload", ATTENTION / "workload.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    case = module.CASES["bench"]
    q, k, v = (x.cuda() for x in module.make_inputs(case, seed=0))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=case["causal"]).float()
    calls, names = [], []
    for name, source in programs.items():
        model = install(Program(name="variant", source=source)).ModelNew(case["causal"]).cuda()
        err = ((model(q, k, v).float() - want).norm() / want.norm()).item()
        print(f"{name}: relative error norm against SDPA {err:.2e}" + ("" if err < WRONG else ": wrong, not timed"))
        if err < WRONG:
            calls.append(lambda m=model: m(q, k, v))
            names.append(name)
    timings = time_calls(calls, 25.0, 400.0, 30)
    print()
    print(f"command: {command}")
    print(
        f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}, Triton {triton.__version__}, "
        f"Python {platform.python_version()}; {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
    )
    print(f"case: {case}")
    print(f"| program | median ms | spread | x {names[0]} |")
    print("| --- | --- | --- | --- |")
    for name, t in zip(names, timings):
        print(f"| {name} | {t.median_ms:.3f} | {t.spread:.3f} | x{timings[0].median_ms / t.median_ms:.3f} |")
    return {name: t.median_ms for name, t in zip(names, timings)}


def edit(source: str, old: str, new: str) -> str:
    """`source` with its one `old` replaced; stops the script where `old` is not there exactly once."""
    if source.count(old) != 1:
        raise SystemExit(f"attention benchmarks: the edit's anchor occurs {source.count(old)} times: {old!r}")
    return source.replace(old, new)


def naive_as_klineage_leaves_it(tile: tuple[int, int, int, int], half: bool = True) -> str:
    """The bundled naive attention with the causal cut (`causal_bound`) and, with `half`, P @ V on bf16 operands
    (`dot_operand_dtype`), both written by the transforms, at `tile` = (BLOCK_M, BLOCK_N, warps, stages)."""
    families = load_families()
    source = (ATTENTION / "naive.py").read_text()
    cut = families["causal_bound"]()
    source = cut.optimize(source, cut.optimize_sites(source)[0], {"order": "diagonal_first"})
    if half:
        operand = families["dot_operand_dtype"]()
        source = operand.optimize(source, operand.optimize_sites(source)[0], {"cast": "other"})
    m, n, warps, stages = tile
    source = edit(source, "BLOCK_M = BLOCK_N = 32", f"BLOCK_M, BLOCK_N = {m}, {n}")
    return edit(source, "num_warps=4, num_stages=1", f"num_warps={warps}, num_stages={stages}")
